"""Task tokens without a coordinator: `.waitForTaskToken` Tasks and their callbacks.

A Task whose Resource ends in `.waitForTaskToken` runs its call (a Lambda handler, an SQS
message, ...) with `$$.Task.Token` set, then its function commits a *wait decision*
`{"__next__": "__wait__", "wait": {state, transfer, nonce, token, retries, issued, timeout}}` and
stops (IR `suspend`): no successor, no result. The token names that invocation — its function and
its whole fan-out position (every frame `[index, size, iteration]`, root first, so a Task inside a
Parallel branch or a Map iteration is named too) — and carries the nonce:

    unum1.<base64url(JSON [workflow id, function, frames, nonce])>

The nonce is 128 random bits drawn once per invocation as a journaled step
(`unum_entry.steps`: the waiting function is made durable), so every execution of the waiting
invocation — a retry, a redelivery, a concurrent duplicate — sends the *same* token; without a
step journal (a bare handler context) it is drawn per execution and only the committed one is
accepted. Nothing but the store is needed to resume: `complete(token, outcome, store, invoker)`
1. decodes the token and reads the waiting invocation's checkpoint (`naming.checkpoint_key` of
   its frames): unknown when absent, when it is not a wait decision or when the nonce differs (a
   forged token: the nonce is not guessable, and a token names one position only);
2. writes the *callback record* with one create-if-absent (`naming.callback_key`) that also
   requires the workflow's ending records absent: the first callback wins; any later one is
   refused with `TaskAlreadyCompleted` (after re-sending the winner's continuation, so a callback
   that crashed before invoking is completed by a retry); one after the workflow ended — a stop,
   even half-way through its two writes, a failure, a timeout — is refused with `TaskTimedOut`
   (AWS: "Provided task does not exist anymore") and sends nothing (`_create_unless_ended`);
3. invokes the same function as the next invocation of its thread — the same frames, the
   innermost iteration + 1 — with the resume event; the runner there applies the Task's Retry
   (a failure callback or a timeout re-runs the Task with a new token after the back-off),
   ResultSelector / ResultPath / Catch to the callback's output or error and continues; inside a
   branch its end joins the branch's fan-in at the waiting invocation's slot. Its name is
   deterministic, so a re-sent continuation is absorbed by its commit: the workflow resumes
   exactly once.

A token is expired once the waiting invocation's retention ends (its checkpoint's expiry). A
Task's `TimeoutSeconds` and `HeartbeatSeconds` are durable timers armed when it commits its wait
(unum_entry/asl/timing.py): a due timer completes the task with `States.Timeout` /
`States.HeartbeatTimeout` through the same first-wins callback record (`record_outcome`), so
exactly one of {callback, timer} wins; a callback after the timeout is refused with
`TaskTimedOut` (and, if the timer is late, records the timeout itself). `task_heartbeat` records
a heartbeat (SendTaskHeartbeat; `heartbeat_due` reads them). `waiting(store, workflow)` lists the
tasks of a workflow that wait for their callback (for `run` and `inspect`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The token and wait-decision rules live in unum_entry.task_tokens (read by the watchdog too);
# callers of this module name them here as before.
from unum_entry.errors import CallbackError, InvalidToken, TaskAlreadyCompleted, TaskNotWaitingYet, TaskTimedOut
from unum_entry.task_tokens import TOKEN_PREFIX, WAIT, Position, Token, Waiting, position_of, waiting


RESUME = "__unum_asl_resume__"


# ---- the waiting side (inside the compiled function) -----------------------------------------

def waits(state: Mapping[str, Any]) -> bool:
    """True for a Task that waits for a callback (`.waitForTaskToken`, or an activity Task:
    unum_entry.asl.activities)."""
    from unum_entry.asl.activities import is_activity

    resource = str(state.get("Resource", ""))
    return resource.endswith(".waitForTaskToken") or is_activity(resource)


def issue(context: Any, frames: Any) -> Token:
    """The token of the invocation running `context` at fan-out position `frames` (a list of
    [index, size, iteration], root first). The nonce is a step of the invocation's journal when
    the context has one (the same token in every execution of it), else drawn now."""
    journaled = getattr(context, "_journal", None) is not None  # a StepContext of a durable handler
    nonce = context.step("unum.task-token", _nonce) if journaled else _nonce()
    return Token(context.workflow_id, context.function_name, position_of(frames), nonce)


def _nonce() -> str:
    return secrets.token_hex(16)


def wait_decision(state: str, transfer: Mapping[str, Any], token: Token, timeout: float | None,
                  retries: list[int] | None = None, *, deadline: int = 0) -> dict[str, Any]:
    """The decision a waiting Task's function commits (its IR `suspend`s on it). `retries`: the
    Task's Retry counters so far (a failure callback continues counting from them); `deadline`:
    the workflow's (InvocationContext.deadline), under which the continuation runs."""
    wait = {"state": state, "transfer": dict(transfer), "nonce": token.nonce, "token": token.text(),
            "retries": list(retries or []), "issued": time.time(), "timeout": timeout}
    if deadline:
        wait["deadline"] = int(deadline)
    return {"__next__": WAIT, "wait": wait}


@dataclass(frozen=True)
class Resumed:
    """What a callback did: the workflow and the continuation it invoked."""

    workflow: str
    function: str
    outcome: Mapping[str, Any]


def task_success(token: str, output: Any, *, store: Any, invoker: Any, now: float | None = None) -> Resumed:
    """SendTaskSuccess: the waiting Task's result is `output`. Raises a CallbackError."""
    return complete(token, {"output": output}, store=store, invoker=invoker, now=now)


def task_failure(token: str, error: str | None, cause: str | None, *, store: Any, invoker: Any,
                 now: float | None = None) -> Resumed:
    """SendTaskFailure: the waiting Task fails with `error` / `cause` (its Retry, then its Catch, apply)."""
    # AWS: SendTaskFailure without an error or a cause fails the Task with null for both
    return complete(token, {"error": error, "cause": cause}, store=store,
                    invoker=invoker, now=now)


def complete(token_text: str, outcome: Mapping[str, Any], *, store: Any, invoker: Any,
             now: float | None = None) -> Resumed:
    """Resume the waiting Task exactly once (module docstring)."""
    from unum_entry.codec import decode, encode
    from unum_entry.retention import Ledger, store_retention
    from unum_entry.stores.base import Kind

    token = Token.parse(token_text)
    now = store_retention(store).clock() if now is None else now  # the clock timers run on
    ending = _ending(token)
    records = store.read([token.invocation, token.record_key, *ending.keys])  # the ending rides on this read
    if token.record_key not in records:  # (a completed task answers as before: already completed / timed out)
        _refuse_if_ended(token, records)
    record = records.get(token.invocation)
    if record is None or record.value is None:
        raise TaskNotWaitingYet(f"task token of workflow {token.workflow}: no waiting task (yet): the function "
                                f"{token.function!r} has not committed its wait, or its retention has ended")
    decision = decode(record.value)
    wait = decision.get("wait") if isinstance(decision, Mapping) and decision.get("__next__") == WAIT else None
    if wait is None or wait.get("nonce") != token.nonce:
        raise InvalidToken(f"unknown task token for workflow {token.workflow} (function {token.function!r} is not "
                           "waiting on it)")
    timeout_at = wait.get("timeout_at")  # scaled, on the store's clock (unum_entry/asl/timing.py)
    if timeout_at is None and wait.get("timeout") is not None:
        timeout_at = wait["issued"] + wait["timeout"]  # a wait decision from before timers
    timed_out = timeout_at is not None and now > timeout_at
    if timed_out:
        outcome = {"error": "States.Timeout", "cause": f"the task timed out after {wait['timeout']:g} seconds "
                                                      "before its callback"}
    resume = {RESUME: {"wait": wait, "outcome": dict(outcome)}}
    # The continuation runs under the workflow's own deadline (recorded in the wait decision;
    # decisions without one: the waiting checkpoint's expiry, which is never earlier), so a
    # callback after `deadline - margin` ends the workflow with Unum.RetentionExpired instead of
    # joining a set that has expired (unum_entry.retention).
    ledger = Ledger(token.workflow, int(wait.get("deadline") or record.expires_at), store_retention(store))
    stored, created = _create_unless_ended(store, ledger, token, encode(resume, what="callback"))
    _continue(token, decode(stored), ledger.deadline, invoker)
    if not created:
        if _timed_out(decode(stored)[RESUME]["outcome"]):  # its TimeoutSeconds or HeartbeatSeconds timer won
            raise TaskTimedOut(f"task token of workflow {token.workflow}: the task has timed out; the workflow "
                               "continued with its timeout, this callback is ignored")
        raise TaskAlreadyCompleted(f"task token of workflow {token.workflow}: the task was already completed by an "
                                   "earlier callback; this one is ignored")
    if timed_out:
        raise TaskTimedOut(f"task token of workflow {token.workflow}: the task had timed out (TimeoutSeconds "
                           f"{wait['timeout']:g}); the workflow continues with States.Timeout")
    return Resumed(token.workflow, token.function, outcome)


def _ending(token: Token) -> Any:
    """The ending records (`outcome.Ending`) of the token's workflow."""
    from unum_entry.outcome import Ending  # lazy: the rules layer

    return Ending.of(token.workflow)


def _refuse_if_ended(token: Token, records: Mapping[str, Any]) -> None:
    """Raise TaskTimedOut (Step Functions' answer for a task that no longer exists) when the
    records read with the token's (`records`, which hold the workflow's ending keys when present)
    show that the workflow has ended: stopped, failed, timed out, succeeded — or a stop's claim
    whose failure record is not written yet. A callback then changes nothing."""
    from unum_entry.codec import decode
    from unum_entry.outcome import failed_status, is_claim

    ending = _ending(token)
    if not ending.reached(records):
        return
    found = records.get(ending.failure) or records.get(ending.result)
    value = decode(found.value) if found is not None and found.value is not None else None
    if isinstance(value, Mapping) and (ending.failure in records or is_claim(value)):
        how = str(failed_status(value))
    else:
        how = "succeeded"
    raise TaskTimedOut(f"task token of workflow {token.workflow}: the workflow has ended ({how}); the task no "
                       "longer exists and this callback is ignored")


def _create_unless_ended(store: Any, ledger: Any, token: Token, value: bytes) -> tuple[bytes, bool]:
    """THE write of a callback's record: create-if-absent (the first callback or timeout wins), in
    one transaction that also requires the workflow's two ending records absent, so a stop (its
    claim of the root result record, unum_entry.outcome.end_workflow) and a callback are ordered
    by the store: a callback after the stop's claim — even one made between the stop's two writes
    — is refused (TaskTimedOut) and sends nothing; one before it completes the task, and the stop
    still ends the workflow (the continuation drains as any in-flight invocation: docs/history.md).
    On DynamoDB a three-item transaction instead of one conditional put (a callback is rare)."""
    from unum_entry.errors import GuardFailed
    from unum_entry.stores.base import Guard, Kind

    ending = _ending(token)
    try:
        return store.transact(token.record_key, value, (), workflow=token.workflow, kind=Kind.MARKER,
                              guards=[Guard(key, present=False) for key in ending.keys],
                              expires_at=ledger.expires_at(Kind.MARKER))
    except GuardFailed:
        _refuse_if_ended(token, store.read(list(ending.keys)))
        raise  # a guard failed, yet neither ending record is there (expired meanwhile): the store's error


def _continue(token: Token, resume: Any, deadline: int, invoker: Any) -> None:
    """Invoke the continuation: the waiting function's next invocation in its thread."""
    from unum_entry.codec import encode
    from unum_entry.envelope import DataRef, Envelope

    inline = {"value": resume} if len(encode(resume)) <= 64 * 1024 else {}
    env = Envelope(workflow=token.workflow, frames=token.continuation_frames(),
                   inputs=(DataRef(ref=token.record_key, **inline),), deadline=int(deadline))
    invoker.invoke(token.function, env.to_wire())


# ---- timeouts and heartbeats (their timers: unum_entry/asl/timing.py) --------------------------

TIMEOUTS = ("States.Timeout", "States.HeartbeatTimeout")
HEARTBEAT_BUCKETS = 4  # heartbeats are recorded per quarter of HeartbeatSeconds (see heartbeat_due)


def _timed_out(outcome: Mapping[str, Any]) -> bool:
    return outcome.get("error") in TIMEOUTS


def recorded(store: Any, token: Token) -> dict[str, Any] | None:
    """The resume event (`{"wait", "outcome"}`) in the callback record of `token`: None while
    the task waits; else what completed it (a callback, or a timeout)."""
    from unum_entry.codec import decode

    raw = store.get(token.record_key)
    return None if raw is None else dict(decode(raw)[RESUME])


def record_outcome(store: Any, token: Token, wait: Mapping[str, Any], expires_at: int,
                   outcome: Mapping[str, Any]) -> dict[str, Any]:
    """Complete the waiting task with `outcome` (a timer's States.Timeout or
    States.HeartbeatTimeout) unless something completed it first: one create-if-absent of its
    callback record, the same first-wins write as `complete`. Returns the winner's resume event
    (this outcome's, or the earlier callback's). `expires_at`: the waiting checkpoint's."""
    from unum_entry.codec import decode, encode
    from unum_entry.retention import Ledger, store_retention
    from unum_entry.stores.base import Kind

    ledger = Ledger(token.workflow, int(wait.get("deadline") or expires_at), store_retention(store))
    resume = {RESUME: {"wait": dict(wait), "outcome": dict(outcome)}}
    stored, _ = ledger.create(store, token.record_key, encode(resume, what="callback"), Kind.MARKER)
    return dict(decode(stored)[RESUME])


@dataclass(frozen=True)
class Beat:
    """A heartbeat accepted: the waiting task's workflow and function, and when (store clock)."""

    workflow: str
    function: str
    at: float


def task_heartbeat(token_text: str, *, store: Any, now: float | None = None) -> Beat:
    """SendTaskHeartbeat: the waiting Task is alive. Records the heartbeat (one create-if-absent
    per quarter of its HeartbeatSeconds: `heartbeat_due` reads them when the heartbeat timer
    fires). Raises InvalidToken, TaskNotWaitingYet, TaskAlreadyCompleted, or TaskTimedOut once the
    task has timed out (its timer won, or its TimeoutSeconds have passed)."""
    from unum_entry import naming
    from unum_entry.codec import decode, encode
    from unum_entry.retention import Ledger, store_retention
    from unum_entry.stores.base import Kind

    token = Token.parse(token_text)
    retention = store_retention(store)
    now = retention.clock() if now is None else now
    found = store.read([token.invocation, token.record_key, *_ending(token).keys])
    if token.record_key not in found:
        _refuse_if_ended(token, found)
    record = found.get(token.invocation)
    if record is None or record.value is None:
        raise TaskNotWaitingYet(f"task token of workflow {token.workflow}: no waiting task (yet)")
    decision = decode(record.value)
    wait = decision.get("wait") if isinstance(decision, Mapping) and decision.get("__next__") == WAIT else None
    if wait is None or wait.get("nonce") != token.nonce:
        raise InvalidToken(f"unknown task token for workflow {token.workflow} (function {token.function!r} is not "
                           "waiting on it)")
    done = found.get(token.record_key)
    if done is not None and done.value is not None:
        if _timed_out(decode(done.value)[RESUME]["outcome"]):
            raise TaskTimedOut(f"task token of workflow {token.workflow}: the task has timed out")
        raise TaskAlreadyCompleted(f"task token of workflow {token.workflow}: the task was already completed")
    if wait.get("timeout_at") is not None and now > wait["timeout_at"]:
        raise TaskTimedOut(f"task token of workflow {token.workflow}: the task has timed out (TimeoutSeconds "
                           f"{wait['timeout']:g})")
    if wait.get("heartbeat_span"):
        bucket = int(now // (float(wait["heartbeat_span"]) / HEARTBEAT_BUCKETS))
        ledger = Ledger(token.workflow, int(wait.get("deadline") or record.expires_at), retention)
        ledger.create(store, naming.heartbeat_key(token.invocation, token.nonce, bucket),
                      encode({"at": now}, what="heartbeat"), Kind.MARKER)
    return Beat(token.workflow, token.function, now)


def heartbeat_due(store: Any, token: Token, wait: Mapping[str, Any], now: float) -> float:
    """When the waiting task's heartbeat expires, as far as the records show at `now`: its last
    heartbeat (or its start) + HeartbeatSeconds. Each heartbeat bucket (a quarter of
    HeartbeatSeconds) keeps its first heartbeat only, so a later one in the same bucket counts as
    the bucket's end: the expiry is never early, and at most a quarter of HeartbeatSeconds late.
    One read of the buckets that can hold a heartbeat within HeartbeatSeconds of `now`."""
    from unum_entry import naming

    span = float(wait["heartbeat_span"])
    width = span / HEARTBEAT_BUCKETS
    buckets = {naming.heartbeat_key(token.invocation, token.nonce, b): b
               for b in range(int((now - span) // width), int(now // width) + 1)}
    found = store.read(list(buckets))
    due = float(wait["issued"]) + span
    if found:
        due = max(due, (max(buckets[key] for key in found) + 1) * width + span)
    return due
