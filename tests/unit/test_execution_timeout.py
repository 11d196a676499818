"""The execution timeout (IR `timeout_seconds`, a state machine's top-level TimeoutSeconds;
unum_entry.watchdog) through the real Runtime over the memory store, with a clock the test moves:
armed at start + timeout beside the deadline watchdog, an early delivery re-arms under the next
name, a due one ends the workflow `timed out` (States.Timeout) and claims its result record, a
workflow that ended first is left alone, and a second delivery changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_watchdog import MARGIN, T0, TTL, Clock, Timers
from unum_entry import naming
from unum_entry.checkpoint import record_result
from unum_entry.envelope import Envelope
from unum_entry.errors import IRError
from unum_entry.ir import parse_ir
from unum_entry.outcome import WorkflowStatus, read_outcome
from unum_entry.retention import Retention
from unum_entry.runtime import Runtime, RuntimeConfig, new_workflow
from unum_entry.stores.base import Kind
from unum_entry.stores.memory import MemoryStore

pytestmark = pytest.mark.unit

TIMEOUT = 30


def make(clock: Clock) -> tuple[Runtime, MemoryStore, Timers]:
    store = MemoryStore(ttl_seconds=TTL, clock=clock)
    ir = parse_ir({"unum_ir": 1, "function": "Entry", "handler": "app.handler", "timeout_seconds": TIMEOUT,
                   "instructions": [{"op": "invoke", "function": "Next"}]}, source="ir")
    config = RuntimeConfig(retention=Retention(ttl_seconds=TTL, margin_seconds=MARGIN, clock=clock))
    invoker = Timers()
    return Runtime(ir, lambda event, ctx: event, store, invoker, config=config), store, invoker


def timeout_timer(invoker: Timers) -> tuple[float, Envelope, str]:
    """The newest execution-timeout timer armed (its input names the timeout; the watchdog's is null)."""
    when, _, payload, name = next(t for t in reversed(invoker.timers)
                                  if isinstance(Envelope.from_wire(t[2]).inputs[0].value, dict))
    return when, Envelope.from_wire(payload), name


def test_a_start_arms_the_execution_timeout_beside_the_watchdog():
    clock = Clock(T0)
    runtime, _, timers = make(clock)
    runtime.handle(new_workflow(1, "wf-a"))
    names = [name for _, _, _, name in timers.timers]
    assert names == [naming.timer_name("wf-a", "watchdog"), naming.timer_name("wf-a", "execution-timeout", 0)]
    when, env, _ = timeout_timer(timers)
    assert when == T0 + TIMEOUT and env.watchdog and env.inputs[0].value == {"timeout": TIMEOUT, "at": T0 + TIMEOUT}


def test_early_rearms_due_times_out_and_a_result_afterwards_is_refused():
    clock = Clock(T0)
    runtime, store, timers = make(clock)
    runtime.handle(new_workflow(1, "wf-b"))
    _, env, _ = timeout_timer(timers)
    clock.now = T0 + TIMEOUT - 5  # delivered early
    assert runtime.watchdog.fire(env) == "early"
    assert timers.timers[-1][3] == naming.timer_name("wf-b", "execution-timeout", 1)
    clock.now = T0 + TIMEOUT + 1
    assert runtime.watchdog.fire(Envelope.from_wire(timers.timers[-1][2])) == "recorded"
    outcome = read_outcome(store, "wf-b")
    assert outcome.status is WorkflowStatus.TIMED_OUT and outcome.failure is not None
    assert outcome.failure["Error"] == "States.Timeout" and outcome.failure["TimedOut"] is True
    assert runtime.watchdog.fire(env) == "ended"  # a duplicate delivery changes nothing
    record_result(store, runtime.retention, Envelope(workflow="wf-b", deadline=int(T0) + TTL), {"late": True})
    assert [r for r in store.records("wf-b") if r.kind is Kind.RESULT] == []
    assert read_outcome(store, "wf-b").status is WorkflowStatus.TIMED_OUT


def test_a_workflow_that_ended_first_is_left_alone():
    clock = Clock(T0)
    runtime, store, timers = make(clock)
    runtime.handle(new_workflow(1, "wf-c"))
    _, env, _ = timeout_timer(timers)
    record_result(store, runtime.retention, Envelope(workflow="wf-c", deadline=int(T0) + TTL), {"done": 1})
    clock.now = T0 + TIMEOUT + 1
    assert runtime.watchdog.fire(env) == "ended"
    assert read_outcome(store, "wf-c").status is WorkflowStatus.SUCCEEDED


@pytest.mark.parametrize("bad", [0, -1, "30", True])
def test_the_ir_field_is_validated(bad: Any):
    with pytest.raises(IRError, match="timeout_seconds"):
        parse_ir({"unum_ir": 1, "function": "Entry", "handler": "app.handler", "timeout_seconds": bad})


def test_a_timer_whose_attempt_was_redriven_between_its_read_and_its_claim_ends_nothing(monkeypatch):
    """The start's timeout timer reads the workflow running, with no later redrive; then (before
    its claim) the workflow fails and redrive 1 claims and clears the failure: the timer's claim
    requires that redrive's claim absent in the same transaction, so it ends nothing and the
    redriven run goes on (issue 45: an earlier attempt's timer never ends a later one)."""
    clock = Clock(T0)
    runtime, store, timers = make(clock)
    runtime.handle(new_workflow(1, "wf-r"))
    _, env, _ = timeout_timer(timers)
    clock.now = T0 + TIMEOUT + 1
    real = store.transact
    landed = []

    def transact(key: str, *args: Any, **kwargs: Any) -> Any:
        if not landed:  # the whole redrive lands before the timer's first write
            landed.append(store.create(naming.redrive_key("wf-r", 0), b"redrive 1", workflow="wf-r",
                                       kind=Kind.MARKER, expires_at=int(T0) + TTL))
        return real(key, *args, **kwargs)

    monkeypatch.setattr(store, "transact", transact)
    assert runtime.watchdog.fire(env) == "ended"
    assert landed, "the timer reached its claim"
    assert read_outcome(store, "wf-r").status is WorkflowStatus.RUNNING
