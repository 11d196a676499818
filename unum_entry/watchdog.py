"""The deadline watchdog: no workflow stays "running" past its deadline, whatever was lost.

- **Armed** (`Watchdog.arm`) by the entry function's runtime on every delivery that starts a
  workflow (the one that sets its deadline, unum_entry.retention), before the handler runs: one
  durable timer (`Invoker.invoke_at`) at `fires_at(deadline)` = `deadline - margin`, named
  `naming.timer_name(workflow, "watchdog")`, so every duplicate of the start arms the same timer.
  Its delivery is an envelope with `watchdog: true` to the entry function; `Runtime.handle`
  passes it here before anything else (`Watchdog.fire`). Arming that fails (InvokeError) fails
  the start delivery, which the platform redelivers: a workflow never runs without its watchdog.
- **Fires** (`Watchdog.fire`), absorbing what a scheduler may do (twice, early, late):
  - early (an execution may still legally start: `Retention.check` passes): re-arm at
    `fires_at(deadline)` under the next name (`timer_name(workflow, "watchdog", n)`: a scheduler
    may still hold the firing timer's own name) and stop;
  - the workflow has ended (`outcome.Ending`), or its results cover every fan-out position
    (per-branch results, no root-level record): nothing;
  - later than the deadline itself: nothing but a log line (objects may have expired by then,
    so success and a stall can no longer be told apart: recording a failure could turn a
    succeeded workflow into a failed one);
  - otherwise: the failure `Unum.RetentionExpired` is recorded (`outcome.create_failure`: the
    first failure wins, and none is written once a claim or a root result exists), marked `"Watchdog": true`, naming what was pending (`pending_of`: Tasks
    waiting for their callback, joins not complete, how many checkpoints were committed). It
    starts no compensation: a branch that started before `deadline - margin` may still commit
    a result after the record (below), and compensating a workflow that then succeeds would
    undo its effects.
- **Which wins, the watchdog or the last commit**: a result seen by the watchdog's read wins (it
  records nothing). If the last result lands after that read, the store holds both; the rule is
  then that results covering every position win over a watchdog failure
  (`outcome.read_outcome` reports SUCCEEDED and no failure). Any other failure record (a
  handler that failed, a Fail state) still wins over results, as before.
- **Execution timeout** (an entry function whose IR has `timeout_seconds`: a state machine's
  top-level `TimeoutSeconds`): `arm` also arms a second timer at `start + timeout_seconds`
  (times `UNUM_ASL_TIME_SCALE`, as every ASL time; the failure's cause names the unscaled seconds)
  (`timer_name(workflow, "execution-timeout")`, its input `{"timeout": seconds, "at": when}`).
  Fired and due, unless the workflow has ended or its results cover every position, it ends the
  workflow `timed out` with `States.Timeout` through `outcome.end_workflow` (the failure record,
  marked `TimedOut`, after claiming the root result record: a result written afterwards is
  refused, a result written before wins; unlike the deadline watchdog's, this failure does not
  yield to results). Early: re-armed under the next name. In-flight invocations then drain
  as after a stop (docs/history.md). One more timer per workflow, only where it is set. A
  machine a durable function's `context.invoke` started (its caller's deadline: no watchdog of
  its own) arms this timer alone at its start, and its firing fails the caller's invoke
  (`Runtime`, unum_entry.durable_functions.chained).
- **After a redrive** (`Rearm`, `Watchdog.arm_redriven`: unum_entry.redrive calls it after it
  cleared the failure record, before it sends anything): redrive n arms both timers again under
  names of its own (`timer_name(workflow, purpose, "redrive", n, rearms)`, their input carrying
  `"redrive": n`), the execution timeout counted from the redrive (`now + TimeoutSeconds`), the
  deadline watchdog at the same `fires_at(deadline)`: the runner drops a workflow's timers when it
  ends (builder.commands.run), so a redriven run would otherwise have neither. An execution-timeout
  timer armed before redrive n+1 (the start's, or redrive n's) finds that redrive's claim
  (`naming.redrive_key`) and does nothing ("superseded"): a redriven run is timed out by its own
  timer only, at most once - also when a failure and the whole next redrive land between its read
  and its claim of the result record: that claim (`end_workflow(absent=...)`) requires the next
  redrive's claim absent in the same transaction.
- **Cost**: one timer per workflow (arming is idempotent by name; each duplicate of the start
  re-sends it), and at its firing one batch read of the two ending records plus, when the
  workflow has not ended, one scan of its objects. `RuntimeConfig(watchdog=False)` (workflow
  json `"watchdog": false`; `UNUM_WATCHDOG=0` in a function image) turns it off; an invoker
  without a scheduler (no `invoke_at`, or `TimersUnavailable`) cannot arm it (logged once).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from unum_entry import naming
from unum_entry.codec import decode, encode
from unum_entry.envelope import DataRef, Envelope
from unum_entry.errors import RetentionExpired, TimersUnavailable
from unum_entry.ir import time_scale as ir_time_scale
from unum_entry.outcome import (TIMEOUT_FIELD, WATCHDOG_FIELD, Ending, covers_every_position, create_failure, end_workflow,
                                failure_record)
from unum_entry.retention import Ledger, Retention
from unum_entry.stores.base import Kind, Record, Store

if TYPE_CHECKING:
    from unum_entry.workflow import Workflow

log = logging.getLogger("unum.watchdog")

PURPOSE = "watchdog"
TIMEOUT_PURPOSE = "execution-timeout"
LISTED = 10  # at most this many waiting tasks and incomplete joins are named in the failure record


def fires_at(retention: Retention, deadline: int) -> int:
    """When the watchdog of a workflow with `deadline` fires: the moment `Retention.check`
    stops letting executions start (`deadline - margin`, the margin at most half the TTL)."""
    return deadline - min(retention.margin_seconds, retention.ttl_seconds // 2)


def timer_of(workflow: str, rearms: int, redrive: int | None = None) -> str:
    """The timer's name: the first arming's, then one per re-arm (`rearms` = 1, 2, ...); those
    redrive number `redrive` armed have names of their own (module docstring)."""
    if redrive is not None:
        return naming.timer_name(workflow, PURPOSE, "redrive", redrive, rearms)
    return naming.timer_name(workflow, PURPOSE) if rearms == 0 else naming.timer_name(workflow, PURPOSE, rearms)


def timeout_timer_of(workflow: str, rearms: int, redrive: int | None = None) -> str:
    """The execution-timeout timer's name, as `timer_of` names the watchdog's."""
    if redrive is not None:
        return naming.timer_name(workflow, TIMEOUT_PURPOSE, "redrive", redrive, rearms)
    return naming.timer_name(workflow, TIMEOUT_PURPOSE, rearms)


@dataclass(frozen=True, slots=True)
class Rearm:
    """What a redrive re-arms (module docstring, "After a redrive"): the timers of the workflow's
    entry function `function` (whose runtime handles them), the deadline watchdog unless
    `watchdog` is False, the execution timeout when `timeout_seconds` is set (times
    `time_scale`, None: `UNUM_ASL_TIME_SCALE`)."""

    function: str
    timeout_seconds: float | None = None
    watchdog: bool = True
    time_scale: float | None = None

    @classmethod
    def of(cls, workflow: Workflow) -> Rearm:
        """The timers a loaded workflow's entry arms at its start."""
        entry = workflow.functions[workflow.entry].ir
        return cls(workflow.entry, timeout_seconds=entry.timeout_seconds, watchdog=workflow.watchdog)


class Watchdog:
    """The watchdog of the workflows whose entry function is `function` (module docstring)."""

    def __init__(self, function: str, store: Store, invoker: Any, retention: Retention, *,
                 enabled: bool = True, timeout_seconds: float | None = None,
                 time_scale: float | None = None) -> None:
        self.function = function
        self.timeout_seconds = timeout_seconds  # the execution timeout (module docstring), None: none
        if time_scale is None and timeout_seconds is not None:  # it scales as a machine's Waits and Retries do
            time_scale = ir_time_scale()
        self.time_scale = 1.0 if time_scale is None else time_scale  # multiplies timeout_seconds
        self.store = store
        self.retention = retention
        self._invoke_at = getattr(invoker, "invoke_at", None)
        self.enabled = enabled and self._invoke_at is not None
        if enabled and self._invoke_at is None:
            log.warning("%s: the invoker %s has no invoke_at: workflows started here run without a deadline "
                        "watchdog", function, type(invoker).__name__)

    def arm(self, env: Envelope, *, watchdog: bool = True) -> None:
        """Arm the watchdog of the workflow `env` starts (its deadline set), and its execution
        timeout if any (`watchdog=False`: that alone). Raises InvokeError when the platform's
        scheduler refused (the start is then redelivered)."""
        if self.enabled and watchdog:
            try:
                self._schedule(env.workflow, env.deadline, 0)
            except TimersUnavailable as exc:  # an invoker without a scheduler configured: as without invoke_at
                self.enabled = False
                log.warning("%s: %s: workflows started here run without a deadline watchdog", self.function, exc)
        if self.timeout_seconds is not None:
            try:
                if self._invoke_at is None:
                    raise TimersUnavailable("the invoker has no invoke_at")
                seconds = self.timeout_seconds
                self._schedule_timeout(env.workflow, env.deadline, seconds,
                                       self.retention.clock() + seconds * self.time_scale, 0)
            except TimersUnavailable as exc:  # as the watchdog: the workflow runs, unbounded but by its deadline
                log.warning("%s: %s: workflow %s runs without its execution timeout (TimeoutSeconds)",
                            self.function, exc, env.workflow)

    def arm_redriven(self, workflow: str, deadline: int, redrive: int) -> None:
        """Arm the timers of redrive number `redrive` of `workflow` (module docstring, "After a
        redrive"): the execution timeout from now, the watchdog at its deadline's. Raises
        InvokeError when the scheduler refused (nothing was sent yet: the redrive is continued
        by the next one, unum_entry.redrive)."""
        if self.enabled:
            try:
                self._schedule(workflow, deadline, 0, redrive)
            except TimersUnavailable as exc:
                log.warning("%s: %s: redriven workflow %s runs without a deadline watchdog", self.function, exc,
                            workflow)
        if self.timeout_seconds is not None and self._invoke_at is not None:
            seconds = self.timeout_seconds
            try:
                self._schedule_timeout(workflow, deadline, seconds, self.retention.clock() + seconds * self.time_scale,
                                       0, redrive)
            except TimersUnavailable as exc:
                log.warning("%s: %s: redriven workflow %s runs without its execution timeout (TimeoutSeconds)",
                            self.function, exc, workflow)

    def fire(self, env: Envelope) -> str:
        """Handle one delivery of the watchdog timer `env`; returns what it did: "early",
        "late", "ended", "succeeded", "superseded" (an execution timeout a later redrive armed
        again) or "recorded" (logs and tests). Raises StoreError / InvokeError on transient
        trouble (the platform redelivers the timer)."""
        timer = env.inputs[0].value if env.inputs and env.inputs[0].inline else None
        if isinstance(timer, dict) and "timeout" in timer:
            return self._time_out(env, timer)
        redrive = _redrive_of(timer)
        workflow, deadline = env.workflow, env.deadline
        now = self.retention.clock()
        try:
            self.retention.check(workflow, deadline)
        except RetentionExpired:
            pass
        else:
            if fires_at(self.retention, deadline) > now:
                self._schedule(workflow, deadline, env.attempt + 1, redrive)
                return "early"
        if now >= deadline:
            log.warning("workflow %s: its watchdog fired %d s after the deadline; objects may have expired, so "
                        "nothing is recorded", workflow, int(now - deadline))
            return "late"
        over, records = self._over(workflow)
        if over:
            return over
        pending = pending_of(records, workflow)
        record = failure_record("Unum.RetentionExpired", _cause(workflow, deadline, pending), function=self.function,
                                invocation=timer_of(workflow, env.attempt, redrive), attempts=env.attempt + 1)
        record.update({WATCHDOG_FIELD: True, "Pending": pending})
        ledger = Ledger(workflow, deadline, self.retention)
        if not create_failure(self.store, ledger, encode(record)):
            return "ended"  # another failure, a claim or a root result (or a copy of this timer) came first
        log.error("workflow %s: no outcome by its deadline: %s", workflow, record["Cause"])
        return "recorded"

    def _time_out(self, env: Envelope, timer: dict[str, Any]) -> str:
        """One delivery of the execution-timeout timer (module docstring): "early", "ended",
        "succeeded" or "recorded"."""
        workflow, due, seconds = env.workflow, float(timer["at"]), timer["timeout"]
        redrive = _redrive_of(timer)
        if self.retention.clock() < due:
            self._schedule_timeout(workflow, env.deadline, seconds, due, env.attempt + 1, redrive)
            return "early"
        # the claim of the next redrive (its own timer counts from it), read with the endings
        later = naming.redrive_key(workflow, (-1 if redrive is None else redrive) + 1)
        over, _ = self._over(workflow, later)
        if over:
            return over
        record = failure_record("States.Timeout", f"the execution timed out: its TimeoutSeconds ({seconds:g} s) "
                                f"elapsed", function=self.function,
                                invocation=timeout_timer_of(workflow, env.attempt, redrive),
                                attempts=env.attempt + 1)
        record[TIMEOUT_FIELD] = True
        if not end_workflow(self.store, workflow, record, absent=(later,)):
            return "ended"
        log.info("workflow %s: %s", workflow, record["Cause"])
        return "recorded"

    def _over(self, workflow: str, later: str | None = None) -> tuple[str | None, list[Record]]:
        """Whether `workflow` is over for a timer: "ended" (an ending record), "superseded" (the
        record `later`, a later redrive's claim, exists; read in the same batch), "succeeded"
        (its results cover every position) or None, with its records when they were listed."""
        ending = Ending.of(workflow)
        found = self.store.read((*ending.keys, later) if later is not None else ending.keys)
        if ending.reached(found):
            return "ended", []
        if later is not None and later in found:
            return "superseded", []
        records = list(self.store.records(workflow))
        results = [decode(r.value) for r in records if r.kind is Kind.RESULT and r.value is not None]
        return ("succeeded" if covers_every_position(results) else None), records

    def _schedule_timeout(self, workflow: str, deadline: int, seconds: float, due: float, rearms: int,
                          redrive: int | None = None) -> None:
        if self._invoke_at is None:
            return
        value: dict[str, Any] = {"timeout": seconds, "at": due}
        if redrive is not None:
            value["redrive"] = redrive
        timer = Envelope(workflow=workflow, inputs=(DataRef(value=value),), deadline=deadline, attempt=rearms,
                         watchdog=True)
        self._invoke_at(due, self.function, timer.to_wire(), name=timeout_timer_of(workflow, rearms, redrive))

    def _schedule(self, workflow: str, deadline: int, rearms: int, redrive: int | None = None) -> None:
        if self._invoke_at is None:  # not `enabled`: nothing to arm with
            return
        timer = Envelope(workflow=workflow, inputs=(DataRef(value=None if redrive is None else {"redrive": redrive}),),
                         deadline=deadline, attempt=rearms, watchdog=True)
        self._invoke_at(fires_at(self.retention, deadline), self.function, timer.to_wire(),
                        name=timer_of(workflow, rearms, redrive))


def _redrive_of(timer: Any) -> int | None:
    """The redrive number a timer's input names (None: armed at the workflow's start)."""
    number = timer.get("redrive") if isinstance(timer, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def pending_of(records: Iterable[Record], workflow: str) -> dict[str, Any]:
    """What a workflow that has not ended was still waiting for, as far as one scan of its
    objects tells: `Waiting` (Tasks waiting for their task-token callback: state, function,
    token), `Joins` (fan-in set shards not full: key, members, size), `Checkpoints` (how many
    invocations committed). At most LISTED entries of each list."""
    from unum_entry import task_tokens  # lazy: the task-token rules, only needed when a workflow stalled

    records = list(records)
    waiting = task_tokens.waiting(_Snapshot(records), workflow)
    joins = []
    for r in records:
        if r.kind is Kind.SET and r.size is not None:
            joined = sum(1 for slot in r.members if slot < r.size)  # not a claim slot (stores.dynamodb)
            if joined < r.size:
                joins.append({"Set": r.key, "Joined": joined, "Of": r.size})
    return {
        "Waiting": [{"State": w.state, "Function": w.function, "Token": w.token} for w in waiting[:LISTED]],
        "Joins": joins[:LISTED],
        "Checkpoints": sum(1 for r in records if r.kind is Kind.CHECKPOINT),
    }


def _cause(workflow: str, deadline: int, pending: dict[str, Any]) -> str:
    parts = []
    if pending["Waiting"]:
        states = ", ".join(sorted({str(w["State"]) for w in pending["Waiting"]}))
        parts.append(f"{len(pending['Waiting'])} task(s) waiting for a callback (state {states})")
    if pending["Joins"]:
        parts.append(f"{len(pending['Joins'])} fan-in join(s) incomplete")
    parts.append(f"{pending['Checkpoints']} invocation(s) committed")
    return (f"workflow {workflow} has no outcome by its deadline {deadline} (less the margin in which no "
            f"execution may start): {'; '.join(parts)}")


class _Snapshot:
    """Records already read, served as a store's `records(workflow)` (task_tokens.waiting reads
    nothing else), so the watchdog scans the workflow once."""

    def __init__(self, records: list[Record]) -> None:
        self._records = records

    def records(self, workflow: str | None = None) -> Iterator[Record]:
        return iter(self._records)
