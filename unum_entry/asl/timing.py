"""Step Functions time on durable timers: Wait states, long Retry back-offs, and the
TimeoutSeconds / HeartbeatSeconds of `.waitForTaskToken` Tasks (unum_entry/timers.py).

No function sleeps to wait. A Wait (or a Retry back-off) longer than `IN_PROCESS_SECONDS` makes
the function commit a *timer wait decision* and stop (IR `suspend`, as a waiting Task does):

    {"__next__": "__wait__", "wait": {"timer": "wait"|"retry", "state", "transfer", "until",
                                       "ran", "retries"}}

after arming one timer (`Invoker.invoke_at`) that delivers `{TIMER: {"purpose", "waiting",
"round"}}` to the next invocation of its thread (the same frames, the innermost iteration + 1)
at `until` (the store's clock). That delivery — the *continuation* — reads the committed wait
decision (`waiting` is its checkpoint name), so it continues from committed data only, whichever
execution armed the timer: after the Wait state (`timer: wait`) or by re-running the Task /
re-fanning the Parallel or Map (`timer: retry`, with its Retry counters). A continuation is an
invocation like any other: delivered twice, it commits once; delivered late, it runs late;
delivered early (before `until`, or before the wait decision is committed) it re-arms a timer
named for the next `round` and is dropped without a commit (`TimerNotDue`).

A waiting Task (`.waitForTaskToken`, unum_entry/asl/callbacks.py) arms its TimeoutSeconds timer at
`issued + timeout` and its HeartbeatSeconds timer at `issued + heartbeat` (both scaled, on the
store's clock) when it commits its wait; they deliver to the same continuation invocation a
task-token callback resumes. Fired and due, a timer completes the Task with `States.Timeout` /
`States.HeartbeatTimeout` through the same first-wins callback record task-success uses, then
continues with whatever that record holds: exactly one of {callback, timer} wins, and the loser
changes nothing (a callback after the timeout is refused with TaskTimedOut; a timer after the
callback resumes the callback's outcome, which the callback's own continuation also delivers:
one commit). A heartbeat timer that finds a heartbeat within HeartbeatSeconds re-arms itself
for the next possible expiry (`callbacks.heartbeat_due`).

Waits are scaled by `Services.time_scale` (UNUM_ASL_TIME_SCALE) like every ASL delay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from unum_entry.asl.callbacks import WAIT
from unum_entry.errors import StatesRuntimeError
from unum_entry.timers import TIMER, TimerAfterEnding, TimerNotDue, Timers

# At most this long (real seconds, after scaling) a Wait or Retry back-off sleeps in the function
# instead of arming a timer: a timer costs a schedule, an invocation, a read and a commit (about
# $2.7 per million on AWS: EventBridge Scheduler $1.00, Lambda request $0.20, DynamoDB write $1.25
# and read $0.25), while one second of a 128 MB Lambda costs $2.1 per million; below a second,
# sleeping is about as cheap and as exact (docs/step-functions.md "Time").
IN_PROCESS_SECONDS = 1.0
UNCOMMITTED_BACKOFF = 0.1   # s: first re-arm of a timer that fired before its wait was committed
MAX_BACKOFF = 300.0         # s: ... doubling per round up to this


def seconds_field(state: Mapping[str, Any], name: str, resolve: Callable[[str], Any]) -> float | None:
    """`name` or `name + "Path"` of `state` (TimeoutSeconds, HeartbeatSeconds) as a positive
    number of seconds, or None when absent. Raises StatesRuntimeError naming the field."""
    for key in (name, f"{name}Path"):
        if key in state:
            value = resolve(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise StatesRuntimeError("States.Runtime", f"{key} must be a positive number, found {value!r}")
            return float(value)
    return None


def suspend(timers: Timers, purpose: str, state: str, transfer: Mapping[str, Any], seconds: float, *,
            ran_task: bool, retries: list[int] | None = None) -> dict[str, Any]:
    """Arm the timer of a Wait (`purpose` "wait") or a Retry back-off ("retry") `seconds` (real,
    already scaled) from now and return the wait decision to commit. Raises StatesRuntimeError
    (Unum.RetentionExpired) when the timer would fire after the workflow may still run."""
    until = timers.now() + seconds
    if until > timers.latest:
        raise StatesRuntimeError("Unum.RetentionExpired", f"the {'Wait' if purpose == 'wait' else 'Retry'} of state "
                                 f"{state!r} ends {seconds:.0f} s from now, after the workflow's retention ends; "
                                 "a longer wait needs a longer store TTL (unum_entry.retention)")
    wait = {"timer": purpose, "state": state, "transfer": dict(transfer), "until": until, "ran": ran_task,
            "retries": list(retries or [])}
    invocation = _invocation(timers)
    timers.arm(until, _event(purpose, invocation, 0), name=timers.name(purpose, invocation, 0))
    return {"__next__": WAIT, "wait": wait}


def arm_task_timers(timers: Timers, wait: dict[str, Any], *, timeout: float | None, heartbeat: float | None,
                    scale: float) -> None:
    """A waiting Task's decision `wait` (callbacks.wait_decision, updated in place): stamp when it
    times out and how often it must beat (store clock, scaled), and arm a timer for each."""
    now = timers.now()
    wait["issued"] = now
    invocation = _invocation(timers)
    if timeout is not None:
        wait["timeout_at"] = now + timeout * scale
        timers.arm(wait["timeout_at"], _event("timeout", invocation, 0), name=timers.name("timeout", invocation, 0))
    if heartbeat is not None:
        wait["heartbeat"] = heartbeat
        wait["heartbeat_span"] = heartbeat * scale
        first = now + heartbeat * scale
        timers.arm(first, _event("heartbeat", invocation, 0), name=timers.name("heartbeat", invocation, 0))


@dataclass(frozen=True, slots=True)
class Fired:
    """What a due timer continues with: a timer wait (`wait`) or a Task's resume event (`resume`,
    the callback record's: the callback's outcome or the timer's own timeout)."""

    wait: Mapping[str, Any] | None = None
    resume: Mapping[str, Any] | None = None


def fired(timers: Timers, timer: Mapping[str, Any]) -> Fired:
    """A timer was delivered (this invocation is its continuation). Returns what to continue with;
    raises TimerNotDue after re-arming when it is early (or its wait is not committed yet)."""
    from unum_entry.asl import callbacks
    from unum_entry.codec import decode
    from unum_entry.outcome import Ending

    purpose, waiting, rounds = str(timer["purpose"]), str(timer["waiting"]), int(timer.get("round", 0))
    ending = Ending.of(timers.workflow)
    found = timers.read([waiting])
    record = found.get(waiting)
    decision = decode(record.value) if record is not None and record.value is not None else None
    wait = decision.get("wait") if isinstance(decision, Mapping) and decision.get("__next__") == WAIT else None
    now = timers.now()
    if record is None or record.value is None:
        if ending.reached(timers.read(ending.keys)):
            raise TimerAfterEnding(f"timer {purpose} of {waiting}: the workflow has ended")
        # Armed by an execution that had not committed its wait yet: look again shortly.
        _rearm(timers, purpose, waiting, rounds, now + min(UNCOMMITTED_BACKOFF * 2 ** rounds, MAX_BACKOFF))
    if not isinstance(wait, Mapping) or not _FIELDS[purpose].issubset(wait):
        # The commit that won is not this timer's wait (an execution that armed it lost to one
        # that decided otherwise, e.g. a SecondsPath read differently): nothing to do.
        raise TimerNotDue(f"timer {purpose} of {waiting}: the committed decision does not wait for it")
    if purpose in ("wait", "retry"):
        if now < float(wait["until"]):
            _rearm(timers, purpose, waiting, rounds, float(wait["until"]))
        return Fired(wait=wait)
    token = callbacks.Token.parse(str(wait["token"]))
    resume = callbacks.recorded(timers.store, token)
    if resume is not None:  # a callback (or the other timer) won: continue with its outcome
        return Fired(resume=resume)
    if purpose == "timeout":
        if now < float(wait["timeout_at"]):
            _rearm(timers, purpose, waiting, rounds, float(wait["timeout_at"]))
        outcome = {"error": "States.Timeout", "cause": f"the task timed out after {wait['timeout']:g} seconds "
                                                       "before its callback"}
    else:
        due = callbacks.heartbeat_due(timers.store, token, wait, now)
        if now < due:
            _rearm(timers, purpose, waiting, rounds, due)
        outcome = {"error": "States.HeartbeatTimeout",
                   "cause": f"no heartbeat for {wait['heartbeat']:g} seconds (HeartbeatSeconds)"}
    expires_at = record.expires_at if record is not None else 0
    return Fired(resume=callbacks.record_outcome(timers.store, token, wait, expires_at, outcome))


def nested_due(timers: Timers, timer: Mapping[str, Any]) -> Mapping[str, Any]:
    """The TimeoutSeconds timer of a nested `.sync` Task, delivered to the Task's join (the
    invocation the child's end fans in to): the fan-out decision the Task's function committed
    (its `parent` holds `timeout_at`) once the timeout is due. Raises TimerNotDue after re-arming
    when early (or the fan-out is not committed yet), and when the committed fan-out has no
    timeout. The join's first commit wins: the child's end or this timeout, never both."""
    from unum_entry.codec import decode
    from unum_entry.outcome import Ending

    purpose, waiting, rounds = str(timer["purpose"]), str(timer["waiting"]), int(timer.get("round", 0))
    record = timers.read([waiting]).get(waiting)
    now = timers.now()
    if record is None or record.value is None:
        ending = Ending.of(timers.workflow)
        if ending.reached(timers.read(ending.keys)):
            raise TimerAfterEnding(f"timer {purpose} of {waiting}: the workflow has ended")
        _rearm(timers, purpose, waiting, rounds, now + min(UNCOMMITTED_BACKOFF * 2 ** rounds, MAX_BACKOFF))
    decision = decode(record.value)
    fan = decision.get("fanout") if isinstance(decision, Mapping) else None
    parent = fan.get("parent") if isinstance(fan, Mapping) else None
    if not isinstance(parent, Mapping) or "timeout_at" not in parent:
        raise TimerNotDue(f"timer {purpose} of {waiting}: the committed decision does not wait for it")
    if now < float(parent["timeout_at"]):
        _rearm(timers, purpose, waiting, rounds, float(parent["timeout_at"]))
    return decision


def arm_nested_timeout(timers: Timers, join: str, seconds: float) -> float:
    """Arm the TimeoutSeconds timer (real seconds, scaled) of a nested `.sync` Task whose
    fan-out this invocation is about to commit; it is delivered to `join` at the invocation the
    child's end fans in to. Returns when it is due (store clock)."""
    at = timers.now() + seconds
    invocation = _invocation(timers)
    timers.arm(at, _event(NESTED_TIMEOUT, invocation, 0), name=timers.name(NESTED_TIMEOUT, invocation, 0),
               function=join)
    return at


NESTED_TIMEOUT = "nested-timeout"
_FIELDS = {"wait": {"timer", "until"}, "retry": {"timer", "until"}, "timeout": {"token", "timeout_at"},
           "heartbeat": {"token", "heartbeat_span", "issued"}}


def _rearm(timers: Timers, purpose: str, waiting: str, rounds: int, when: float) -> NoReturn:
    """Arm the next round of an early timer at this same invocation, then drop this delivery."""
    timers.arm(when, _event(purpose, waiting, rounds + 1), name=timers.name(purpose, waiting, rounds + 1), here=True)
    raise TimerNotDue(f"timer {purpose} of {waiting} (round {rounds}) delivered early: re-armed for {when:.3f}")


def _event(purpose: str, waiting: str, rounds: int) -> dict[str, Any]:
    return {TIMER: {"purpose": purpose, "waiting": waiting, "round": rounds}}


def _invocation(timers: Timers) -> str:
    """The checkpoint name of the invocation running now (the one that commits the wait)."""
    from unum_entry import naming
    return naming.checkpoint_key(timers.workflow, timers.function, timers.envelope.frames)
