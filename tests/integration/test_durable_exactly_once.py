"""Exactly once where Lambda's durable service is at-least-once: a durable handler (steps, map,
parallel, child context, wait, invoke of another durable function, then a plain unum function)
on the embedded platform under the fault suites' schedules — duplicate, concurrent duplicate,
delayed and slow deliveries, crashes at every runtime fault point, transient store errors
(including "the write landed but the caller saw an error": a crash right after a checkpoint),
late duplicates of every delivery — and under concurrent executions racing one invocation.

Each step's body appends to an outside sink and returns a fresh random value, so a divergence
would show. Checks: the workflow's result carries exactly the values the log recorded for each
step; every operation has exactly one outcome in its execution's log (the first wins, the rest
replay); late duplicates change nothing; no key is ever created twice.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.faulty_platform import FaultyPlatform
from tests.support.faulty_store import FaultyStore
from tests.support.tracing import CommitWatch, store_snapshot
from unum_entry import naming
from unum_entry.envelope import DataRef, Envelope, Frame
from unum_entry.local.faults import FaultInjector, FaultRates
from unum_entry.local.platform import LocalPlatform
from unum_entry.stores import open_store
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.integration

EFFECT = '''
import threading
import uuid
from pathlib import Path

from aws_durable_execution_sdk_python import durable_execution
from aws_durable_execution_sdk_python.config import Duration

_lock = threading.Lock()


def effect(sink, name):
    with _lock, open(Path(sink) / "calls", "a") as calls:
        calls.write(name + "\\n")
    return f"{name}:{uuid.uuid4().hex[:12]}"
'''

ORDER = EFFECT + '''

@durable_execution
def handler(event, context):
    sink = event["sink"]
    first = context.step(lambda _: effect(sink, "first"), name="first")
    items = context.map([0, 1, 2], lambda ctx, item, i, _: ctx.step(lambda _: effect(sink, f"item{item}"),
                                                                     name=f"item{item}"), name="items").get_results()
    pair = context.parallel([lambda ctx: ctx.step(lambda _: effect(sink, "left"), name="left"),
                             lambda ctx: ctx.step(lambda _: effect(sink, "right"), name="right")],
                            name="pair").get_results()
    nested = context.run_in_child_context(lambda ctx: ctx.step(lambda _: effect(sink, "nested"), name="nested"),
                                          name="child")
    context.wait(Duration.from_seconds(1), name="pause")
    helper = context.invoke("Helper", {"sink": sink}, name="helper")
    last = context.step(lambda _: effect(sink, "last"), name="last")
    return {"first": first, "items": items, "pair": pair, "nested": nested, "helper": helper, "last": last}
'''

HELPER = EFFECT + '''

@durable_execution
def handler(event, context):
    return context.step(lambda _: effect(event["sink"], "helper"), name="helper")
'''

REPORT = "def handler(event, context):\n    return event\n"
STEPS = ["first", "item0", "item1", "item2", "left", "right", "nested", "last"]


def _workflow(folder: Path):
    return write_workflow(folder, name="durable-faults", entry="Order", functions={
        "Order": FunctionSource(ORDER, instructions=[{"op": "invoke", "function": "Report"}]),
        "Helper": FunctionSource(HELPER), "Report": FunctionSource(REPORT)})


def _entries(store, invocation: str) -> list[dict]:
    out, n = [], 0
    while (raw := store.get(naming.durable_log_key(invocation, n))) is not None:
        out.append(json.loads(raw))
        n += 1
    return out


def _outcomes(entries: list[dict]) -> tuple[dict[str, str], Counter[str]]:
    """Each STEP's recorded result by name, and how many outcomes each operation got."""
    results: dict[str, str] = {}
    count: Counter[str] = Counter()
    for entry in entries:
        for u in entry.get("u", ()):
            if u["Action"] in ("SUCCEED", "FAIL"):
                count[u["Id"]] += 1
            if u["Type"] == "STEP" and u["Action"] == "SUCCEED":
                results[u["Name"]] = json.loads(u["Payload"])
        for c in entry.get("c", ()):
            count[c["Id"]] += 1
    return results, count


def check_run(store, workflow_id: str, result: dict) -> None:
    order = _entries(store, naming.checkpoint_key(workflow_id, "Order", (Frame(),)))
    recorded, outcomes = _outcomes(order)
    assert set(recorded) == set(STEPS)
    assert result["first"] == recorded["first"] and result["last"] == recorded["last"]
    assert result["items"] == [recorded[f"item{i}"] for i in range(3)]
    assert result["pair"] == [recorded["left"], recorded["right"]] and result["nested"] == recorded["nested"]
    assert all(n == 1 for n in outcomes.values()), f"an operation got more than one outcome: {outcomes}"
    invoke_ids = [u["Id"] for e in order for u in e.get("u", ()) if u["Type"] == "CHAINED_INVOKE"]
    assert len(set(invoke_ids)) == 1
    helper = _entries(store, naming.checkpoint_key(f"{workflow_id}~{invoke_ids[0][:16]}", "Helper", (Frame(),)))
    helper_recorded, helper_outcomes = _outcomes(helper)
    assert result["helper"] == helper_recorded["helper"]
    assert all(n == 1 for n in helper_outcomes.values())


SCHEDULES = {
    "duplicates": FaultRates(duplicate=0.5, concurrent_duplicate=0.3, delay=0.3, late_duplicate=1.0),
    "crashes": FaultRates.everything(0.2),
    "slow-and-late": FaultRates(concurrent_duplicate=0.3, slow_duplicate=0.5, max_slow=0.5, late_duplicate=1.0),
    "store-errors": FaultRates(store_error=0.08, store_error_modes=("before", "after"), duplicate=0.2),
}


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("seed", [1, 2])
def test_durable_handler_is_exactly_once_under_fault_schedules(tmp_path: Path, schedule: str, seed: int) -> None:
    store = open_store(str(tmp_path / "unum.db"))
    try:
        run_schedule(tmp_path, store, SCHEDULES[schedule], seed)
    finally:
        store.close()


@pytest.mark.parametrize("schedule", ["duplicates", "store-errors"])
def test_durable_handler_is_exactly_once_on_dynamodb(tmp_path: Path, dynamodb_store, schedule: str) -> None:
    run_schedule(tmp_path, dynamodb_store, SCHEDULES[schedule], seed=3)


def run_schedule(tmp_path: Path, store, rates: FaultRates, seed: int) -> None:
    """One faulty run of the durable workflow on `store` and every check (module docstring)."""
    sink = tmp_path / "sink"
    sink.mkdir()
    watch = CommitWatch(store)
    faults = FaultInjector(rates, seed)
    served = FaultyStore(watch, faults) if rates.store_error else watch
    platform = FaultyPlatform(_workflow(tmp_path / "wf"), served, workers=4, faults=faults, retry_delay=0.01)
    try:
        outcome = platform.run({"sink": str(sink)}, timeout=120)
        assert outcome.failure is None, outcome.failure
        assert not platform.dead_letters, platform.dead_letters
        check_run(store, outcome.workflow_id, outcome.result)
        if rates.late_duplicate:
            before = (store_snapshot(store, outcome.workflow_id), (sink / "calls").read_text())
            watch.freeze()
            platform.redeliver_late()
            platform.wait_idle(60)
            assert platform.outcome(outcome.workflow_id).result == outcome.result
            assert watch.late == [], f"late duplicates created objects: {watch.late}"
            assert (store_snapshot(store, outcome.workflow_id), (sink / "calls").read_text()) == before
    finally:
        platform.close()
    assert watch.recommits == [], f"keys created more than once: {watch.recommits}"
    calls = Counter((sink / "calls").read_text().split())
    assert set(calls) == {*STEPS, "helper"}  # at least once each; the log keeps one outcome


def test_concurrent_executions_of_one_invocation_all_continue_with_the_first_outcomes(tmp_path: Path, race) -> None:
    sink = tmp_path / "sink"
    sink.mkdir()
    store = open_store(str(tmp_path / "unum.db"))
    with LocalPlatform(_workflow(tmp_path / "wf"), store, workers=4) as platform:
        runtime = platform.runtimes["Order"]
        env = Envelope(workflow="wf-race", inputs=(DataRef(value={"sink": str(sink)}),), start=True)
        race(6, lambda i: _handle_quietly(runtime, env))  # six executions of the same first delivery
        platform.wait_idle(120)
        outcome = platform.outcome("wf-race")
    assert outcome.failure is None, outcome.failure
    check_run(store, "wf-race", outcome.result)
    calls = Counter((sink / "calls").read_text().split())
    assert calls["first"] >= 1 and set(calls) == {*STEPS, "helper"}
    store.close()


def _handle_quietly(runtime, env):
    from unum_entry.errors import StaleInvocation

    try:
        return runtime.handle(env)
    except StaleInvocation:
        return None


class EarlyTimers(LocalPlatform):
    """Timers delivered early, as EventBridge Scheduler's arm does for a timer due within a
    second (a plain invoke at once: unum_entry/invokers/eventbridge_scheduler.py, DUE_MARGIN):
    every re-arm of a not-yet-due wait comes back at once, until the wait is due."""

    early = 0

    def submit_at(self, when, function, payload, *, name):
        if when - time.time() <= 1.0:
            self.early += 1
            return self.submit(function, payload)
        return super().submit_at(when, function, payload, name=name)


def test_timers_delivered_early_re_arm_until_due_and_never_strand_the_execution(tmp_path: Path) -> None:
    sink = tmp_path / "sink"
    sink.mkdir()
    store = open_store(str(tmp_path / "unum.db"))
    with EarlyTimers(_workflow(tmp_path / "wf"), store, workers=2) as platform:
        outcome = platform.run({"sink": str(sink)}, timeout=60)
        early = platform.early
    assert outcome.failure is None and outcome.result, (outcome.failure, early)
    assert early >= 2  # the 1-second wait came back early at least twice
    check_run(store, outcome.workflow_id, outcome.result)
    store.close()
