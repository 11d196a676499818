"""Write docs/restructure-map.md: the module map of `unum_entry` and `builder` at several commits,
with line counts (as `wc -l` counts them), read from git — never from the working tree, so the
map says what was committed. Issue 12's closing note.

    python docs/gen_restructure_map.py                # 64f6278 (before issue 12), 8b41870, HEAD
    python docs/gen_restructure_map.py REV REV ...    # any commits, oldest first

`unum_entry` is grouped into the layers of docs/architecture.md (docs/gen_architecture.py's
`LAYERS`); `builder` by its first folder (the modules directly in `builder/` are one group).
Import cycles count every import between the package's modules, lazy ones (inside functions)
included: a cycle through a lazy import still ties the two modules together.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "restructure-map.md"
PACKAGES = ("unum_entry", "builder")
DEFAULT_REVISIONS = ("64f6278", "8b41870", "HEAD")
LABELS = {"64f6278": "before issue 12", "8b41870": "issue 12 landed"}

sys.path.insert(0, str(ROOT / "docs"))
from gen_architecture import LAYERS  # noqa: E402  (the layer table, stated once)


@dataclass(frozen=True)
class Tree:
    """The Python modules of PACKAGES at one commit: path -> source text."""

    revision: str
    commit: str
    sources: dict[str, str]

    def lines(self, path: str) -> int:
        return self.sources[path].count("\n")


def git(*args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, input=stdin, capture_output=True, check=True).stdout


def read_tree(revision: str) -> Tree:
    commit = git("rev-parse", "--short", f"{revision}^{{commit}}").decode().strip()
    paths = [p for p in git("ls-tree", "-r", "--name-only", commit, "--", *PACKAGES).decode().splitlines()
             if p.endswith(".py")]
    # One `git cat-file --batch` for every file: "<sha> blob <size>\n<bytes>\n" per request.
    out = git("cat-file", "--batch", stdin="".join(f"{commit}:{p}\n" for p in paths).encode())
    sources: dict[str, str] = {}
    at = 0
    for path in paths:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        sources[path] = out[header_end + 1:header_end + 1 + size].decode()
        at = header_end + 1 + size + 1
    return Tree(revision, commit, sources)


def group_of(path: str) -> str:
    package, *rest = path.split("/")
    if package == "unum_entry":
        first = rest[0].removesuffix(".py")
        for layer, prefixes in LAYERS:
            if first in prefixes:
                return f"unum_entry: {layer}"
        return "unum_entry: (package face)" if first == "__init__" else "unum_entry: (no layer)"
    return f"builder/{rest[0]}/" if len(rest) > 1 else "builder/*.py (top level)"


def module_name(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def cycles(tree: Tree) -> list[list[str]]:
    """Groups of modules that import each other in a loop (strongly connected, more than one)."""
    modules = {module_name(p): p for p in tree.sources}
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(tree.sources[path])):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
                submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                targets = submodules or [base]  # `from pkg import module` imports the module
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):  # not its own package face
                    edges[name].add(target)
    return _strongly_connected(sorted(modules), edges)


def _strongly_connected(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan; the packages are small enough for recursion
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in nodes:
        if node not in index:
            visit(node)
    return sorted(found)


def render(trees: list[Tree]) -> str:
    heads = [f"`{t.commit}`" + (f" ({LABELS[t.revision]})" if t.revision in LABELS else
                                f" ({t.revision})" if t.revision != t.commit else "") for t in trees]
    out = ["# Module map before and after issue 12", "",
           "Generated by `python docs/gen_restructure_map.py` from the committed trees (do not edit by hand).",
           "Lines as `wc -l` counts them; *files / lines* per cell.", ""]

    def table(title: str, rows: list[tuple[str, list[tuple[int, int]]]]) -> None:
        out.extend([f"## {title}", "", "| | " + " | ".join(heads) + " |", "|---" * (len(trees) + 1) + "|"])
        for label, cells in rows:
            out.append(f"| {label} | " + " | ".join(f"{f} / {n:,}" if f else "—" for f, n in cells) + " |")
        out.append("")

    def count(tree: Tree, keep) -> tuple[int, int]:
        paths = [p for p in tree.sources if keep(p)]
        return len(paths), sum(tree.lines(p) for p in paths)

    table("Packages", [(f"`{package}/`", [count(t, lambda p, k=package: p.startswith(k + "/")) for t in trees])
                       for package in PACKAGES] + [("total", [count(t, lambda p: True) for t in trees])])
    groups = sorted({group_of(p) for t in trees for p in t.sources},
                    key=lambda g: (not g.startswith("unum_entry"), _layer_rank(g), g))
    table("Groups (unum_entry by layer of docs/architecture.md; builder by folder)",
          [(f"`{g}`" if g.startswith("builder") else g, [count(t, lambda p, g=g: group_of(p) == g) for t in trees])
           for g in groups])

    out.extend(["## Import cycles between modules (lazy imports included)", ""])
    for tree, head in zip(trees, heads):
        found = cycles(tree)
        out.append(f"- {head}: " + ("; ".join(" ↔ ".join(f"`{m}`" for m in c) for c in found) if found else "none"))
    out.append("")

    for tree, head in zip(trees, heads):
        out.extend([f"## Modules at {head}", ""])
        by_group: dict[str, list[str]] = defaultdict(list)
        for path in tree.sources:
            by_group[group_of(path)].append(path)
        for group in sorted(by_group, key=lambda g: (not g.startswith("unum_entry"), _layer_rank(g), g)):
            paths = sorted(by_group[group], key=lambda p: (-tree.lines(p), p))
            listed = ", ".join(f"{p.split('/', 1)[1]} {tree.lines(p)}" for p in paths)
            out.append(f"- **{group}** ({sum(tree.lines(p) for p in paths):,}): {listed}")
        out.append("")
    return "\n".join(out)


def _layer_rank(group: str) -> int:
    names = [layer for layer, _ in LAYERS]
    layer = group.removeprefix("unum_entry: ")
    return names.index(layer) if layer in names else len(names)


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="docs/gen_restructure_map.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revisions", nargs="*", metavar="REV",
                        help=f"commits to map, oldest first (default: {' '.join(DEFAULT_REVISIONS)})")
    revisions = parser.parse_args(argv).revisions or list(DEFAULT_REVISIONS)
    for revision in revisions:
        found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], cwd=ROOT,
                               capture_output=True, timeout=60)
        if found.returncode != 0:
            print(f"error: {revision!r} is not a commit of this repository ({ROOT})", file=sys.stderr)
            return 2
    trees = [read_tree(revision) for revision in revisions]
    DOC.write_text(render(trees))
    print(f"wrote {DOC.relative_to(ROOT)} ({', '.join(t.commit for t in trees)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
