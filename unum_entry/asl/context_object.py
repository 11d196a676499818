"""The context object (`$$`, JSONata's `$states.context`) with AWS's members, values and key order.

AWS's shape (what `States.Format` and a `$$` path show, in this order):
`{"Execution": {"Id", "Input", "StartTime", "Name", "RoleArn", "RedriveCount"},
  "StateMachine": {"Id", "Name"}, "State": {"Name", "EnteredTime"[, "RetryCount"]}[, "Task": {"Token"}]}`
- `Execution.Id` is an execution ARN `arn:aws:states:REGION:ACCOUNT:execution:MACHINE:NAME`, the name
  being the unum workflow id (less a `MACHINE:` prefix: the id of an execution that a
  fire-and-forget startExecution started, unum_entry.asl.detached); `StateMachine.Id` the matching
  state machine ARN.
- `State.RetryCount` only in the states that retry (Task, Parallel, Map); `Task` only while a
  `.waitForTaskToken` Task builds its request (the runner adds it); `Map.Item` in ItemSelector.
- `Execution.Input` whenever the definition can read it (the compiler decides; carrying it costs
  the input's size in every hop).

REGION and ACCOUNT come from `UNUM_ASL_REGION` (else `AWS_REGION`, `AWS_DEFAULT_REGION`, else
us-east-1) and `UNUM_ASL_ACCOUNT` (else 123456789012, the account AWS's documentation uses) in the
functions' environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

DEFAULT_REGION, DEFAULT_ACCOUNT = "us-east-1", "123456789012"
RETRYING_STATES = ("Task", "Parallel", "Map")


def region() -> str:
    return (os.environ.get("UNUM_ASL_REGION") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            or DEFAULT_REGION)


def account() -> str:
    return os.environ.get("UNUM_ASL_ACCOUNT") or DEFAULT_ACCOUNT


def machine(compiled: Mapping[str, Any]) -> dict[str, Any]:
    """`$$.StateMachine` of the compiled machine (`{"Name": ...}` in its fragment)."""
    name = str(compiled.get("Name", "statemachine"))
    return {"Id": f"arn:aws:states:{region()}:{account()}:stateMachine:{name}", "Name": name}


def execution(compiled: Mapping[str, Any], workflow_id: str, input_value: Any, start_time: str,
              carry_input: bool) -> dict[str, Any]:
    """`$$.Execution` of a new workflow (built once, by its first function, then carried)."""
    name = str(compiled.get("Name", "statemachine"))
    execution_name = workflow_id.removeprefix(f"{name}:")  # `MACHINE:NAME` (module docstring)
    fields: dict[str, Any] = {"Id": f"arn:aws:states:{region()}:{account()}:execution:{name}:{execution_name}"}
    if carry_input:
        fields["Input"] = input_value
    fields.update(StartTime=start_time, Name=execution_name, RoleArn="", RedriveCount=0)
    return fields


def for_state(execution_fields: Mapping[str, Any], compiled: Mapping[str, Any], state: str, kind: str | None,
              entered_time: str, retry_count: int) -> dict[str, Any]:
    """The context object a state sees."""
    current: dict[str, Any] = {"Name": state, "EnteredTime": entered_time}
    if kind in RETRYING_STATES:
        current["RetryCount"] = retry_count
    return {"Execution": dict(execution_fields), "StateMachine": machine(compiled), "State": current}
