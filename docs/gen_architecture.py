"""Regenerate the pictures of docs/architecture.md from the code: `python docs/gen_architecture.py`.

The layer graph is derived with `ast` from the module-level imports of `unum_entry` (imports
under `if TYPE_CHECKING:` and inside functions are left out: they are types or lazy loads, not
layering); modules are grouped into the layers below. The envelope's path is the call order of
`Runtime.handle`, read from its source. `--check` exits 1 when the doc is out of date (a test
runs it).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "unum_entry"
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- generated:begin -->", "<!-- generated:end -->"

# Layer of each module (by dotted-name prefix, longest match first), top to bottom.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("platforms", ("platforms", "local", "__main__", "invocation_log")),
    ("step functions", ("asl", "callbacks")),
    ("handler loading", ("handlers",)),  # above durable functions: a durable handler is loaded through its adapter
    ("durable functions", ("durable_functions",)),
    ("steps layer", ("steps",)),  # below both front ends: a Task and a durable step build on its steps
    ("runtime core", ("runtime", "ingress", "egress", "plan", "hooks", "context", "timers")),
    ("rules", ("checkpoint", "fanin", "outcome", "history", "watchdog", "redrive", "task_tokens", "ramp")),
    ("adapters", ("stores", "invokers", "tracing", "retention")),  # retention: the expiry of every write, the invokers' by-reference envelopes too
    ("foundation", ("errors", "codec", "packing", "frozen", "naming", "envelope", "ir", "conditions", "jsonpath", "workflow", "urls", "yielding_lock", "opaque_text")),
)


def layer_of(module: str) -> str | None:
    first = module.split(".")[0]
    for layer, prefixes in LAYERS:
        if first in prefixes:
            return layer
    return None


def module_imports(path: Path) -> set[str]:
    """The unum_entry modules `path` imports at module level (not under TYPE_CHECKING)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("unum_entry"):
            if node.module == "unum_entry":
                found.update(f"unum_entry.{a.name}" for a in node.names)
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("unum_entry."))
    return {name.removeprefix("unum_entry.") for name in found}


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if parts:
            out[".".join(parts)] = path
    return out


def layer_graph() -> str:
    edges: dict[tuple[str, str], int] = {}
    for name, path in modules().items():
        src = layer_of(name)
        for target in module_imports(path):
            dst = layer_of(target)
            if src and dst and src != dst:
                edges[(src, dst)] = edges.get((src, dst), 0) + 1
    ids = {layer: f"L{i}" for i, (layer, _) in enumerate(LAYERS)}
    lines = ["```mermaid", "flowchart TD"]
    for layer, prefixes in LAYERS:
        lines.append(f'  {ids[layer]}["{layer}<br/><small>{", ".join(prefixes)}</small>"]')
    for (src, dst), count in sorted(edges.items()):
        lines.append(f"  {ids[src]} -->|{count}| {ids[dst]}")
    lines.append("```")
    return "\n".join(lines)


def envelope_path() -> str:
    """The calls `Runtime.handle` makes, in source order, as a sequence diagram."""
    tree = ast.parse((PACKAGE / "runtime.py").read_text())
    handle = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "handle")
    who = {"intercept": "layer", "context": "layer", "call": "layer", "ingress": "ingress", "commit": "checkpoint",
           "egress": "egress", "_may_run": "retention", "_call_handler": "handler"}
    first: dict[str, tuple[int, int]] = {}
    for node in ast.walk(handle):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in who:
                first[name] = min(first.get(name, (node.lineno, node.col_offset)), (node.lineno, node.col_offset))
    steps = sorted((line, name, who[name]) for name, line in first.items())
    lines = ["```mermaid", "sequenceDiagram", "  participant P as platform", "  participant R as Runtime.handle"]
    seen = {"platform", "Runtime.handle"}
    for _, name, part in steps:
        if part not in seen:
            lines.append(f"  participant {part}")
            seen.add(part)
    lines.append("  P->>R: envelope")
    for _, name, part in steps:
        lines.append(f"  R->>{part}: {name}")
    lines += ["  egress->>store: set adds (fan-in), result record", "  egress->>invoker: invoke successors",
              "  R-->>P: EgressReport", "```"]
    return "\n".join(lines)


def generated() -> str:
    return "\n\n".join([BEGIN, "### Layers (imports between them, counted)", layer_graph(),
                        "### One envelope's path", envelope_path(), END])


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = head + generated() + tail
    if "--check" in argv:
        if new != text:
            print(f"{DOC}: generated pictures are out of date; run python docs/gen_architecture.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
