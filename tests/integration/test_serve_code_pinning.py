"""serve pins an execution to its code by builder.versions' content id (one mechanism with `run`'s
versions): the compiled folder of a state machine (builder.serve.engine) and the workflow folder of
a durable function (builder.serve.durable_code) change when a file of `--functions` changes, and
do not when only what a version leaves out (hidden files, __pycache__) changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from builder.serve.durable_code import DurableCode
from builder.serve.engine import Engine

DEFINITION = json.dumps({"StartAt": "Inc", "States": {"Inc": {
    "Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Inc", "End": True}}})


def functions_folder(root: Path) -> Path:
    functions = root / "functions"
    (functions / "Inc").mkdir(parents=True)
    (functions / "Inc" / "app.py").write_text("def handler(event, context):\n    return event\n")
    return functions


def test_a_machines_compiled_folder_follows_the_content_id_of_its_code(tmp_path: Path) -> None:
    functions = functions_folder(tmp_path)
    store: Any = None  # compiling needs no store
    engine = Engine(store, tmp_path / "state", functions=str(functions))
    first = engine.compiled("inc", DEFINITION)
    assert Path(first, "unum-workflow.json").is_file()
    (functions / ".notes").write_text("not part of a version")
    (functions / "Inc" / "__pycache__").mkdir()
    (functions / "Inc" / "__pycache__" / "app.cpython-312.pyc").write_bytes(b"\0")
    assert engine.compiled("inc", DEFINITION) == first
    (functions / "Inc" / "app.py").write_text("def handler(event, context):\n    return {'changed': event}\n")
    second = engine.compiled("inc", DEFINITION)
    assert second != first
    assert Path(first, "unum-workflow.json").is_file()  # the earlier executions' folder stays


def test_a_durable_functions_folder_follows_the_content_id_of_its_code(tmp_path: Path) -> None:
    functions = functions_folder(tmp_path)
    code = DurableCode(functions, tmp_path / "state")
    first = code.folder("Inc")
    (functions / ".notes").write_text("not part of a version")
    assert code.folder("Inc") == first
    (functions / "Inc" / "app.py").write_text("def handler(event, context):\n    return 2\n")
    assert code.folder("Inc") != first
