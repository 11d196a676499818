"""A workflow folder: `unum-workflow.json` plus one sub-folder per function holding its code and
`unum-ir.json`.

```
images/chain/
  unum-workflow.json      {"unum_workflow": 1, "name": "chain", "entry": "Hello"}   (optional: "watchdog": false)
  Hello/app.py            def handler(event, context): ...
  Hello/unum-ir.json      {"unum_ir": 1, "function": "Hello", "handler": "app.handler", ...}
```
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unum_entry.errors import IRError, WorkflowDefinitionError
from unum_entry.ir import IR_FILE_NAME, FunctionIR, instruction_targets, load_ir

WORKFLOW_FILE_NAME = "unum-workflow.json"


@dataclass(frozen=True)
class FunctionSpec:
    ir: FunctionIR
    folder: Path


@dataclass(frozen=True)
class Workflow:
    name: str
    entry: str
    folder: Path
    functions: dict[str, FunctionSpec]
    watchdog: bool = True  # arm a deadline watchdog per workflow (unum_entry.watchdog)


def load_workflow(folder: str | Path) -> Workflow:
    """Load and cross-check a workflow folder. Raises WorkflowDefinitionError / IRError naming
    the file and field at fault."""
    folder = Path(folder)
    manifest_path = folder / WORKFLOW_FILE_NAME
    if not folder.is_dir():
        raise WorkflowDefinitionError(f"{folder}: not a folder")
    if not manifest_path.is_file():
        raise WorkflowDefinitionError(f"{folder}: missing {WORKFLOW_FILE_NAME} (expected {{\"unum_workflow\": 1, \"name\": ..., \"entry\": ...}})")
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError as exc:
        raise WorkflowDefinitionError(f"{manifest_path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(manifest, dict) or manifest.get("unum_workflow") != 1:
        raise WorkflowDefinitionError(f"{manifest_path}: unum_workflow: expected version 1")
    for key in ("name", "entry"):
        if not isinstance(manifest.get(key), str) or not manifest[key]:
            raise WorkflowDefinitionError(f"{manifest_path}: {key}: expected a non-empty string, found {manifest.get(key)!r}")

    watchdog = manifest.get("watchdog", True)
    if not isinstance(watchdog, bool):
        raise WorkflowDefinitionError(f"{manifest_path}: watchdog: expected true or false, found {watchdog!r}")
    functions: dict[str, FunctionSpec] = {}
    for ir_path in sorted(folder.glob(f"*/{IR_FILE_NAME}")):
        ir = load_ir(ir_path)
        if ir.function in functions:
            raise WorkflowDefinitionError(f"{ir_path}: function: {ir.function!r} is also defined in {functions[ir.function].ir.source}")
        functions[ir.function] = FunctionSpec(ir=ir, folder=ir_path.parent)
    if not functions:
        raise WorkflowDefinitionError(f"{folder}: no function folders (each needs a {IR_FILE_NAME})")
    if manifest["entry"] not in functions:
        raise WorkflowDefinitionError(f"{manifest_path}: entry: unknown function {manifest['entry']!r} (functions: {', '.join(sorted(functions))})")
    for spec in functions.values():
        for i, ins in enumerate(spec.ir.instructions):
            for target in instruction_targets(ins):
                if target not in functions:
                    raise IRError(spec.ir.source, f"instructions[{i}]", f"unknown target function {target!r} (functions: {', '.join(sorted(functions))})")
    return Workflow(name=manifest["name"], entry=manifest["entry"], folder=folder, functions=functions,
                    watchdog=watchdog)



@dataclass(frozen=True)
class FunctionSource:
    """What `write_workflow` writes for one function: its `app.py` (exporting `handler`) and
    its IR instructions, plus any other IR fields (`checkpoint`, `max_attempts`)."""

    code: str
    instructions: Sequence[Mapping[str, Any]] = ()
    ir_fields: Mapping[str, Any] = field(default_factory=dict)


def write_workflow(folder: str | Path, *, name: str, entry: str, functions: Mapping[str, FunctionSource]) -> Workflow:
    """Write a workflow folder (manifest, one sub-folder per function) and load it back, so what
    was written is validated exactly as `builder run` would."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / WORKFLOW_FILE_NAME).write_text(json.dumps({"unum_workflow": 1, "name": name, "entry": entry}))
    for function, source in functions.items():
        function_dir = folder / function
        function_dir.mkdir(exist_ok=True)
        (function_dir / "app.py").write_text(source.code)
        ir = {"unum_ir": 1, "function": function, "handler": "app.handler",
              "instructions": list(source.instructions), **source.ir_fields}
        (function_dir / IR_FILE_NAME).write_text(json.dumps(ir, indent=1))
    return load_workflow(folder)
