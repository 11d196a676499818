"""The end of a durable function's chained invoke (`context.invoke`): the target's outcome
completes the caller's CHAINED_INVOKE operation (first outcome wins) and re-delivers the caller.

The target runs as its own workflow `naming.invoked_workflow(caller workflow, operation)`:
- a durable target answers itself when its execution ends (adapter);
- a compiled state machine (any of the workflow folder's compiled Step Functions functions) is a
  workflow of several functions: its first function records who waits for it (`accept`,
  create-if-absent under `naming.durable_caller_key(workflow)`), and the runtime calls
  `workflow_ended` where the workflow's root result or its failure record is written — every
  duplicate of that invocation too, so a crash between the record and the answer loses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from unum_entry import naming
from unum_entry.errors import ConfigurationError
from unum_entry.stores.base import Kind, Store


def answer(caller: Mapping[str, Any], outcome: Mapping[str, Any], *, store: Store, invoker: Any,
           clock: Callable[[], float]) -> None:
    """An invoked execution ended with `outcome` ({Status, Result (JSON text), Error}): append it
    to the caller's log as the invoke operation's completion (first wins) and re-deliver the
    caller (a re-delivery that finds nothing new suspends again: absorbed)."""
    from unum_entry.durable_functions.callbacks import resume
    from unum_entry.durable_functions.log import ExecutionLog
    from unum_entry.retention import Ledger, Retention

    retention = Retention(ttl_seconds=store.ttl_seconds, clock=clock)
    log = ExecutionLog(store, caller["invocation"], Ledger.bounded(caller["workflow"], caller["deadline"], retention),
                       clock=clock)
    log.append_completion({"Id": caller["operation"], **outcome})
    resume(invoker, log.state.meta)


def accept(invoked: Any, context: Any) -> Any:
    """At a compiled state machine's function invoked by a durable function: record the caller
    for the end of this workflow (the first record wins) and return the machine's input, the
    invoke's payload."""
    from unum_entry.retention import Ledger, Retention
    from unum_entry.timers import timers_of

    timers = timers_of(context)
    if timers is None or not isinstance(invoked, Mapping) or not isinstance(invoked.get("caller"), Mapping):
        raise ConfigurationError("a chained invoke's target runs inside unum's runtime with its caller")
    retention = Retention(ttl_seconds=timers.store.ttl_seconds, clock=timers.clock)
    ledger = Ledger.bounded(timers.workflow, timers.envelope.deadline, retention)
    ledger.create(timers.store, naming.durable_caller_key(timers.workflow),
                  json.dumps(dict(invoked["caller"])).encode(), Kind.STEP)
    payload = invoked.get("payload")
    return json.loads(payload) if isinstance(payload, str) else payload


def workflow_ended(store: Store, invoker: Any, clock: Callable[[], float], workflow: str) -> None:
    """`workflow` reached its end (its root result or its failure record is written). If a
    durable function's invoke started it, complete that invoke with the recorded outcome. Costs
    nothing for other workflows (no read unless the workflow id is an invoked one's)."""
    if naming.INVOKED not in workflow:
        return
    from unum_entry.outcome import Ending

    ending = Ending.of(workflow)
    found = store.get_many([naming.durable_caller_key(workflow), *ending.keys])
    raw = found.get(naming.durable_caller_key(workflow))
    if raw is None:
        return  # a durable target answers itself; or not started by an invoke
    outcome = _outcome(*(found.get(key) for key in ending.keys))
    if outcome is not None:
        answer(json.loads(raw), outcome, store=store, invoker=invoker, clock=clock)


def _outcome(result: bytes | None, failure: bytes | None) -> dict[str, Any] | None:
    """The invoke's outcome from the workflow's two ending records (None: it has not ended), by
    the rules every reader follows (outcome.read_outcome): a stop's or an execution timeout's
    claim of the result record is no result (STOPPED / TIMED_OUT, also when it died before its
    failure record); a failure wins over the result unless it is the deadline watchdog's, which
    alone answers nothing (a result landing after it still wins: outcome.yields_to_results)."""
    from unum_entry.codec import decode
    from unum_entry.outcome import WATCHDOG_FIELD, WorkflowStatus, failed_status, is_claim, yields_to_results

    value = decode(result) if result is not None else None
    record = decode(failure) if failure is not None else None
    if value is not None and is_claim(value):
        record = record or {k: v for k, v in value.items() if k not in ("at", "of", "value")}
        value = None
    if value is not None and (record is None or yields_to_results(record, True)):
        return {"Status": "SUCCEEDED", "Result": json.dumps(value["value"]), "Error": None}
    if record is None or record.get(WATCHDOG_FIELD) is True:  # the deadline watchdog's yields to a later result:
        return None  # not final; the caller, past the same deadline, is ended by its own watchdog
    status = {WorkflowStatus.STOPPED: "STOPPED", WorkflowStatus.TIMED_OUT: "TIMED_OUT"}.get(failed_status(record),
                                                                                          "FAILED")
    return {"Status": status, "Result": None,
            "Error": {"ErrorType": record.get("Error") or "States.Runtime", "ErrorMessage": record.get("Cause") or ""}}


__all__ = ["accept", "answer", "workflow_ended"]
