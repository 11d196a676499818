"""The layering docs/architecture.md describes holds in the code, and its generated pictures are
up to date: the core never imports the steps layer, the rules import no core module, no
unum_entry module imports builder; in unum_entry and in builder no import runs up a layer and
no modules, nor packages, import each other in a circle. Every import counts, those inside
functions too (where a lazy import would hide an inversion); only `if TYPE_CHECKING:` ones not."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("unum_entry", "builder")


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
        assert gen.module_imports(path, "builder") == set(), f"{name} imports builder"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_has_a_layer(package: str):
    gen = _gen()
    assert [name for name in gen.modules(package) if gen.layer_of(name, package) is None] == []


def test_the_generated_pictures_are_up_to_date():
    run = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_architecture.py"), "--check"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per back edge a depth-first walk of `graph` meets (each as a path that returns
    to its start); [] when there is none."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if start in state:
            continue
        state[start] = 1
        path, stack = [start], [iter(sorted(graph[start]))]
        while stack:  # iterative: bounded by the number of edges, no recursion limit
            target = next(stack[-1], None)
            if target is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state and target in graph:
                state[target] = 1
                path.append(target)
                stack.append(iter(sorted(graph[target])))
    return cycles


def test_the_cycle_finder_finds_a_circle_and_passes_a_tree():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_imports_another_that_imports_it_back(package: str):
    assert _cycles(_gen().import_graph(package)) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_package_imports_another_that_imports_it_back(package: str):
    """Packages (a module's first dotted name) joined by their modules' imports: a circle here
    can hide between modules that form none (a.x -> b.y, b.z -> a.w)."""
    packages: dict[str, set[str]] = {}
    for name, targets in _gen().import_graph(package).items():
        first = name.split(".")[0]
        packages.setdefault(first, set()).update(t.split(".")[0] for t in targets if t.split(".")[0] != first)
    assert _cycles(packages) == []


def _upward(package: str) -> set[tuple[str, str]]:
    gen = _gen()
    order = [layer for layer, _ in gen.PACKAGES[package]]
    upward = set()
    for name, targets in gen.import_graph(package).items():
        for target in targets:
            source_layer, target_layer = gen.layer_of(name, package), gen.layer_of(target, package)
            if source_layer and target_layer and order.index(target_layer) < order.index(source_layer):
                upward.add((name, target))
    return upward


# Imports that run up a layer: none. Where one seems needed, move the shared rule down (builder's
# front ends and commands share builder/runs and builder/program) or pass the upper layer's part
# in (as the platforms pass durable_functions.chained.workflow_ended to the Runtime).
@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_runs_up_a_layer_at_any_level(package: str):
    assert sorted(_upward(package)) == [], "imports that run up a layer (move the shared rule down)"
