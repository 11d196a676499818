"""Fault schedules of the deadline watchdog and of timers (unum_entry.watchdog), run on the
embedded local platform over any store: a short TTL (the watchdog fires `TTL - margin` seconds
after the start, the margin being half the TTL), deterministic faults, bounded waits.

Each schedule is a function `(store_factory, tmp_path) -> None` that asserts; the store factory
makes a store over the same backend with a given TTL (`make(ttl_seconds)`). The integration
tests run them on the file store and DynamoDB (tests/integration/test_watchdog.py) and on
Firestore (tests/integration/gcp/test_watchdog_firestore.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from unum_entry import naming
from unum_entry.envelope import ROOT
from unum_entry.errors import InvokeError
from unum_entry.local.faults import FaultInjector, FaultRates, InjectedCrash
from unum_entry.local.platform import LocalPlatform
from unum_entry.outcome import RunResult, WorkflowStatus, read_outcome
from unum_entry.stores.base import Store
from unum_entry.workflow import WORKFLOW_FILE_NAME, FunctionSource, Workflow, load_workflow, write_workflow

TTL = 4            # seconds: the watchdog fires 2 s after the start
WAIT = 30.0        # seconds: the longest any schedule waits for an outcome
MakeStore = Callable[[int], Store]

IDENTITY = "def handler(event, ctx):\n    return event\n"


def chain(folder: Path, *, last: str = IDENTITY, watchdog: bool | None = None) -> Workflow:
    """A -> B -> C; C's code is `last`."""
    wf = write_workflow(folder, name="chain", entry="A", functions={
        "A": FunctionSource(IDENTITY, [{"op": "invoke", "function": "B"}]),
        "B": FunctionSource(IDENTITY, [{"op": "invoke", "function": "C"}]),
        "C": FunctionSource(last),
    })
    if watchdog is not None:  # the manifest's switch, as a user writes it
        manifest = folder / WORKFLOW_FILE_NAME
        manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "watchdog": watchdog}))
        wf = load_workflow(folder)
    return wf


def mapped(folder: Path, *, branch: str = IDENTITY) -> Workflow:
    """A maps over its input list to B; every B is terminal (per-branch results, no root result)."""
    return write_workflow(folder, name="mapped", entry="A", functions={
        "A": FunctionSource(IDENTITY, [{"op": "map", "function": "B"}]),
        "B": FunctionSource(branch),
    })


def wait_for_outcome(store: Store, workflow: str, done: Callable[[RunResult], bool] | None = None,
                     timeout: float = WAIT) -> RunResult:
    """Poll `read_outcome` until `done` (default: the workflow ended) or `timeout` (asserts)."""
    done = done or (lambda o: o.status in (WorkflowStatus.FAILED, WorkflowStatus.TIMED_OUT, WorkflowStatus.SUCCEEDED))
    stop = time.monotonic() + timeout
    while True:
        outcome = read_outcome(store, workflow)
        if done(outcome):
            return outcome
        assert time.monotonic() < stop, f"workflow {workflow}: {outcome.status} after {timeout} s ({outcome})"
        time.sleep(0.1)


def assert_watchdog_failure(outcome: RunResult, *, checkpoints: int) -> None:
    failure = outcome.failure
    assert outcome.status is WorkflowStatus.TIMED_OUT, outcome  # the watchdog's failure: README's `timed out`
    assert failure is not None and failure["Error"] == "Unum.RetentionExpired" and failure["Watchdog"] is True
    assert failure["Function"] == "A" and failure["Pending"]["Checkpoints"] == checkpoints, failure


# ---- platforms with a misbehaving scheduler or a lost delivery ---------------------------------

class _CrashIn(FaultInjector):
    """No random faults; every execution of `function` (of workflow `workflow`) dies before its
    handler, forever (the platform redelivers it, it dies again)."""

    def __init__(self, workflow: str, function: str) -> None:
        super().__init__(FaultRates(), seed=0)
        self.invocation = naming.checkpoint_key(workflow, function, ROOT)
        self.crashes = 0

    def at(self, point: Any, invocation: str) -> None:
        if invocation == self.invocation:
            self.crashes += 1
            raise InjectedCrash(point, invocation)


class TimerPlatform(LocalPlatform):
    """A local platform whose scheduler misbehaves as told: `refuse` first arms fail with
    InvokeError; `shift` moves the first timer armed (negative: early, positive: late); `copies`
    delivers each timer that many times; `lose` drops every invoke of that function (a lost
    delivery). `fired` records what each watchdog delivery did, with the store clock's time."""

    def __init__(self, *args: Any, refuse: int = 0, shift: float = 0.0, copies: int = 1, lose: str | None = None,
                 **kwargs: Any) -> None:
        self.refuse, self.shift, self.copies, self.lose = refuse, shift, copies, lose
        self.armed: list[tuple[float, str]] = []
        self.fired: list[tuple[float, str]] = []
        self.refused = 0
        super().__init__(*args, **kwargs)

    def submit_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        if self.refused < self.refuse:
            self.refused += 1
            raise InvokeError(f"scheduler unavailable (injected, {self.refused} of {self.refuse})")
        shift = self.shift if not self.armed else 0.0
        self.armed.append((when, name))
        super().submit_at(when + shift, function, payload, name=name)
        for _ in range(self.copies - 1):  # the scheduler delivers it again: an ordinary delivery, due then too
            super().submit(function, payload, delay=max(0.0, when + shift - self.store._clock()))

    def submit(self, function: str, payload: dict[str, Any], *, delay: float = 0.0) -> None:
        if function != self.lose:
            super().submit(function, payload, delay=delay)


def _platform(wf: Workflow, store: Store, **kwargs: Any) -> TimerPlatform:
    platform = TimerPlatform(wf, store, workers=4, retry_delay=0.02, max_backoff=0.2, max_redeliveries=100_000,
                             **kwargs)
    watchdog = platform.runtimes[wf.entry].watchdog
    fire = watchdog.fire
    platform.fired = []

    def recording(env: Any) -> str:
        did = fire(env)
        platform.fired.append((store._clock(), did))
        return did

    watchdog.fire = recording  # type: ignore[method-assign]
    return platform


# ---- the schedules -------------------------------------------------------------------------------

def crashed_forever(make: MakeStore, tmp: Path) -> None:
    """B dies before its handler on every delivery, redelivered every 20 ms: the workflow ends
    in `Unum.RetentionExpired` at `deadline - margin` — recorded by the watchdog, or by B's
    redelivery that reaches the retention check first (both are the same rule); the other then
    finds the workflow ended. The platform goes idle: B's next redelivery is dropped. (TTL x 2:
    B must have crashed at least once before `deadline - margin`, also on a cold emulator.)"""
    store = make(2 * TTL)
    workflow = "wf-crashed-forever"
    faults = _CrashIn(workflow, "B")
    with _platform(chain(tmp / "wf"), store, faults=faults) as platform:
        platform.start({"x": 1}, workflow)
        outcome = wait_for_outcome(store, workflow)
        assert outcome.failure is not None and outcome.failure["Error"] == "Unum.RetentionExpired", outcome.failure
        by_watchdog = outcome.failure.get("Watchdog") is True  # else the runtime's own deadline check recorded it
        assert outcome.status is (WorkflowStatus.TIMED_OUT if by_watchdog else WorkflowStatus.FAILED), outcome
        _wait_fired(platform, 1)
        assert [did for _, did in platform.fired] == ["recorded" if outcome.failure.get("Watchdog") else "ended"]
        platform.wait_idle(WAIT)
        assert faults.crashes >= 1 and not platform.dead_letters, (faults.crashes, platform.dead_letters)


def lost_delivery(make: MakeStore, tmp: Path) -> None:
    """C's invoke is lost (a killed host): `run` does not wait for the watchdog's timer (7 days
    in production), and the watchdog records the failure when it fires."""
    store = make(TTL)
    with _platform(chain(tmp / "wf"), store, lose="C") as platform:
        started = time.monotonic()
        result = platform.run({"x": 1}, workflow_id="wf-lost", timeout=WAIT)
        assert result.status is WorkflowStatus.RUNNING and time.monotonic() - started < TTL / 2
        assert_watchdog_failure(wait_for_outcome(store, "wf-lost"), checkpoints=2)


def no_watchdog_when_turned_off(make: MakeStore, tmp: Path) -> None:
    """`"watchdog": false` in the manifest: nothing is armed, a stalled workflow stays running."""
    store = make(TTL)
    with _platform(chain(tmp / "wf", watchdog=False), store, lose="C") as platform:
        platform.run({"x": 1}, workflow_id="wf-off", timeout=WAIT)
        assert platform.armed == []
        time.sleep(TTL / 2 + 0.5)
        assert read_outcome(store, "wf-off").status is WorkflowStatus.RUNNING


def timers_fire_twice(make: MakeStore, tmp: Path) -> None:
    """Every timer delivered twice, for a stalled and a finished workflow: one failure record
    for the first (the second copy finds it ended), nothing for the second."""
    store = make(TTL)
    with _platform(chain(tmp / "wf"), store, copies=2, lose="C") as platform:
        platform.run(1, workflow_id="wf-twice-stalled", timeout=WAIT)
        assert_watchdog_failure(wait_for_outcome(store, "wf-twice-stalled"), checkpoints=2)
        _wait_fired(platform, 2)
        assert sorted(did for _, did in platform.fired) == ["ended", "recorded"]
    with _platform(chain(tmp / "wf2"), store, copies=2) as platform:
        assert platform.run(2, workflow_id="wf-twice-ok", timeout=WAIT).result == 2
        _wait_fired(platform, 2)
        assert [did for _, did in platform.fired] == ["ended", "ended"] and len(platform.armed) == 1
        assert read_outcome(store, "wf-twice-ok").status is WorkflowStatus.SUCCEEDED


def timers_fire_early(make: MakeStore, tmp: Path) -> None:
    """The watchdog's timer fires 1.5 s early: that firing re-arms under the next name and
    records nothing; the re-armed timer records the failure, not before `deadline - margin`."""
    store = make(TTL)
    with _platform(chain(tmp / "wf"), store, shift=-1.5, lose="C") as platform:
        platform.run(1, workflow_id="wf-early", timeout=WAIT)
        assert_watchdog_failure(wait_for_outcome(store, "wf-early"), checkpoints=2)
        _wait_fired(platform, 2)  # the outcome is written inside `fire`, before it returns
        (due, first), (_, second) = platform.armed[:2]
        assert first == naming.timer_name("wf-early", "watchdog") and second == naming.timer_name("wf-early", "watchdog", 1)
        assert [did for _, did in platform.fired] == ["early", "recorded"]
        assert platform.fired[0][0] < due <= platform.fired[1][0]


def timers_fire_late(make: MakeStore, tmp: Path) -> None:
    """A timer late by less than the margin still records the failure; one late past the
    deadline itself records nothing (what was retained may have expired: documented)."""
    store = make(TTL)
    with _platform(chain(tmp / "wf"), store, shift=1.0, lose="C") as platform:
        platform.run(1, workflow_id="wf-late", timeout=WAIT)
        assert_watchdog_failure(wait_for_outcome(store, "wf-late"), checkpoints=2)
        _wait_fired(platform, 1)  # the outcome is written inside `fire`, before it returns
        assert [did for _, did in platform.fired] == ["recorded"]
    with _platform(chain(tmp / "wf2"), store, shift=TTL / 2 + 1.0, lose="C") as platform:
        platform.run(1, workflow_id="wf-too-late", timeout=WAIT)
        _wait_fired(platform, 1)
        assert [did for _, did in platform.fired] == ["late"]
        assert read_outcome(store, "wf-too-late").failure is None


def scheduler_unavailable(make: MakeStore, tmp: Path) -> None:
    """The scheduler refuses the first 3 arms: the start is redelivered (not lost) until the
    watchdog is armed, then the workflow runs; a stalled one is still caught by it."""
    store = make(TTL)
    with _platform(chain(tmp / "wf"), store, refuse=3) as platform:
        assert platform.run(5, workflow_id="wf-unavailable", timeout=WAIT).result == 5
        assert platform.refused == 3 and len(platform.armed) == 1 and platform.stats["redeliveries"] >= 3
    with _platform(chain(tmp / "wf2"), store, refuse=2, lose="C") as platform:
        platform.run(5, workflow_id="wf-unavailable-stalled", timeout=WAIT)
        assert_watchdog_failure(wait_for_outcome(store, "wf-unavailable-stalled"), checkpoints=2)


HELD_BRANCH = """\
import os
import time

GATE = {gate!r}


def handler(event, ctx):
    if event == 1:  # held until the watchdog has fired (at most 20 s)
        stop = time.monotonic() + 20
        while not os.path.exists(GATE) and time.monotonic() < stop:
            time.sleep(0.02)
    return event
"""


def watchdog_before_the_last_commit(make: MakeStore, tmp: Path) -> None:
    """A map whose branches are all results (no root-level record): branch 1 started before
    `deadline - margin` and commits its result only after the watchdog recorded the failure.
    Both records exist; the results cover every position, so the workflow SUCCEEDED (the
    watchdog's failure yields) and `read_outcome` shows no failure."""
    store = make(TTL)
    gate = tmp / "gate"
    with _platform(mapped(tmp / "wf", branch=HELD_BRANCH.format(gate=str(gate))), store) as platform:
        watchdog = platform.runtimes["A"].watchdog
        fire = watchdog.fire

        def fire_then_open(env: Any) -> str:
            did = fire(env)
            gate.write_text(did)  # the held branch commits only now
            return did

        watchdog.fire = fire_then_open  # type: ignore[method-assign]
        platform.start([0, 1], "wf-race-1")
        outcome = wait_for_outcome(store, "wf-race-1", lambda o: len(o.results) == 2)
        assert gate.read_text() == "recorded"
        assert store.get(naming.failure_key("wf-race-1")) is not None
        assert outcome.status is WorkflowStatus.SUCCEEDED and outcome.failure is None and outcome.results == [0, 1]


def last_commit_before_the_watchdog(make: MakeStore, tmp: Path) -> None:
    """The other order: every branch result is in before the watchdog fires; it reads them,
    sees every position covered and records nothing."""
    store = make(TTL)
    with _platform(mapped(tmp / "wf"), store) as platform:
        assert platform.run([0, 1, 2], workflow_id="wf-race-2", timeout=WAIT).results == [0, 1, 2]
        _wait_fired(platform, 1)
        assert [did for _, did in platform.fired] == ["succeeded"]
        assert store.get(naming.failure_key("wf-race-2")) is None


ASK = """\
import os


def handler(event, context):
    with open(os.path.join({folder!r}, "token"), "w") as f:
        f.write(event["token"])
    return {{"sent": True}}
"""


def task_never_called_back(make: MakeStore, tmp: Path) -> None:
    """A `.waitForTaskToken` Task whose callback never comes (its token goes to a Lambda
    handler, which drops it): the workflow waits, then the watchdog records the failure naming
    the waiting state, its function and its token."""
    from builder.runs.folders import runnable_workflow

    (tmp / "functions" / "Ask").mkdir(parents=True)
    (tmp / "functions" / "Ask" / "app.py").write_text(ASK.format(folder=str(tmp)))
    definition = {"StartAt": "Approve", "States": {"Approve": {
        "Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token"}}, "End": True}}}
    path = tmp / "statemachine.json"
    path.write_text(json.dumps(definition))
    store = make(2 * TTL)  # the run must be back (waiting) before the watchdog fires, also on a cold emulator
    with _platform(load_workflow(runnable_workflow(str(path))), store) as platform:
        waiting = platform.run({"order": 1}, workflow_id="wf-never-called-back", timeout=WAIT)
        assert waiting.status is WorkflowStatus.RUNNING, waiting
        token = (tmp / "token").read_text()
        outcome = wait_for_outcome(store, "wf-never-called-back")
        failure = outcome.failure
        assert failure is not None and failure["Watchdog"] is True, outcome
        assert failure["Pending"]["Waiting"] == [{"State": "Approve", "Function": "Approve", "Token": token}]
        assert "1 task(s) waiting for a callback (state Approve)" in failure["Cause"]


def _wait_fired(platform: TimerPlatform, count: int) -> None:
    """Wait (bounded) until the watchdog handled `count` deliveries."""
    stop = time.monotonic() + WAIT
    while len(platform.fired) < count:
        assert time.monotonic() < stop, f"the watchdog fired {len(platform.fired)} times, expected {count}"
        time.sleep(0.05)


SCHEDULES: dict[str, Callable[[MakeStore, Path], None]] = {
    f.__name__: f for f in (crashed_forever, lost_delivery, no_watchdog_when_turned_off, timers_fire_twice,
                            timers_fire_early, timers_fire_late, scheduler_unavailable,
                            watchdog_before_the_last_commit, last_commit_before_the_watchdog,
                            task_never_called_back)
}
