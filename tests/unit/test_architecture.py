"""The layering docs/architecture.md describes holds in the code, and its generated pictures are
up to date: the core never imports the steps layer, the rules import no core module, and no
unum_entry module imports builder."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_architecture", ROOT / "docs" / "gen_architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_core_does_not_import_the_steps_layer_and_the_rules_do_not_import_the_core():
    gen = _gen()
    for name, path in gen.modules().items():
        layer = gen.layer_of(name)
        imported = {gen.layer_of(m) for m in gen.module_imports(path)}
        if layer in ("runtime core", "rules", "adapters", "foundation"):
            assert "steps layer" not in imported, f"{name} imports the steps layer"
            assert "platforms" not in imported, f"{name} imports a platform"
        if layer in ("rules", "adapters", "foundation"):
            assert "runtime core" not in imported, f"{name} imports the runtime core"
        assert not any(m.startswith("builder") for m in gen.module_imports(path)), name


def test_every_module_has_a_layer():
    gen = _gen()
    assert [name for name in gen.modules() if gen.layer_of(name) is None] == []


def test_the_generated_pictures_are_up_to_date():
    run = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_architecture.py"), "--check"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr


def _every_import(path: Path) -> set[str]:
    """The unum_entry modules `path` imports anywhere (functions included: a lazy import is
    still a dependency), except under `if TYPE_CHECKING:`."""
    import ast

    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree)
                   if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("unum_entry"):
            module = node.module.removeprefix("unum_entry").lstrip(".")
            # `from unum_entry.asl import callbacks` names the module asl.callbacks (resolved in _graph)
            found.update(f"{module}.{a.name}".lstrip(".") for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix("unum_entry.") for a in node.names if a.name.startswith("unum_entry."))
    return {name.lstrip(".") for name in found if name}


def _graph() -> dict[str, set[str]]:
    gen = _gen()
    modules = gen.modules()

    def owner(name: str) -> str | None:  # `asl.callbacks.X` -> the module `asl.callbacks`
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in modules:
                return ".".join(parts[:end])
        return None

    return {name: {m for m in map(owner, _every_import(path)) if m is not None and m != name}
            for name, path in modules.items()}


def test_no_module_imports_another_that_imports_it_back():
    graph = _graph()
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target] if target in path else [name, target])
            elif target not in state:
                visit(target, path + [target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


# Imports that run up a layer: none. Where one seems needed, pass the upper layer's part in
# (as the platforms pass durable_functions.chained.workflow_ended to the Runtime).
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


def test_no_import_runs_up_a_layer_at_any_level():
    gen = _gen()
    order = [layer for layer, _ in gen.LAYERS]
    upward = set()
    for name, targets in _graph().items():
        for target in targets:
            source_layer, target_layer = gen.layer_of(name), gen.layer_of(target)
            if source_layer and target_layer and order.index(target_layer) < order.index(source_layer):
                upward.add((name, target))
    assert upward - set(KNOWN_UPWARD) == set(), "new upward imports"
    assert set(KNOWN_UPWARD) - upward == set(), "a known upward import is gone: take it off KNOWN_UPWARD"
