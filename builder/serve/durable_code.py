"""The workflow folder a durable function runs on in `serve`: its Lambda code from
`serve --functions DIR` (`DIR/<FunctionName>/`, a handler decorated with the SDK's
`@durable_execution`, as a Step Functions Task's code is laid out) made into a unum workflow
whose entry is that function, every other function of DIR beside it (so `context.invoke` of a
sibling durable function finds it), each with its `unum-ir.json` (`handler`, no instructions)
unless its folder brings one.

The folder `STATE/durable/<digest>/workflow` is named by the digest of the entry and of the
content id of DIR (builder.versions.content_id: every file by path and bytes, and the runtime's
version), so an execution finishes on the code it started on even when DIR changes later
(changed code makes another folder beside it). It is built in a staging folder and renamed
whole: a crash mid-build leaves no half folder.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from pathlib import Path

from builder.serve.wire import ApiError

WORKFLOW_FILE = "unum-workflow.json"
IR_FILE = "unum-ir.json"


class DurableCode:
    """Workflow folders of the functions in `functions` under `state_dir` (module docstring)."""

    def __init__(self, functions: Path | None, state_dir: Path) -> None:
        self.functions = functions
        self.state_dir = state_dir
        self._lock = threading.Lock()

    def folder(self, function: str) -> str:
        """The workflow folder whose entry is `function` (built now unless it exists); raises
        ResourceNotFoundException when `--functions` has no folder of that name."""
        functions = self.functions
        if functions is None or not (functions / function).is_dir() or function.startswith("."):
            where = f"{functions}/{function}/" if functions is not None else "--functions DIR (serve was given none)"
            raise ApiError("ResourceNotFoundException", f"Function not found: {function} (expected its code in "
                                                        f"{where})", 404)
        code = functions / function
        digest = _digest(functions, function)
        out = self.state_dir / "durable" / digest / "workflow"
        with self._lock:
            if (out / WORKFLOW_FILE).is_file():
                return str(out)
            staging = out.parent / "staging"
            if staging.exists():
                shutil.rmtree(staging)
            staging.mkdir(parents=True)
            for source in sorted(functions.iterdir()):
                handler = _handler(source) if source.is_dir() and not source.name.startswith(".") else None
                if handler is None:
                    continue
                shutil.copytree(source, staging / source.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                if not (staging / source.name / IR_FILE).is_file():
                    ir = {"unum_ir": 1, "function": source.name, "handler": handler, "instructions": []}
                    (staging / source.name / IR_FILE).write_text(json.dumps(ir, indent=1))
            if not (staging / function / IR_FILE).is_file():
                raise ApiError("InvalidParameterValueException",
                               f"function {function!r}: no handler in {code} (expected app.py with handler() or "
                               "lambda_function.py with lambda_handler())")
            (staging / WORKFLOW_FILE).write_text(json.dumps({"unum_workflow": 1, "name": function, "entry": function}))
            staging.rename(out)
        return str(out)


def _digest(functions: Path, function: str) -> str:
    """The entry and the content id of `functions` (builder.versions.content_id: its files by path
    and bytes, and the runtime's version: the one mechanism that pins runs to a build)."""
    from builder.versions import content_id

    return hashlib.sha256(function.encode() + b"\0" + content_id(functions).encode()).hexdigest()[:24]


def _handler(code: Path) -> str | None:
    """The handler spec of a Lambda code folder (as the compiler detects a Task's), or None."""
    import re

    from builder.compiler import HANDLER_CANDIDATES

    ir = code / IR_FILE
    if ir.is_file():
        try:
            return str(json.loads(ir.read_text())["handler"])
        except (ValueError, KeyError, TypeError):
            return None
    for file_name, function in HANDLER_CANDIDATES:
        file = code / file_name
        if file.is_file() and re.search(rf"^(async\s+)?def\s+{function}\s*\(", file.read_text(), re.MULTILINE):
            return f"{file_name[:-3]}.{function}"
    return None
