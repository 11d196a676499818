"""The workflow folder a run loads (`run`, `redrive`, the callback commands, `upgrade`, the
web console's redrive): a workflow folder as it is, or a state machine compiled on the fly."""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

from unum_entry.workflow import WORKFLOW_FILE_NAME


def runnable_workflow(path: str, functions: str | None = None, handler: str | None = None,
                      substitutions: list[str] | None = None) -> str:
    """The workflow folder `run` should load: `path` itself, or a temporary folder compiled from
    the state machine file `path` is (or holds), with `substitutions` (`KEY=VALUE` strings).
    The temporary folder is removed at exit. Anything else is returned as it is, for
    load_workflow to explain what is missing."""
    from builder.compiler.load import STATE_MACHINE_SUFFIXES, find_definition

    target = Path(path)
    if target.is_dir() and (target / WORKFLOW_FILE_NAME).is_file():
        return path
    if target.is_dir():
        if find_definition(target) is None:
            return path  # let load_workflow explain what is missing
    elif not (target.is_file() and target.suffix in STATE_MACHINE_SUFFIXES):
        return path
    from builder.compiler import compile_state_machine
    from builder.compiler.substitute import parse_substitutions

    out = Path(tempfile.mkdtemp(prefix="unum-asl-")) / "workflow"
    atexit.register(shutil.rmtree, out.parent, True)
    values = parse_substitutions(substitutions)
    result = compile_state_machine(target, out, functions=functions, handler=handler, substitutions=values)
    print(f"compiled {result.name}: {len(result.functions)} functions", file=sys.stderr)
    return str(result.out)
