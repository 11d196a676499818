"""GetDurableExecutionHistory's events, in AWS's shape (botocore's `lambda` model: `Event` and its
`<Type><Outcome>Details`), from one durable execution's folded log
(unum_entry.durable_functions.log and .service, the fold `inspect --history` reads).

Each operation gives its `<Type>Started` event at its start and, once it has one, its outcome
event at its end (`StepSucceeded`, `WaitSucceeded`, `CallbackTimedOut`, `ChainedInvokeFailed`,
...); the execution gives `ExecutionStarted` and, once the store has its ending,
`ExecutionSucceeded` / `Failed` / `Stopped` / `TimedOut`. Events are ordered by time (the log's
order among equal times) and numbered from 1.

Different from AWS: the log keeps each operation's latest state, so a step retried gives one
`StepFailed` per outcome, not one per failed attempt (its `RetryDetails.CurrentAttempt` says
how many ran), and there are no `InvocationCompleted` events (an unum delivery is not a Lambda
invocation).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

_OUTCOME = {"SUCCEEDED": "Succeeded", "FAILED": "Failed", "TIMED_OUT": "TimedOut", "CANCELLED": "Cancelled",
            "STOPPED": "Stopped"}
_TYPE = {"STEP": "Step", "WAIT": "Wait", "CALLBACK": "Callback", "CONTEXT": "Context",
         "CHAINED_INVOKE": "ChainedInvoke"}


@dataclass(frozen=True)
class Ending:
    """How the execution ended, as the store decided (None fields while it runs)."""

    status: str                       # the model's ExecutionStatus
    at: float | None = None           # epoch seconds
    result: str | None = None
    error: Mapping[str, Any] | None = None  # an ErrorObject


def events(state: Any, ops: Mapping[str, Any], ending: Ending, *, include_data: bool,
           event_types: Collection[str]) -> list[dict[str, Any]]:
    """The events (module docstring) of the execution whose folded log is `state`
    (unum_entry.durable_functions.service.Folded) and whose operations as of now are `ops`
    (`service.view`); an outcome not among `event_types` (the model's EventType values: there
    is no WaitFailed) is not shown. Without `include_data`, payloads (inputs, results, errors'
    contents) are left out, their `Truncated` set."""
    found: list[tuple[float, int, dict[str, Any]]] = []

    def add(when: Any, event: dict[str, Any]) -> None:
        found.append((seconds(when), len(found), event))

    def result(text: str | None) -> dict[str, Any]:
        return {"Payload": text, "Truncated": False} if include_data else {"Truncated": text is not None}

    def error(obj: Any) -> dict[str, Any]:
        payload = obj.to_dict() if hasattr(obj, "to_dict") else (dict(obj) if obj else None)
        return {"Payload": payload, "Truncated": False} if include_data else {"Truncated": payload is not None}

    meta = state.meta
    for op_id, op in ops.items():
        kind = op.operation_type.value
        base = {"Id": op_id, "Name": op.name, "ParentId": op.parent_id, "SubType": op.sub_type}
        if kind == "EXECUTION":
            started = op.start_timestamp
            deadline = int(meta.get("Deadline") or 0)
            timeout = max(0, deadline - int(seconds(started))) if deadline else 0
            add(started, {**base, "EventType": "ExecutionStarted", "EventTimestamp": started,
                          "ExecutionStartedDetails": {"Input": result(meta.get("Input")), "ExecutionTimeout": timeout}})
            continue
        name = _TYPE.get(kind)
        if name is None:
            continue
        add(op.start_timestamp, {**base, "EventType": f"{name}Started", "EventTimestamp": op.start_timestamp,
                                 f"{name}StartedDetails": _started(kind, op, state, op_id, result)})
        outcome = _OUTCOME.get(op.status.value)
        if outcome is None or f"{name}{outcome}" not in event_types:
            continue
        details: dict[str, Any] = {}
        held = op.step_details or op.callback_details or op.context_details or op.chained_invoke_details
        if outcome == "Succeeded":
            if kind == "WAIT":
                details = {"Duration": _wait_seconds(op)}
            else:
                details = {"Result": result(getattr(held, "result", None))}
        elif getattr(held, "error", None) is not None:
            details = {"Error": error(held.error)}
        else:
            details = {"Error": error(None)}
        if kind == "STEP":
            attempts = op.step_details.attempt if op.step_details else 1
            details["RetryDetails"] = {"CurrentAttempt": attempts}
        end = op.end_timestamp or op.start_timestamp
        add(end, {**base, "EventType": f"{name}{outcome}", "EventTimestamp": end,
                  f"{name}{outcome}Details": details})
    execution = ops.get(state.execution_id)
    if ending.status != "RUNNING" and execution is not None:
        base = {"Id": state.execution_id}
        at = ending.at if ending.at is not None else execution.start_timestamp
        if ending.status == "SUCCEEDED":
            add(at, {**base, "EventType": "ExecutionSucceeded", "EventTimestamp": at,
                     "ExecutionSucceededDetails": {"Result": result(ending.result)}})
        else:
            kind = {"FAILED": "Failed", "STOPPED": "Stopped", "TIMED_OUT": "TimedOut"}.get(ending.status, "Failed")
            add(at, {**base, "EventType": f"Execution{kind}", "EventTimestamp": at,
                     f"Execution{kind}Details": {"Error": error(ending.error)}})
    found.sort(key=lambda item: (item[0], item[1]))
    return [{**event, "EventId": number} for number, (_, _, event) in enumerate(found, start=1)]


def _started(kind: str, op: Any, state: Any, op_id: str, result: Any) -> dict[str, Any]:
    if kind == "WAIT":
        end = op.wait_details.scheduled_end_timestamp if op.wait_details else op.start_timestamp
        return {"Duration": _wait_seconds(op), "ScheduledEndTimestamp": end}
    if kind == "CALLBACK":
        timeout_at, heartbeat_ms = state.callback_timeouts.get(op_id, (0, 0))
        start_ms = int(seconds(op.start_timestamp) * 1000)
        return {"CallbackId": op.callback_details.callback_id if op.callback_details else "",
                "Timeout": (timeout_at - start_ms) // 1000 if timeout_at else None,
                "HeartbeatTimeout": heartbeat_ms // 1000 if heartbeat_ms else None}
    if kind == "CHAINED_INVOKE":
        target = state.invokes.get(op_id, {})
        return {"FunctionName": target.get("function") or "", "Input": result(target.get("payload"))}
    return {}


def _wait_seconds(op: Any) -> int:
    end = op.wait_details.scheduled_end_timestamp if op.wait_details else None
    if end is None or op.start_timestamp is None:
        return 0
    return max(0, round(seconds(end) - seconds(op.start_timestamp)))


def seconds(when: Any) -> float:
    """An instant (a datetime, epoch seconds, or None: 0) as epoch seconds."""
    if isinstance(when, dt.datetime):
        return when.timestamp()
    return float(when or 0)
