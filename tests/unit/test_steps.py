"""Steps (unum_entry.steps) over MemoryStore: replay, determinism, transactions, guards,
the compensation log and journal GC through the real runtime — no I/O."""

from __future__ import annotations

import threading

import pytest

from tests.support.expiry import ttl_from_now
from unum_entry import naming
from unum_entry.codec import decode, encode
from unum_entry.envelope import Envelope
from unum_entry.errors import GuardFailed, StaleInvocation, StepError, TransactionConflict
from unum_entry.hooks import NoHooks
from unum_entry.local.platform import local_platform
from unum_entry.steps import (
    Aborted,
    HookRaised,
    Journal,
    StepEnv,
    append_compensation,
    compensation_request,
    durable,
    start_compensations,
    witnesses,
)
from unum_entry.stores.base import AppOp, Guard, Kind
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.unit

WF = "wf-unit"


@durable
def handler(event, ctx):  # the handler whose module holds the compensations below
    return event


def undo(result, *args):
    return None


def tx_undo(tx, result, *args):
    return None


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def invoke(self, function, payload):
        self.calls.append((function, payload))


def journal(store, invocation="c-inv", *, handler_fn=handler, invoker=None, guards=()) -> Journal:
    env = StepEnv(store=store, invoker=invoker or Recorder(), hooks=NoHooks(), function="F", handler=handler_fn)
    return Journal(env, WF, invocation, guards=guards)


def test_a_step_runs_once_and_every_later_execution_gets_the_recorded_value():
    store, calls = MemoryStore(), []

    def effect(x):
        calls.append(x)
        return {"paid": x, "n": len(calls)}

    first = journal(store).step("charge", effect, (5,), {}, None)
    second = journal(store).step("charge", effect, (5,), {}, None)
    assert first == second == {"paid": 5, "n": 1}
    assert calls == [5]


def test_steps_are_numbered_in_call_order_and_later_steps_see_earlier_values():
    store = MemoryStore()
    j = journal(store)
    a = j.step("a", lambda: 1, (), {}, None)
    b = j.step("b", lambda v: v + 1, (a,), {}, None)
    assert (a, b, j.steps) == (1, 2, 2)
    assert decode(store.get(naming.step_key("c-inv", 1)))["r"] == 2


def test_a_handler_not_declared_durable_gets_a_clear_error():
    def plain(event, ctx):
        return event

    with pytest.raises(StepError, match="not declared durable"):
        journal(MemoryStore(), handler_fn=plain).step("a", lambda: 1, (), {}, None)


def test_a_re_execution_calling_another_step_at_the_same_position_is_refused():
    store = MemoryStore()
    journal(store).step("debit", lambda: 1, (), {}, None)
    with pytest.raises(StepError, match="'credit' in this execution but 'debit'"):
        journal(store).step("credit", lambda: 1, (), {}, None)


def test_a_compensation_must_be_a_module_level_function_of_the_handlers_module():
    def local_undo(result):
        return None

    with pytest.raises(StepError, match="module-level"):
        journal(MemoryStore()).step("a", lambda: 1, (), {}, local_undo)


def test_steps_cannot_nest():
    j = journal(MemoryStore())
    with pytest.raises(StepError, match="nested"):
        j.step("outer", lambda: j.step("inner", lambda: 1, (), {}, None), (), {}, None)


def test_a_result_that_cannot_be_recorded_names_the_step():
    with pytest.raises(StepError, match="step 'weird'"):
        journal(MemoryStore()).step("weird", lambda: object(), (), {}, None)


def test_time_randomness_and_uuids_are_the_same_in_every_execution():
    from unum_entry.steps import StepContext

    store = MemoryStore()

    def values():
        ctx = StepContext(WF, "F", "c-inv", 0, 0, 1, 0, _journal=journal(store))
        return ctx.now(), ctx.random(), ctx.uuid4()

    assert values() == values()


def test_a_context_without_a_journal_explains_itself():
    from unum_entry.steps import StepContext

    ctx = StepContext(WF, "F", "c-inv", 0, 0, 1, 0)
    with pytest.raises(StepError, match="durable"):
        ctx.now()
    with pytest.raises(Aborted):
        ctx.abort("E", "why")


def test_a_transaction_commits_its_writes_with_its_record_once():
    store = MemoryStore()

    def debit(tx, account, amount):
        balance = tx.get("accounts", account, 100) - amount
        tx.put("accounts", account, balance)
        return balance

    assert journal(store).transact("debit", debit, ("alice", 30), {}, None) == 70
    assert journal(store).transact("debit", debit, ("alice", 30), {}, None) == 70  # replayed
    item = store.app_read("accounts", ["alice"])["alice"]
    assert (decode(item.value), item.version) == (70, 1)


def test_a_transaction_retries_when_its_item_changed_underneath():
    store = MemoryStore()
    store.transact("t-seed", b"", [AppOp("c", "n", 0, write=True, value=encode(10))], workflow=WF, expires_at=ttl_from_now(store))
    runs = []

    def add(tx):
        value = tx.get("c", "n")
        if not runs:  # another writer commits between our read and our commit, once
            store.transact("t-other", b"", [AppOp("c", "n", 1, write=True, value=encode(value + 5))], workflow=WF, expires_at=ttl_from_now(store))
        runs.append(value)
        tx.put("c", "n", value + 1)
        return value + 1

    assert journal(store).transact("add", add, (), {}, None) == 16
    assert runs == [10, 15]
    assert decode(store.app_read("c", ["n"])["n"].value) == 16


def test_memory_store_transaction_is_all_or_nothing():
    store = MemoryStore()
    ops = [AppOp("t", "a", 0, write=True, value=b"1"), AppOp("t", "b", 3, write=True, value=b"2")]
    with pytest.raises(TransactionConflict):
        store.transact("t-x", b"v", ops, workflow=WF, expires_at=ttl_from_now(store))
    assert store.get("t-x") is None and store.app_read("t", ["a", "b"]) == {}
    store.transact("t-x", b"v", ops[:1], workflow=WF, expires_at=ttl_from_now(store))
    assert store.transact("t-x", b"other", [AppOp("t", "a", 1, write=True, value=b"9")], workflow=WF, expires_at=ttl_from_now(store)) == (b"v", False)
    assert store.app_read("t", ["a"])["a"].value == b"1"


@pytest.mark.parametrize("guard, holds", [
    (Guard("c-in", present=True), True), (Guard("c-gone", present=True), False),
    (Guard("c-gone", present=False), True), (Guard("c-in", present=False), False),
    (Guard("s-set", present=True, slot=1), True), (Guard("s-set", present=True, slot=0), False),
    (Guard("s-none", present=True, slot=0), False),
])
def test_memory_store_guards(guard, holds):
    store = MemoryStore()
    store.create("c-in", b"x", workflow=WF, expires_at=ttl_from_now(store))
    store.add_to_set("s-set", 0, "1", size=2, workflow=WF, expires_at=ttl_from_now(store))
    if holds:
        assert store.transact("t-g", b"v", [], workflow=WF, guards=[guard], expires_at=ttl_from_now(store)) == (b"v", True)
    else:
        with pytest.raises(GuardFailed):
            store.transact("t-g", b"v", [], workflow=WF, guards=[guard], expires_at=ttl_from_now(store))
        assert store.get("t-g") is None


def test_a_step_whose_guard_fails_escapes_the_handler_as_stale():
    store = MemoryStore()
    j = journal(store, guards=[Guard("c-input", present=True)])  # the input was collected
    with pytest.raises(HookRaised) as caught:
        j.step("a", lambda: 1, (), {}, None)
    assert isinstance(caught.value.original, StaleInvocation)
    assert store.get(naming.step_key("c-inv", 0)) is None


def test_a_fresh_step_after_the_workflow_ended_is_refused():
    store = MemoryStore()
    store.create(naming.result_key(WF, (Envelope(workflow=WF).top,)), b"r", workflow=WF, kind=Kind.RESULT, expires_at=ttl_from_now(store))
    ran = []
    with pytest.raises(HookRaised):
        journal(store).step("a", lambda: ran.append(1), (), {}, None)
    assert ran == []


def test_a_step_runs_afresh_only_while_the_workflow_runs_and_the_invocation_has_not_committed():
    env = Envelope.from_wire({"unum": 2, "workflow": WF, "frames": [[0, 1, 0], [1, 3, 0]],
                              "inputs": [{"ref": "c-in", "value": 1}]})
    keys = {(g.key, g.present, g.slot) for g in witnesses(env, "c-me")}
    assert keys == {("c-me", False, None), (naming.failure_key(WF), False, None),
                    (naming.result_key(WF, (Envelope(workflow=WF).top,)), False, None)}


# ---- the compensation log ------------------------------------------------------------------------

def test_a_compensation_registers_once_per_effect_in_completion_order():
    store = MemoryStore()
    j = journal(store)
    j.step("a", lambda: 1, (), {}, undo)
    j.step("b", lambda: 2, (), {}, undo)
    journal(store).step("a", lambda: 1, (), {}, undo)  # a replay registers nothing new
    entries = [decode(store.get(naming.compensation_key(WF, i))) for i in range(2)]
    assert [e["n"] for e in entries] == ["a", "b"]
    assert store.get(naming.compensation_key(WF, 2)) is None


def test_abort_invokes_the_newest_compensation():
    store, invoker = MemoryStore(), Recorder()
    j = journal(store, invoker=invoker)
    j.step("a", lambda: 1, (), {}, undo)
    j.transact("b", lambda tx: 2, (), {}, tx_undo)
    assert start_compensations(store, invoker, WF) == 2
    assert start_compensations(store, invoker, WF) == 2  # idempotent: the same chain again
    function, payload = invoker.calls[0]
    request = compensation_request(Envelope.from_wire(payload))
    assert (function, request.index, request.stop, request.top) == ("F", 1, 0, 1)


def test_abort_of_a_workflow_without_compensations_reads_one_key_and_writes_nothing():
    from unum_entry.stores.counting import CountingStore

    store, invoker = CountingStore(MemoryStore()), Recorder()
    assert start_compensations(store, invoker, WF) == 0
    assert dict(store.counts) == {"read": 1} and invoker.calls == []


def test_a_step_completing_after_the_abort_compensates_itself_and_stops_the_handler():
    """The step's record was written but its execution died before registering; the workflow
    aborted meanwhile; the retry replays the step and registers: it must compensate itself."""
    store, invoker = MemoryStore(), Recorder()
    journal(store, invoker=invoker).step("early", lambda: 1, (), {}, undo)
    journal(store, "c-other").step("late", lambda: 1, (), {}, None)  # died before registering
    store.create(naming.failure_key(WF), b"f", workflow=WF, kind=Kind.FAILURE, expires_at=ttl_from_now(store))
    start_compensations(store, invoker, WF)
    with pytest.raises(Aborted):
        journal(store, "c-other", invoker=invoker).step("late", lambda: 1, (), {}, undo)
    request = compensation_request(Envelope.from_wire(invoker.calls[-1][1]))
    assert (request.index, request.stop, request.top) == (1, 1, 1)


def test_after_success_later_registrations_are_skipped():
    store = MemoryStore()
    journal(store).step("a", lambda: 1, (), {}, undo)
    store.create(naming.result_key(WF, (Envelope(workflow=WF).top,)), b"r", workflow=WF, kind=Kind.RESULT, expires_at=ttl_from_now(store))
    kinds = sorted(r.kind.value for r in store.records(WF))
    assert append_compensation(store, WF, encode({"e": "x"}), "x") == (-1, False)
    assert sorted(r.kind.value for r in store.records(WF)) == kinds  # the log kept for its TTL, nothing added
