"""Fire-and-forget `arn:aws:states:::states:startExecution`: start the child as a workflow of its own.

The compiler (builder/compiler/nested.py) compiles the child state machine into the same workflow
folder (its states renamed `CHILD.STATE`, its functions beside the parent's) and marks the Task
with `MARK`: `{"StateMachineArn", "StateMachine", "state", "entry"}`. The Task's function has no
user code: its handler is `DetachedStart`, which invokes the child's entry function with a
workflow-start envelope (`runtime.new_workflow`: its own workflow id, deadline and watchdog) and
returns AWS's StartExecution result `{"ExecutionArn", "StartDate"}` (StartDate in epoch
milliseconds, as the `.sync` shapes). Nothing waits for the child: its outcome is its own
workflow's (`inspect NAME`).

Exactly once: the child's workflow id is `Parameters.Name`, else a name derived from the starting
invocation and its retry count, so a redelivered or duplicated Task sends the same start and the
child's first commit (create-if-absent) absorbs the copy; a Retry starts a new child, as on AWS.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from unum_entry.asl.integrations.resources import TaskFailed

MARK = "__unum_detached__"
RESOURCE = "arn:aws:states:::states:startExecution"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")  # AWS: 1-80 characters; unum: a valid workflow id


class DetachedStart:
    """The handler of a fire-and-forget startExecution Task: `(parameters, context) -> result`."""

    def __init__(self, marker: Mapping[str, Any]) -> None:
        self.marker = dict(marker)

    def __call__(self, parameters: Any, context: Any) -> dict[str, Any]:
        from unum_entry.asl import nested
        from unum_entry.runtime import new_workflow
        from unum_entry.timers import timers_of

        timers = timers_of(context)
        if timers is None:
            raise TaskFailed("States.TaskFailed", "startExecution needs unum's runtime (an invoker) to start the child")
        params = parameters if isinstance(parameters, Mapping) else {}
        child_input = _child_input(params.get("Input"))
        name = params.get("Name")
        if name is None:
            name = _derived_name(str(getattr(context, "invocation", "")), str(self.marker.get("state", "")),
                                 int(getattr(context, "retry_count", 0) or 0))
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise TaskFailed("StepFunctions.InvalidNameException", f"Invalid Name: '{name}'")
        timers.invoker.invoke(str(self.marker["entry"]), new_workflow(child_input, name).to_wire())
        arn = nested.machine_arn(self.marker).replace(":stateMachine:", ":execution:", 1)
        return {"ExecutionArn": f"{arn}:{name}", "StartDate": int(datetime.now(timezone.utc).timestamp() * 1000)}


def _child_input(given: Any) -> Any:
    """`Parameters.Input`: a JSON string is parsed (AWS takes the execution input as text), none is `{}`."""
    if given is None:
        return {}
    if isinstance(given, str):
        try:
            return json.loads(given)
        except ValueError:
            raise TaskFailed("StepFunctions.InvalidExecutionInputException",
                             f"Invalid State Machine Execution Input: '{given}'") from None
    return given


def _derived_name(invocation: str, state: str, retry: int) -> str:
    """A UUID-shaped name, the same for every execution of one attempt of the Task."""
    digest = hashlib.sha256(f"{invocation}/{state}/{retry}".encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
