"""Fire-and-forget `arn:aws:states:::states:startExecution`: start the child as a workflow of its own.

The compiler (builder/compiler/nested.py) compiles the child state machine into the same workflow
folder (its states renamed `CHILD.STATE`, its functions beside the parent's) and marks the Task
with `MARK`: `{"StateMachineArn", "StateMachine", "state", "entry"}`. The Task's function has no
user code: its handler is `DetachedStart`, which invokes the child's entry function with a
workflow-start envelope (`runtime.new_workflow`: its own workflow id, deadline and watchdog) and
returns AWS's StartExecution result `{"ExecutionArn", "StartDate"}` (StartDate in epoch
milliseconds, as the `.sync` shapes). Nothing waits for the child: its outcome is its own
workflow's (`inspect NAME`).

Exactly once: the execution name is `Parameters.Name`, else a name derived from the starting
invocation and its retry count, so a redelivered or duplicated Task sends the same start and the
child's first commit (create-if-absent) absorbs the copy; a Retry starts a new child, as on AWS.

Names are unique per state machine, as on AWS: the child's workflow id is `MACHINE:NAME`
(`workflow_of`), so two machines may use one Name and neither collides with an unrelated workflow.
Before it invokes, the Task claims the name (`naming.detached_start_key`, create-if-absent: its
starter, the input's digest and StartDate). A later start of the same machine and Name is, as
AWS's StartExecution of a Standard machine: the same attempt of the same Task (a redelivery)
returns the first result; another start with the same input while the child is still open
returns the original's ExecutionArn and StartDate; otherwise (another input, or the child has
ended) it fails with `StepFunctions.ExecutionAlreadyExistsException`.
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
        machine_arn = nested.machine_arn(self.marker)
        workflow = workflow_of(machine_arn, name)
        arn = f"{machine_arn.replace(':stateMachine:', ':execution:', 1)}:{name}"
        starter = f"{getattr(context, 'invocation', '')}/{self.marker.get('state', '')}/" \
                  f"{int(getattr(context, 'retry_count', 0) or 0)}"
        started = _claim(timers.store, workflow, starter, child_input, arn)
        if started is None:
            raise TaskFailed("StepFunctions.ExecutionAlreadyExistsException", f"Execution Already Exists: '{arn}'")
        if started["starter"] == starter:  # ours (first start, or a redelivery of it): (re)send the start
            timers.invoker.invoke(str(self.marker["entry"]), new_workflow(child_input, workflow).to_wire())
        return {"ExecutionArn": arn, "StartDate": started["date"]}


def workflow_of(machine_arn: str, name: str) -> str:
    """The unum workflow id of execution `name` of the state machine `machine_arn`: `MACHINE:NAME`
    (`:` is in no state machine or execution name, so two pairs never share an id)."""
    return f"{machine_arn.rsplit(':stateMachine:', 1)[-1].split(':', 1)[0]}:{name}"


def _claim(store: Any, workflow: str, starter: str, child_input: Any, arn: str) -> dict[str, Any] | None:
    """Claim the execution name (module docstring): the claim to answer with (ours, or the open
    original's with the same input), or None when AWS answers ExecutionAlreadyExists."""
    from unum_entry import naming
    from unum_entry.codec import decode, encode
    from unum_entry.outcome import Ending
    from unum_entry.retention import Ledger, store_retention
    from unum_entry.stores.base import Kind

    digest = hashlib.sha256(json.dumps(child_input, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    mine = {"starter": starter, "input": digest, "date": int(datetime.now(timezone.utc).timestamp() * 1000)}
    ledger = Ledger.bounded(workflow, None, store_retention(store))
    stored, created = store.create(naming.detached_start_key(workflow), encode(mine), workflow=workflow,
                                   kind=Kind.MARKER, expires_at=ledger.expires_at(Kind.MARKER))
    first = decode(stored)
    if created or first.get("starter") == starter:
        return dict(first)
    if first.get("input") != digest:
        return None
    ending = Ending.of(workflow)
    return None if ending.reached(store.read(ending.keys)) else dict(first)


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
