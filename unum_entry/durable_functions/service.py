"""The durable execution service's state machine, as data: what a log of checkpoint entries means.

Lambda's durable service turns each `OperationUpdate` a handler checkpoints into an `Operation`
(STEP START -> STARTED, RETRY -> PENDING until its next attempt, SUCCEED -> SUCCEEDED, WAIT START
-> STARTED until its scheduled end, CALLBACK START -> STARTED with a callback id, ...). Here that
meaning is a pure fold over the execution's log (unum_entry.durable_functions.log): `fold(entries)` gives
the operations, `view(ops, now)` adds what only time changes (a wait whose end passed reads
SUCCEEDED, a retry whose time came reads READY), and `admit(ops, update)` says whether an update
may still be appended: the log's first entry for an operation's transition wins, so a second
execution of the same invocation that computed a different result is refused (`Conflict`) and
replays from the winner instead.

Entries are JSON objects: `{"t": ms, "u": [OperationUpdate dicts]}` (an execution's batch; a
CALLBACK START also carries the `Nonce` of its callback id), `{"t": ms, "c": [completions]}`
(a callback's or chained invoke's outcome, a callback timeout) and the first entry
`{"t": ms, "x": {...}}` (the execution's input and where it runs).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from aws_durable_execution_sdk_python.lambda_service import (CallbackDetails, ChainedInvokeDetails, ContextDetails,
                                                             ErrorObject, ExecutionDetails, Operation,
                                                             OperationAction, OperationStatus, OperationType,
                                                             OperationUpdate, StepDetails, WaitDetails)

TERMINAL = frozenset({OperationStatus.SUCCEEDED, OperationStatus.FAILED, OperationStatus.CANCELLED,
                      OperationStatus.TIMED_OUT, OperationStatus.STOPPED})


class Conflict(Exception):
    """An update that contradicts the log (another execution's outcome of the same operation won)."""


def _ts(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


class Folded:
    """The operations of one execution (by id, in log order) and per-callback deadlines."""

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        self.ops: dict[str, Operation] = {}
        self.callback_timeouts: dict[str, tuple[int, int]] = {}  # op id -> (timeout ms, heartbeat ms) after start
        self.heartbeats: dict[str, int] = {}  # op id -> the callback's start or last heartbeat (ms)
        self.invokes: dict[str, dict[str, Any]] = {}  # op id -> chained invoke target and payload
        self.meta: dict[str, Any] = {}

    def apply(self, entry: Mapping[str, Any]) -> list[str]:
        """Apply one log entry; returns the ids of the operations it changed."""
        t = int(entry["t"])
        changed: list[str] = []
        if "x" in entry:
            self.meta = dict(entry["x"])
            self.ops[self.execution_id] = Operation(
                operation_id=self.execution_id, operation_type=OperationType.EXECUTION,
                status=OperationStatus.STARTED, start_timestamp=_ts(t),
                execution_details=ExecutionDetails(input_payload=self.meta.get("Input")))
            changed.append(self.execution_id)
        for raw in entry.get("u", ()):
            update = OperationUpdate.from_dict(raw)
            op = self._transition(update, self.ops.get(update.operation_id), t, raw.get("Nonce"))
            if op is not None:
                self.ops[update.operation_id] = op
                changed.append(update.operation_id)
        for op_id in entry.get("h", ()):  # callback heartbeats (SendDurableExecutionCallbackHeartbeat)
            op = self.ops.get(op_id)
            if op is not None and op.status is OperationStatus.STARTED:
                self.heartbeats[op_id] = t
        for done in entry.get("c", ()):
            op = self.ops.get(done["Id"])
            if op is None or op.status in TERMINAL:
                continue
            error = ErrorObject.from_dict(done["Error"]) if done.get("Error") else None
            status = OperationStatus(done["Status"])
            if op.operation_type is OperationType.CALLBACK and op.callback_details is not None:
                op = replace(op, status=status, end_timestamp=_ts(t),
                             callback_details=replace(op.callback_details, result=done.get("Result"), error=error))
            else:
                op = replace(op, status=status, end_timestamp=_ts(t),
                             chained_invoke_details=ChainedInvokeDetails(result=done.get("Result"), error=error))
            self.ops[done["Id"]] = op
            changed.append(done["Id"])
        return changed

    def _transition(self, u: OperationUpdate, cur: Operation | None, t: int, nonce: str | None) -> Operation | None:
        now = _ts(t)
        kind, action = u.operation_type, u.action
        base = cur or Operation(operation_id=u.operation_id, operation_type=kind, status=OperationStatus.STARTED,
                                parent_id=u.parent_id, name=u.name, sub_type=u.sub_type, start_timestamp=now)
        if kind is OperationType.EXECUTION:
            status = OperationStatus.SUCCEEDED if action is OperationAction.SUCCEED else OperationStatus.FAILED
            self.meta["Result"], self.meta["Error"] = u.payload, (u.error.to_dict() if u.error else None)
            return replace(base, status=status, end_timestamp=now)
        if kind is OperationType.STEP:
            prior = cur.step_details if cur and cur.step_details else StepDetails()
            if action is OperationAction.START:
                return replace(base, status=OperationStatus.STARTED,
                               step_details=replace(prior, next_attempt_timestamp=None))
            if action is OperationAction.RETRY:
                delay = u.step_options.next_attempt_delay_seconds if u.step_options else 0
                return replace(base, status=OperationStatus.PENDING, step_details=StepDetails(
                    attempt=prior.attempt + 1, next_attempt_timestamp=_ts(t + int(delay * 1000)),
                    result=u.payload, error=u.error))
            status = OperationStatus.SUCCEEDED if action is OperationAction.SUCCEED else OperationStatus.FAILED
            return replace(base, status=status, end_timestamp=now, step_details=StepDetails(
                attempt=prior.attempt + 1, result=u.payload, error=u.error))
        if kind is OperationType.WAIT:
            if action is OperationAction.CANCEL:
                return replace(base, status=OperationStatus.CANCELLED, end_timestamp=now)
            seconds = u.wait_options.wait_seconds if u.wait_options else 0
            return replace(base, status=OperationStatus.STARTED,
                           wait_details=WaitDetails(scheduled_end_timestamp=_ts(t + seconds * 1000)))
        if kind is OperationType.CALLBACK:
            options = u.callback_options
            self.callback_timeouts[u.operation_id] = (
                t + int(options.timeout_seconds or 0) * 1000 if options and options.timeout_seconds else 0,
                int(options.heartbeat_timeout_seconds or 0) * 1000 if options else 0)
            self.heartbeats[u.operation_id] = t
            from unum_entry.durable_functions.callback_ids import callback_id  # the id names this execution's meta

            return replace(base, status=OperationStatus.STARTED, callback_details=CallbackDetails(
                callback_id=callback_id(self.meta, u.operation_id, nonce or "")))
        if kind is OperationType.CHAINED_INVOKE:
            target = u.chained_invoke_options
            self.invokes[u.operation_id] = {"function": target.function_name if target else "",
                                            "payload": u.payload}
            return replace(base, status=OperationStatus.STARTED, chained_invoke_details=ChainedInvokeDetails())
        # CONTEXT
        status = {OperationAction.START: OperationStatus.STARTED, OperationAction.SUCCEED: OperationStatus.SUCCEEDED,
                  OperationAction.FAIL: OperationStatus.FAILED}.get(action, OperationStatus.STARTED)
        details = ContextDetails(result=u.payload, error=u.error,
                                 replay_children=bool(u.context_options and u.context_options.replay_children))
        return replace(base, status=status, end_timestamp=now if status in TERMINAL else None,
                       context_details=details)


def fold(execution_id: str, entries: Iterable[Mapping[str, Any]]) -> Folded:
    """The state a log of entries describes."""
    state = Folded(execution_id)
    for entry in entries:
        state.apply(entry)
    return state


def view(state: Folded, now_ms: int) -> dict[str, Operation]:
    """The operations as a handler sees them at `now_ms`: a wait whose end has passed reads
    SUCCEEDED, a retry whose next attempt is due reads READY."""
    out: dict[str, Operation] = {}
    for op_id, op in state.ops.items():
        if (op.operation_type is OperationType.WAIT and op.status is OperationStatus.STARTED
                and op.wait_details and op.wait_details.scheduled_end_timestamp
                and op.wait_details.scheduled_end_timestamp.timestamp() * 1000 <= now_ms):
            op = replace(op, status=OperationStatus.SUCCEEDED, end_timestamp=op.wait_details.scheduled_end_timestamp)
        elif (op.operation_type is OperationType.STEP and op.status is OperationStatus.PENDING
              and op.step_details and op.step_details.next_attempt_timestamp
              and op.step_details.next_attempt_timestamp.timestamp() * 1000 <= now_ms):
            op = replace(op, status=OperationStatus.READY)
        out[op_id] = op
    return out


def wake_times(state: Folded, now_ms: int) -> list[int]:
    """Epoch ms at which time alone changes the state as seen at `now_ms` (`view`): the ends of
    waits still running, next attempts of retries not yet due, callback timeouts."""
    times: list[int] = []
    for op_id, op in view(state, now_ms).items():
        if op.operation_type is OperationType.WAIT and op.status is OperationStatus.STARTED and op.wait_details \
                and op.wait_details.scheduled_end_timestamp:
            times.append(int(op.wait_details.scheduled_end_timestamp.timestamp() * 1000))
        elif op.operation_type is OperationType.STEP and op.status is OperationStatus.PENDING and op.step_details \
                and op.step_details.next_attempt_timestamp:
            times.append(int(op.step_details.next_attempt_timestamp.timestamp() * 1000))
        elif op.operation_type is OperationType.CALLBACK and op.status is OperationStatus.STARTED:
            due = callback_due(state, op_id)
            if due is not None:
                times.append(due[0])
    return times


def callback_due(state: Folded, op_id: str) -> tuple[int, str] | None:
    """When a waiting callback times out (epoch ms) and how ("Callback.Timeout" or
    "Callback.Heartbeat": no heartbeat within its heartbeat timeout), or None if never."""
    timeout_at, heartbeat_ms = state.callback_timeouts.get(op_id, (0, 0))
    candidates = []
    if timeout_at:
        candidates.append((timeout_at, "Callback.Timeout"))
    if heartbeat_ms:
        candidates.append((state.heartbeats.get(op_id, 0) + heartbeat_ms, "Callback.Heartbeat"))
    return min(candidates) if candidates else None


def admit(ops: Mapping[str, Operation], update: OperationUpdate) -> bool:
    """Whether `update` still has an effect on `ops` (the folded view): False for a repeat
    (a START of an operation another execution started), raises Conflict for an outcome of an
    operation whose outcome is already in the log (or whose attempt moved on)."""
    cur = ops.get(update.operation_id)
    if update.action is OperationAction.START:
        if cur is None:
            return True
        return cur.operation_type is OperationType.STEP and cur.status is OperationStatus.READY
    if cur is None:
        return True
    if cur.status in TERMINAL or cur.status is OperationStatus.PENDING:
        raise Conflict(f"operation {update.operation_id} already {cur.status.value}")
    return True
