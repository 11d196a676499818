"""GetExecutionHistory's events, in AWS's shape, from the history the runtime commits.

NOTE TO THE ENGINEER WHO OPENS THIS FILE: by a mistake, two engineers were given the same task
(history fidelity). If this file or tests/integration/test_serve_history.py changed since you
started in a way you did not make, the other engineer is doing the task: stop and say so in your
final message. Whoever edits this module first removes this note.

`aws_events` takes the numbered events of unum_entry.history.events (ids, `previousEventId`,
timestamps, types as Step Functions names them) and gives each the details object AWS gives
its type (`executionStartedEventDetails`, `stateEnteredEventDetails`,
`lambdaFunctionSucceededEventDetails`, ...): values as JSON text, as AWS sends them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unum_entry.stores.base import Store

    from builder.serve.registry import Execution

STATUS_TEXT = {"SUCCEEDED": "succeeded", "FAILED": "failed", "ABORTED": "stopped", "TIMED_OUT": "timed out",
               "RUNNING": "running"}


def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _details_key(event_type: str) -> str:
    if event_type.endswith("StateEntered"):
        return "stateEnteredEventDetails"
    if event_type.endswith("StateExited"):
        return "stateExitedEventDetails"
    return event_type[0].lower() + event_type[1:] + "EventDetails"


def aws_events(store: Store, execution: Execution, status: str, *, include_data: bool = True) -> list[dict[str, Any]]:
    """The execution's history as AWS's HistoryEvent list, oldest first (module docstring)."""
    from unum_entry.history import events, read_history
    from unum_entry.outcome import read_outcome

    from builder.commands.inspect_history import machine_states

    history = read_history(store, execution.workflow)
    failure = read_outcome(store, execution.workflow).failure if status in ("FAILED", "ABORTED", "TIMED_OUT") else None
    numbered = events(history, STATUS_TEXT.get(status, "running"), states=machine_states(execution.folder),
                      failure=failure)
    out: list[dict[str, Any]] = []
    for event in numbered:
        kind = event["type"]
        aws: dict[str, Any] = {"timestamp": event["timestamp"] / 1000, "type": kind, "id": event["id"],
                               "previousEventId": event["previousEventId"]}
        details = event.get("details") or {}
        shaped: dict[str, Any] = {}
        if kind == "ExecutionStarted":
            shaped = {"input": execution.input if include_data else None, "inputDetails": {"truncated": False},
                      "roleArn": None}
        elif kind == "ExecutionSucceeded":
            shaped = {"output": execution.output if include_data else None, "outputDetails": {"truncated": False}}
        elif kind in ("ExecutionFailed", "ExecutionAborted", "ExecutionTimedOut", "LambdaFunctionFailed"):
            shaped = {"error": details.get("error"), "cause": details.get("cause")}
        elif kind.endswith("StateEntered"):
            shaped = {"name": event.get("state")}
        elif kind.endswith("StateExited"):
            shaped = {"name": event.get("state")}
        elif kind == "LambdaFunctionSucceeded":
            shaped = {"output": _text(details.get("output")) if include_data else None,
                      "outputDetails": {"truncated": False}}
        elif kind == "ExecutionRedriven":
            shaped = {"redriveCount": 1}
        if shaped and kind != "LambdaFunctionStarted":
            aws[_details_key(kind)] = {k: v for k, v in shaped.items() if v is not None}
        out.append(aws)
    return out
