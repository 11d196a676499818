"""A nested state machine at run time: the child's execution, its result and its failure as AWS shows them.

The compiler (builder/compiler/nested.py) turns a `states:startExecution.sync` / `.sync:2` Task
into a fan-out to one branch holding the child's states, marked with `MARK`. The runner then:
- `start(...)`: the child's input (`Parameters.Input`; a JSON string is parsed, none is `{}`) and
  its own `$$.Execution` (an execution ARN of the child machine, `Parameters.Name` or a name
  derived from the starting invocation, the child's input, its start time);
- `result(...)`: at the join, the child's output in DescribeExecution's shape: `ExecutionArn`,
  `Input`, `InputDetails`, `Name`, `Output`, `OutputDetails`, `StartDate`, `StateMachineArn`,
  `Status`, `StopDate` (dates in epoch milliseconds); `.sync` gives Input/Output as JSON text,
  `.sync:2` as JSON values;
- `failure(...)`: a failed child fails the Task with `States.TaskFailed`, the cause being that
  shape with `Status: FAILED` and the child's `Error` / `Cause` (Retry and Catch apply as to any
  Task error; a retry starts a new child execution).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from unum_entry.asl import context_object

MARK = "__unum_nested__"
SYNC_RESOURCES = {"arn:aws:states:::states:startExecution.sync": "sync",
                  "arn:aws:states:::states:startExecution.sync:2": "sync:2"}


def start(marker: Mapping[str, Any], effective: Any, invocation: str, state: str,
          now: datetime) -> tuple[Any, dict[str, Any]]:
    """(the child's input, the child's `$$.Execution`)."""
    params = effective if isinstance(effective, Mapping) else {}
    child_input: Any = params.get("Input", {})
    if isinstance(child_input, str):
        try:
            child_input = json.loads(child_input)
        except ValueError:
            pass  # AWS would refuse the string; the child gets it as it is
    name = params.get("Name")
    if not isinstance(name, str) or not name:
        digest = hashlib.sha256(f"{invocation}/{state}".encode()).hexdigest()
        name = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
    execution = {"Id": f"{machine_arn(marker).replace(':stateMachine:', ':execution:', 1)}:{name}",
                 "Input": child_input, "StartTime": _iso(now), "Name": name, "RoleArn": "", "RedriveCount": 0}
    return child_input, execution


def result(marker: Mapping[str, Any], child: Mapping[str, Any], output: Any, now: datetime) -> dict[str, Any]:
    """The Task's result when the child succeeded."""
    text = marker.get("Resource") in SYNC_RESOURCES and SYNC_RESOURCES[str(marker.get("Resource"))] == "sync"
    shape = _describe(marker, child, now, "SUCCEEDED", text)
    shape["Output"] = json.dumps(output, separators=(",", ":"), ensure_ascii=False) if text else output
    shape["OutputDetails"] = {"Included": True}
    return dict(sorted(shape.items()))


def failure(marker: Mapping[str, Any], child: Mapping[str, Any], error: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The Task's error when the child failed: `{"Error": "States.TaskFailed", "Cause": …}`."""
    shape = _describe(marker, child, now, "FAILED", True)
    shape.update(Error=error.get("Error"), Cause=error.get("Cause"))
    return {"Error": "States.TaskFailed", "Cause": json.dumps(dict(sorted(shape.items())), separators=(",", ":"),
                                                              ensure_ascii=False)}


def _describe(marker: Mapping[str, Any], child: Mapping[str, Any], now: datetime, status: str,
              text: bool) -> dict[str, Any]:
    child_input = child.get("Input")
    return {"ExecutionArn": child.get("Id"), "Input": json.dumps(child_input, separators=(",", ":"), ensure_ascii=False)
            if text else child_input, "InputDetails": {"Included": True}, "Name": child.get("Name"),
            "StartDate": _millis(child.get("StartTime")), "StopDate": int(now.timestamp() * 1000),
            "StateMachineArn": machine_arn(marker),
            "Status": status}


def machine_arn(marker: Mapping[str, Any]) -> str:
    """The child's state machine ARN: as the definition gives it, or built from its name."""
    given = str(marker.get("StateMachineArn", ""))
    if given.startswith("arn:") and ":stateMachine:" in given:
        return given
    return (f"arn:aws:states:{context_object.region()}:{context_object.account()}:stateMachine:"
            f"{marker.get('StateMachine')}")


def _millis(iso: Any) -> int | None:
    try:
        return int(datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
