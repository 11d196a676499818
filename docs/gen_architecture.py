"""Regenerate the pictures of docs/architecture.md from the code: `python docs/gen_architecture.py`.

The layer graphs of `unum_entry` and of `builder` are derived with `ast` from every import a
module makes (inside functions too: a lazy import is still a dependency; imports under
`if TYPE_CHECKING:` are types, and left out); modules are grouped into the layers below,
top to bottom. tests/unit/test_architecture.py holds the code to them: no import runs up a
layer, no circle between modules or between packages. The envelope's path is the call order
of `Runtime.handle`, read from its source. `--check` exits 1 when the doc is out of date (a
test runs it).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "unum_entry"
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- generated:begin -->", "<!-- generated:end -->"

Layers = tuple[tuple[str, tuple[str, ...]], ...]

# Layer of each unum_entry module (by its first dotted name), top to bottom.
LAYERS: Layers = (
    ("platforms", ("platforms", "local", "__main__", "invocation_log")),
    ("step functions", ("asl", "callbacks")),
    ("handler loading", ("handlers",)),  # above durable functions: a durable handler is loaded through its adapter
    ("durable functions", ("durable_functions",)),
    ("steps layer", ("steps",)),  # below both front ends: a Task and a durable step build on its steps
    ("runtime core", ("runtime", "ingress", "egress", "plan", "hooks", "context", "timers")),
    ("rules", ("checkpoint", "fanin", "outcome", "history", "watchdog", "redrive", "task_tokens", "ramp")),
    ("adapters", ("stores", "invokers", "tracing", "retention")),  # retention: the expiry of every write, the invokers' by-reference envelopes too
    ("foundation", ("errors", "codec", "packing", "frozen", "naming", "envelope", "ir", "conditions", "jsonpath", "workflow", "urls", "yielding_lock", "opaque_text", "lazy")),
)

# Layer of each builder module, top to bottom. A rule two front ends (or a front end and a
# command) share lives below them, in `runs` (a run as the store holds it) or `program`.
BUILDER_LAYERS: Layers = (
    ("entry", ("__main__", "cli")),
    ("commands", ("commands",)),  # thin CLI wrappers over what lies below
    ("front ends", ("ui", "serve")),  # the web console; serve (AWS's APIs)
    ("runs", ("runs",)),  # start records, the history document, a run's path, its folder, its stop
    ("tools", ("graphing", "local_stack", "deploy")),
    ("foundation", ("compiler", "versions", "image", "program")),
)

PACKAGES: dict[str, Layers] = {"unum_entry": LAYERS, "builder": BUILDER_LAYERS}


def layer_of(module: str, package: str = "unum_entry") -> str | None:
    """The layer of `module` (a dotted name inside `package`), or None when it has none."""
    first = module.split(".")[0]
    for layer, prefixes in PACKAGES[package]:
        if first in prefixes:
            return layer
    return None


def module_imports(path: Path, package: str = "unum_entry") -> set[str]:
    """The names inside `package` that `path` imports anywhere (functions included), except
    under `if TYPE_CHECKING:`: `from unum_entry.asl import callbacks` gives `asl.callbacks`,
    `from unum_entry.asl.callbacks import waiting` gives `asl.callbacks.waiting` (a name of a
    module: `owner` finds the module)."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                (node.module == package or node.module.startswith(package + ".")):
            module = node.module.removeprefix(package).lstrip(".")
            found.update(f"{module}.{a.name}".lstrip(".") for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix(package + ".") for a in node.names if a.name.startswith(package + "."))
    return {name for name in found if name}


def modules(package: str = "unum_entry") -> dict[str, Path]:
    """Every module of `package` by its dotted name inside it (a package by its folder's)."""
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT / package).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        if parts:
            out[".".join(parts)] = path
    return out


def import_graph(package: str = "unum_entry") -> dict[str, set[str]]:
    """Each module of `package` and the modules of `package` it imports (itself left out)."""
    found = modules(package)

    def owner(name: str) -> str | None:  # `asl.callbacks.waiting` -> the module `asl.callbacks`
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in found:
                return ".".join(parts[:end])
        return None

    return {name: {m for m in map(owner, module_imports(path, package)) if m is not None and m != name}
            for name, path in found.items()}


def layer_graph(package: str = "unum_entry") -> str:
    """The layers of `package` as a Mermaid flowchart, each arrow the imports between two layers."""
    edges: dict[tuple[str, str], int] = {}
    for name, targets in import_graph(package).items():
        src = layer_of(name, package)
        for target in targets:
            dst = layer_of(target, package)
            if src and dst and src != dst:
                edges[(src, dst)] = edges.get((src, dst), 0) + 1
    ids = {layer: f"L{i}" for i, (layer, _) in enumerate(PACKAGES[package])}
    lines = ["```mermaid", "flowchart TD"]
    for layer, prefixes in PACKAGES[package]:
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
                        "### builder's layers (imports between them, counted)", layer_graph("builder"),
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
