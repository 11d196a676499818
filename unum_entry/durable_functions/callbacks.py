"""Callback ids of durable executions and their completion (SendDurableExecutionCallbackSuccess /
Failure), without a service.

A callback id names the waiting execution — its workflow, function, fan-out frames and unum
invocation — the operation, and a nonce drawn by the execution whose CALLBACK START won the log
slot (unguessable, so an id cannot be forged from the others):

    unumcb1.<base64url(JSON [workflow, function, frames, invocation, operation id, nonce])>

`complete(id, result=... | error=..., store, invoker)` appends the outcome to the execution's
log (first wins: a second completion, or one after the callback timed out, is refused with
`CallbackAlreadyCompleted`) and re-invokes the waiting invocation, which replays and continues.
A retried completion whose append had won re-sends the invoke (its delivery is absorbed).

The completion's log entry is written in one transaction that also requires the workflow's two
ending records absent (`_append_unless_ended`), as a task token's callback record is
(unum_entry.asl.callbacks): a completion after the workflow ended — a stop, even between its
claim and its failure record, a failure, a timeout, a result — is refused with
`CallbackAlreadyCompleted` ("the workflow has ended (stopped)") and re-invokes nothing; one
before it completes the callback, and the stop still ends the workflow. On DynamoDB a
three-item transaction instead of one conditional put (a completion is rare).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Defined below the service (callback_ids), and importable from here as before.
from unum_entry.durable_functions.callback_ids import (PREFIX, CallbackAlreadyCompleted, CallbackRef,  # noqa: F401
                                                    DurableCallbackError, InvalidCallbackId, callback_id)

RESUME = "__unum_durable_resume__"  # the event of a delivery that re-invokes a durable execution


@dataclass(frozen=True)
class Completed:
    workflow: str
    function: str


def complete(text: str, *, store: Any, invoker: Any, result: str | None = None,
             error: Mapping[str, Any] | None = None) -> Completed:
    """Complete the callback `text` with `result` (the callback's payload, a string: the SDK
    hands it to its serdes) or `error` ({ErrorType, ErrorMessage, ErrorData}); then re-invoke
    the waiting execution. Raises InvalidCallbackId / CallbackAlreadyCompleted (one line)."""
    from unum_entry.durable_functions.service import TERMINAL

    log, ref = _waiting_log(text, store)
    log.time_out_callbacks()  # a completion after the callback's timeout is refused (the timeout wins)
    completion: dict[str, Any] = {"Id": ref.operation_id, "Status": "FAILED" if error is not None else "SUCCEEDED",
                                  "Result": result, "Error": dict(error) if error is not None else None}
    won = _append_unless_ended(log, completion)
    if not won:
        final = log.state.ops[ref.operation_id]
        mine = final.callback_details is not None and final.callback_details.result == result and (
            (final.callback_details.error.to_dict() if final.callback_details.error else None)
            == completion["Error"]) and final.status.value == completion["Status"]
        if not mine or final.status not in TERMINAL:
            raise CallbackAlreadyCompleted(f"callback {ref.operation_id} of workflow {ref.workflow} was already "
                                           f"completed ({final.status.value})")
    resume(invoker, log.state.meta)
    return Completed(ref.workflow, ref.function)


def _append_unless_ended(log: Any, completion: dict[str, Any]) -> bool:
    """`ExecutionLog.append_completion` of `completion` with every slot's create-if-absent in one
    transaction that also requires the workflow's ending records absent (module docstring).
    Returns False when the operation already has an outcome (first wins); raises
    CallbackAlreadyCompleted, writing nothing, when the workflow has ended."""
    from unum_entry.durable_functions.log import MAX_APPEND_TRIES
    from unum_entry.durable_functions.service import TERMINAL
    from unum_entry.errors import GuardFailed, StoreError
    from unum_entry.outcome import Ending, read_outcome
    from unum_entry.stores.base import Guard, Kind

    workflow = log.ledger.workflow
    guards = [Guard(key, present=False) for key in Ending.of(workflow).keys]
    for _ in range(MAX_APPEND_TRIES):
        op = log.state.ops.get(completion["Id"])
        if op is None or op.status in TERMINAL:
            return False
        entry = {"t": log.now_ms(), "c": [completion]}
        try:
            stored, mine = log.store.transact(log.key(log.length), json.dumps(entry).encode(), (), workflow=workflow,
                                              kind=Kind.STEP, guards=guards, expires_at=log.ledger.expires_at(Kind.STEP))
        except GuardFailed:
            raise CallbackAlreadyCompleted(
                f"callback {completion['Id']} of workflow {workflow}: the workflow has ended "
                f"({read_outcome(log.store, workflow).status}); the callback no longer exists and this completion "
                "is ignored") from None
        log.state.apply(entry if mine else json.loads(stored))
        log.length += 1
        if mine:
            return True
    raise StoreError(f"durable execution {log.invocation}: lost {MAX_APPEND_TRIES} log slots in a row")


def heartbeat(text: str, *, store: Any) -> Completed:
    """SendDurableExecutionCallbackHeartbeat: the waiting callback `text` is alive (its
    heartbeat timeout starts again). Raises InvalidCallbackId, or CallbackAlreadyCompleted when it
    was completed or timed out."""
    log, ref = _waiting_log(text, store)
    if not log.append_heartbeat(ref.operation_id):
        status = log.state.ops[ref.operation_id].status.value
        raise CallbackAlreadyCompleted(f"callback {ref.operation_id} of workflow {ref.workflow} was already "
                                       f"completed ({status})")
    return Completed(ref.workflow, ref.function)


def _waiting_log(text: str, store: Any) -> tuple[Any, CallbackRef]:
    """The log of the execution the callback id `text` belongs to (read to its end), stamped
    with that execution's deadline; InvalidCallbackId unless the id is one of its callbacks."""
    from unum_entry.durable_functions.log import ExecutionLog
    from unum_entry.retention import Ledger, store_retention

    ref = CallbackRef.parse(text)
    retention = store_retention(store)
    log = ExecutionLog(store, ref.invocation, Ledger.bounded(ref.workflow, None, retention), clock=retention.clock)
    log.catch_up()
    log.ledger = Ledger.bounded(ref.workflow, int(log.state.meta.get("Deadline") or 0), retention)
    op = log.state.ops.get(ref.operation_id)
    details = op.callback_details if op is not None else None
    if details is None or details.callback_id != text:
        raise InvalidCallbackId(f"unknown callback id (no such waiting callback, or it expired): {text[:40]}…")
    return log, ref


def resume(invoker: Any, meta: Mapping[str, Any]) -> None:
    """Re-deliver the execution whose log starts with `meta`: its first delivery again (the same
    invocation, the same inputs); it replays from the log. An execution recorded without it
    gets a resume event at its position."""
    from unum_entry.envelope import DataRef, Envelope, Frame

    wire = meta.get("Resume")
    if not isinstance(wire, dict):
        wire = Envelope(workflow=meta["Workflow"], frames=tuple(Frame(*f) for f in meta["Frames"]),
                        inputs=(DataRef(value={RESUME: {"reason": "resume"}}),),
                        deadline=int(meta.get("Deadline") or 0)).to_wire()
    invoker.invoke(meta["Function"], dict(wire))


@dataclass(frozen=True)
class WaitingCallback:
    """A callback a durable execution waits for: the function running it, the operation's name
    (`create_callback` / `wait_for_callback`'s `name`, or its id) and the callback id."""

    function: str
    name: str
    callback_id: str


def waiting_callbacks(store: Any, invocation: str) -> list[WaitingCallback]:
    """The callbacks the execution run by `invocation` waits for (not completed, not timed out)."""
    from unum_entry.durable_functions.log import ExecutionLog
    from unum_entry.retention import Ledger, store_retention

    retention = store_retention(store)
    log = ExecutionLog(store, invocation, Ledger.bounded("", None, retention), clock=retention.clock)
    log.catch_up()
    from aws_durable_execution_sdk_python.lambda_service import OperationStatus, OperationType

    function = str(log.state.meta.get("Function") or "")
    return [WaitingCallback(function, op.name or op.operation_id, op.callback_details.callback_id)
            for op in log.state.ops.values()
            if op.operation_type is OperationType.CALLBACK and op.status is OperationStatus.STARTED
            and op.callback_details is not None]


def waiting_in(store: Any, workflow: str) -> list[WaitingCallback]:
    """The callbacks the durable executions of `workflow` wait for (one pass over the
    workflow's records: for tools such as `run`, never the runtime)."""
    from unum_entry.stores.base import Kind

    found: list[WaitingCallback] = []
    for record in store.records(workflow):
        if record.kind is Kind.STEP and record.key.startswith("d-") and record.value is not None:
            try:
                first = json.loads(record.value)
            except ValueError:
                continue
            if isinstance(first, dict) and isinstance(first.get("x"), dict) and first["x"].get("Invocation"):
                found += waiting_callbacks(store, first["x"]["Invocation"])
    return found
