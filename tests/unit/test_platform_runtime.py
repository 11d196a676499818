"""One way to build a platform's Runtime (unum_entry.platforms.common.platform_runtime): every
Runtime unum_entry builds is built there, with the steps layer and the answer to a durable
caller (durable_functions.chained.workflow_ended), so no platform can leave either out."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from unum_entry.durable_functions.chained import workflow_ended
from unum_entry.ir import parse_ir
from unum_entry.platforms.common import platform_runtime
from unum_entry.steps.layer import StepsLayer
from unum_entry.stores.memory import MemoryStore

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
HOME = ("platforms.common", "platform_runtime")  # the one place a Runtime is constructed


def _modules() -> dict[str, Path]:
    spec = importlib.util.spec_from_file_location("gen_architecture", ROOT / "docs" / "gen_architecture.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen.modules()


def _runtime_constructions(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of every `Runtime(...)` / `x.Runtime(...)` call in `path`."""
    found: list[tuple[str, int]] = []

    def walk(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                callee = child.func
                name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
                if name == "Runtime":
                    found.append((function, child.lineno))
            walk(child, inner)

    walk(ast.parse(path.read_text()), "")
    return found


def test_every_runtime_unum_entry_builds_is_built_by_platform_runtime():
    elsewhere = [f"{name}:{line} (in {function or 'module'})" for name, path in _modules().items()
                 for function, line in _runtime_constructions(path) if (name, function) != HOME]
    assert elsewhere == [], "build a platform's Runtime with platforms.common.platform_runtime"
    assert len(_runtime_constructions(_modules()[HOME[0]])) == 1


class _NoInvoker:
    def invoke(self, function: str, payload: Any) -> None:
        raise AssertionError("nothing is invoked")


def test_platform_runtime_has_the_steps_layer_and_answers_a_durable_caller():
    ir = parse_ir({"unum_ir": 1, "function": "F", "handler": "app.handler", "instructions": []}, source="ir")
    runtime = platform_runtime(ir, lambda event, ctx: event, MemoryStore(), _NoInvoker())
    try:
        assert isinstance(runtime.layer, StepsLayer)
        assert runtime._on_workflow_end is workflow_ended
    finally:
        runtime.close()
