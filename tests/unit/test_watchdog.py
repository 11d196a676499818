"""The deadline watchdog (unum_entry.watchdog) through the real Runtime over the memory store,
with a clock the test moves: armed once per start (same name for every duplicate), early
firings re-arm, a due firing records `Unum.RetentionExpired` naming what was pending, an ended or
fully answered workflow is left alone, a late firing records nothing, and a watchdog failure
yields to results that cover every position (both orders of the race with the last commit)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.expiry import ttl_from_now
from unum_entry import naming
from unum_entry.codec import decode, encode
from unum_entry.envelope import ROOT, DataRef, Envelope, Frame
from unum_entry.errors import EnvelopeError, InvokeError
from unum_entry.ir import parse_ir
from unum_entry.outcome import WorkflowStatus, read_outcome
from unum_entry.retention import Retention
from unum_entry.runtime import Runtime, RuntimeConfig, new_workflow
from unum_entry.stores.base import Kind
from unum_entry.stores.memory import MemoryStore
from unum_entry.watchdog import fires_at, timer_of

pytestmark = pytest.mark.unit

TTL, MARGIN = 1000, 100
T0 = 1_800_000_000.0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Timers:
    """An invoker that records invokes and timers; `fail` makes `invoke_at` refuse."""

    def __init__(self) -> None:
        self.invoked: list[tuple[str, dict]] = []
        self.timers: list[tuple[float, str, dict, str]] = []
        self.fail = 0

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.invoked.append((function, payload))

    def invoke_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        if self.fail:
            self.fail -= 1
            raise InvokeError("scheduler unavailable (injected)")
        self.timers.append((when, function, payload, name))


def make(clock: Clock, *, watchdog: bool = True, invoker: Any = None) -> tuple[Runtime, MemoryStore, Any]:
    store = MemoryStore(ttl_seconds=TTL, clock=clock)
    invoker = invoker if invoker is not None else Timers()
    ir = parse_ir({"unum_ir": 1, "function": "Entry", "handler": "app.handler",
                   "instructions": [{"op": "invoke", "function": "Next"}]}, source="ir")
    config = RuntimeConfig(retention=Retention(ttl_seconds=TTL, margin_seconds=MARGIN, clock=clock), watchdog=watchdog)
    return Runtime(ir, lambda event, ctx: event, store, invoker, config=config), store, invoker


def timer_envelope(invoker: Timers, i: int = -1) -> Envelope:
    return Envelope.from_wire(invoker.timers[i][2])


def test_a_start_arms_one_timer_at_the_deadline_less_the_margin_and_duplicates_arm_the_same_name():
    clock = Clock(T0)
    runtime, _, timers = make(clock)
    runtime.handle(new_workflow({"x": 1}, "wf-a"))
    runtime.handle(new_workflow({"x": 1}, "wf-a"))  # a duplicate of the start
    assert [(when, fn, name) for when, fn, _, name in timers.timers] == \
        [(T0 + TTL - MARGIN, "Entry", naming.timer_name("wf-a", "watchdog"))] * 2
    env = timer_envelope(timers)
    assert env.watchdog and env.deadline == int(T0) + TTL and env.attempt == 0
    assert len(timers.invoked) == 2  # the handler ran and invoked Next (the duplicate: again, not committed)


def test_a_continuation_arms_nothing_and_watchdog_false_arms_nothing():
    clock = Clock(T0)
    runtime, _, timers = make(clock)
    runtime.handle(Envelope(workflow="wf-b", inputs=(DataRef(value=1),), deadline=int(T0) + TTL))
    assert timers.timers == []
    off, _, off_timers = make(clock, watchdog=False)
    off.handle(new_workflow(1, "wf-c"))
    assert off_timers.timers == []


def test_an_invoker_without_timers_runs_workflows_without_a_watchdog():
    class Plain:
        def invoke(self, function, payload):
            pass

    runtime, store, _ = make(Clock(T0), invoker=Plain())
    runtime.handle(new_workflow(1, "wf-d"))
    assert not runtime.watchdog.enabled
    assert store.get(naming.checkpoint_key("wf-d", "Entry", ROOT)) is not None


def test_the_scheduler_unavailable_fails_the_start_delivery_before_the_handler_runs():
    clock = Clock(T0)
    runtime, store, timers = make(clock)
    timers.fail = 1
    with pytest.raises(InvokeError):
        runtime.handle(new_workflow(1, "wf-e"))
    assert store.get(naming.checkpoint_key("wf-e", "Entry", ROOT)) is None and timers.invoked == []
    runtime.handle(new_workflow(1, "wf-e"))  # the platform's redelivery arms it
    assert len(timers.timers) == 1 and len(timers.invoked) == 1


def test_an_early_firing_re_arms_under_the_next_name_and_records_nothing():
    clock = Clock(T0)
    runtime, store, timers = make(clock)
    runtime.handle(new_workflow(1, "wf-f"))
    clock.now = T0 + 10  # long before deadline - margin
    assert runtime.handle(timer_envelope(timers)) is None
    when, fn, payload, name = timers.timers[-1]
    assert (when, fn, name) == (T0 + TTL - MARGIN, "Entry", timer_of("wf-f", 1))
    assert name != timer_of("wf-f", 0) and Envelope.from_wire(payload).attempt == 1
    assert read_outcome(store, "wf-f").failure is None
    assert runtime.watchdog.fire(Envelope.from_wire(payload)) == "early"  # fires twice early: re-arms again
    assert timers.timers[-1][3] == timer_of("wf-f", 2)


def test_a_due_firing_without_an_outcome_records_retention_expired_naming_what_was_pending():
    clock = Clock(T0)
    runtime, store, timers = make(clock)
    runtime.handle(new_workflow(1, "wf-g"))  # Entry committed; Next never ran (its delivery was lost)
    clock.now = fires_at(runtime.retention, int(T0) + TTL)
    assert runtime.watchdog.fire(timer_envelope(timers)) == "recorded"
    outcome = read_outcome(store, "wf-g")
    assert outcome.status is WorkflowStatus.TIMED_OUT
    failure = outcome.failure
    assert failure["Error"] == "Unum.RetentionExpired" and failure["Watchdog"] is True
    assert failure["Function"] == "Entry" and failure["Invocation"] == timer_of("wf-g", 0)
    assert failure["Pending"] == {"Waiting": [], "Joins": [], "Checkpoints": 1}
    assert "no outcome by its deadline" in failure["Cause"] and "1 invocation(s) committed" in failure["Cause"]
    # fired twice: the second delivery finds the workflow ended; the record is unchanged
    assert runtime.watchdog.fire(timer_envelope(timers)) == "ended"
    assert read_outcome(store, "wf-g").failure == failure
    # and no handler starts any more: a late delivery of the lost invocation is dropped
    assert runtime.handle(Envelope(workflow="wf-g", inputs=(DataRef(value=1),), deadline=int(T0) + TTL)) is None


def test_a_waiting_task_and_an_incomplete_join_are_named():
    clock = Clock(T0)
    runtime, store, timers = make(clock)
    runtime.handle(new_workflow(1, "wf-h"))
    deadline = int(T0) + TTL
    wait = {"__next__": "__wait__", "wait": {"state": "Approve", "nonce": "n1", "token": "", "issued": T0}}
    frames = (Frame(0, 2, 0),)
    store.create(naming.checkpoint_key("wf-h", "Approve", frames), encode(wait), workflow="wf-h", expires_at=deadline)
    store.add_to_set("s-join", 0, "c-x", size=2, workflow="wf-h", expires_at=deadline)
    clock.now = deadline - MARGIN + 1
    assert runtime.watchdog.fire(timer_envelope(timers)) == "recorded"
    pending = read_outcome(store, "wf-h").failure["Pending"]
    assert pending["Waiting"] == [{"State": "Approve", "Function": "", "Token": ""}]
    assert pending["Joins"] == [{"Set": "s-join", "Joined": 1, "Of": 2}]


def test_an_ended_workflow_is_left_alone():
    clock = Clock(T0)
    runtime, store, timers = make(clock)
    runtime.handle(new_workflow(1, "wf-i"))
    store.create(naming.result_key("wf-i", ROOT), encode({"at": [], "value": 7}), workflow="wf-i", kind=Kind.RESULT, expires_at=ttl_from_now(store))
    clock.now = T0 + TTL - MARGIN
    assert runtime.watchdog.fire(timer_envelope(timers)) == "ended"
    assert read_outcome(store, "wf-i").status is WorkflowStatus.SUCCEEDED


def branch_result(store: MemoryStore, workflow: str, index: int, size: int) -> None:
    env = Envelope(workflow=workflow, frames=(Frame(), Frame(index, size, 0)), inputs=(DataRef(value=0),))
    store.create(naming.result_key(workflow, env.frames),
                 encode({"at": [index], "of": [size], "value": index}), workflow=workflow, kind=Kind.RESULT, expires_at=ttl_from_now(store))


def test_per_branch_results_that_cover_every_position_are_a_success_the_watchdog_keeps():
    clock = Clock(T0)
    runtime, store, timers = make(clock)
    runtime.handle(new_workflow(1, "wf-j"))
    branch_result(store, "wf-j", 0, 2)
    branch_result(store, "wf-j", 1, 2)
    clock.now = T0 + TTL - MARGIN
    assert runtime.watchdog.fire(timer_envelope(timers)) == "succeeded"
    assert read_outcome(store, "wf-j").status is WorkflowStatus.SUCCEEDED


def test_the_last_result_after_the_watchdogs_record_wins_and_a_partial_one_does_not():
    clock = Clock(T0)
    runtime, store, timers = make(clock)
    runtime.handle(new_workflow(1, "wf-k"))
    branch_result(store, "wf-k", 0, 2)
    clock.now = T0 + TTL - MARGIN
    assert runtime.watchdog.fire(timer_envelope(timers)) == "recorded"
    assert read_outcome(store, "wf-k").status is WorkflowStatus.TIMED_OUT  # one branch of two: timed out
    branch_result(store, "wf-k", 1, 2)  # the branch that started before deadline - margin commits
    outcome = read_outcome(store, "wf-k")
    assert outcome.status is WorkflowStatus.SUCCEEDED and outcome.failure is None and outcome.results == [0, 1]
    assert store.get(naming.failure_key("wf-k")) is not None  # kept (nothing is deleted), but it yields


def test_any_other_failure_still_wins_over_results():
    store = MemoryStore()
    store.create(naming.failure_key("wf-l"), encode({"Error": "Boom", "Cause": ""}), workflow="wf-l", kind=Kind.FAILURE, expires_at=ttl_from_now(store))
    store.create(naming.result_key("wf-l", ROOT), encode({"at": [], "value": 1}), workflow="wf-l", kind=Kind.RESULT, expires_at=ttl_from_now(store))
    assert read_outcome(store, "wf-l").status is WorkflowStatus.FAILED


def test_a_firing_after_the_deadline_records_nothing():
    clock = Clock(T0)
    runtime, store, timers = make(clock)
    runtime.handle(new_workflow(1, "wf-m"))
    clock.now = T0 + TTL + 5
    assert runtime.watchdog.fire(timer_envelope(timers)) == "late"
    assert decode(store.get(naming.checkpoint_key("wf-m", "Entry", ROOT))) == 1
    assert store.get(naming.failure_key("wf-m")) is None


def test_the_watchdog_envelope_on_the_wire():
    env = Envelope(workflow="wf", inputs=(DataRef(value=None),), deadline=5, attempt=2, watchdog=True)
    wire = env.to_wire()
    assert wire["watchdog"] is True and Envelope.from_wire(wire) == env
    assert "watchdog" not in Envelope(workflow="wf", inputs=(DataRef(value=1),)).to_wire()
    for bad, message in [({**wire, "watchdog": "yes"}, "envelope.watchdog: expected a boolean"),
                         ({**wire, "deadline": 0}, "envelope.watchdog: a watchdog timer needs a deadline"),
                         ({**wire, "start": True}, "envelope.watchdog")]:
        with pytest.raises(EnvelopeError, match=message):
            Envelope.from_wire(bad)


def test_the_switches_a_function_image_and_a_workflow_folder_read(tmp_path):
    from unum_entry.errors import WorkflowDefinitionError
    from unum_entry.platforms.common import FunctionSettings
    from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

    base = {"UNUM_STORE": "file:///tmp/x", "UNUM_INVOKER": "lambda://"}
    assert FunctionSettings.from_env(base).config.watchdog is True
    assert FunctionSettings.from_env({**base, "UNUM_WATCHDOG": "0"}).config.watchdog is False
    wf = write_workflow(tmp_path / "wf", name="w", entry="A", functions={"A": FunctionSource(IDENTITY_CODE)})
    assert wf.watchdog is True
    manifest = tmp_path / "wf" / "unum-workflow.json"
    manifest.write_text('{"unum_workflow": 1, "name": "w", "entry": "A", "watchdog": false}')
    assert load_workflow(tmp_path / "wf").watchdog is False
    manifest.write_text('{"unum_workflow": 1, "name": "w", "entry": "A", "watchdog": "off"}')
    with pytest.raises(WorkflowDefinitionError, match=r"unum-workflow.json: watchdog: expected true or false, found 'off'"):
        load_workflow(tmp_path / "wf")


IDENTITY_CODE = "def handler(event, ctx):\n    return event\n"
