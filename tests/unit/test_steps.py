"""Steps (unum_entry.steps) over MemoryStore: replay, determinism, transactions, guards,
the compensation log and journal GC through the real runtime — no I/O."""

from __future__ import annotations

import threading

import pytest

from unum_entry import naming
from unum_entry.codec import decode, encode
from unum_entry.egress import _collect_journal_with, _member_keys
from unum_entry.envelope import Envelope, GcDuty
from unum_entry.errors import GuardFailed, StaleInvocation, StepError, TransactionConflict
from unum_entry.hooks import NoHooks
from unum_entry.local.platform import local_platform
from unum_entry.plan import Call, Plan
from unum_entry.steps import (
    Aborted,
    HookRaised,
    Journal,
    StepEnv,
    _append,
    compensation_request,
    drop_compensations,
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
    from unum_entry.runtime import InvocationContext

    store = MemoryStore()

    def values():
        ctx = InvocationContext(WF, "F", "c-inv", 0, 0, 1, 0, _journal=journal(store))
        return ctx.now(), ctx.random(), ctx.uuid4()

    assert values() == values()


def test_a_context_without_a_journal_explains_itself():
    from unum_entry.runtime import InvocationContext

    ctx = InvocationContext(WF, "F", "c-inv", 0, 0, 1, 0)
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
    store.transact("t-seed", b"", [AppOp("c", "n", 0, write=True, value=encode(10))], workflow=WF)
    runs = []

    def add(tx):
        value = tx.get("c", "n")
        if not runs:  # another writer commits between our read and our commit, once
            store.transact("t-other", b"", [AppOp("c", "n", 1, write=True, value=encode(value + 5))], workflow=WF)
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
        store.transact("t-x", b"v", ops, workflow=WF)
    assert store.get("t-x") is None and store.app_read("t", ["a", "b"]) == {}
    store.transact("t-x", b"v", ops[:1], workflow=WF)
    assert store.transact("t-x", b"other", [AppOp("t", "a", 1, write=True, value=b"9")], workflow=WF) == (b"v", False)
    assert store.app_read("t", ["a"])["a"].value == b"1"


@pytest.mark.parametrize("guard, holds", [
    (Guard("c-in", present=True), True), (Guard("c-gone", present=True), False),
    (Guard("c-gone", present=False), True), (Guard("c-in", present=False), False),
    (Guard("s-set", present=True, slot=1), True), (Guard("s-set", present=True, slot=0), False),
    (Guard("s-none", present=True, slot=0), False),
])
def test_memory_store_guards(guard, holds):
    store = MemoryStore()
    store.create("c-in", b"x", workflow=WF)
    store.create_set("s-set", 2, workflow=WF)
    store.add_to_set("s-set", 0, "1")
    if holds:
        assert store.transact("t-g", b"v", [], workflow=WF, guards=[guard]) == (b"v", True)
    else:
        with pytest.raises(GuardFailed):
            store.transact("t-g", b"v", [], workflow=WF, guards=[guard])
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
    store.create(naming.result_key(WF, (Envelope(workflow=WF).top,)), b"r", workflow=WF, kind=Kind.RESULT)
    ran = []
    with pytest.raises(HookRaised):
        journal(store).step("a", lambda: ran.append(1), (), {}, None)
    assert ran == []


def test_witnesses_mirror_ingress():
    env = Envelope.from_wire({"unum": 1, "workflow": WF, "frames": [[0, 1, 0], [1, 3, 0]],
                              "inputs": [{"ref": "c-in", "value": 1}],
                              "gc": {"delete": ["c-in"], "set": "s-gc", "slot": 1, "on_full": ["c-o"]}})
    keys = {(g.key, g.present, g.slot) for g in witnesses(env, "c-me")}
    assert ("c-in", True, None) in keys and ("s-gc", True, 1) in keys
    assert (naming.failure_key(WF), False, None) in keys


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
    store.create(naming.failure_key(WF), b"f", workflow=WF, kind=Kind.FAILURE)
    start_compensations(store, invoker, WF)
    with pytest.raises(Aborted):
        journal(store, "c-other", invoker=invoker).step("late", lambda: 1, (), {}, undo)
    request = compensation_request(Envelope.from_wire(invoker.calls[-1][1]))
    assert (request.index, request.stop, request.top) == (1, 1, 1)


def test_success_drops_the_log_and_later_registrations_are_skipped():
    store = MemoryStore()
    journal(store).step("a", lambda: 1, (), {}, undo)
    store.create(naming.result_key(WF, (Envelope(workflow=WF).top,)), b"r", workflow=WF, kind=Kind.RESULT)
    drop_compensations(store, WF)
    assert _append(store, WF, encode({"e": "x"}), "x") == (-1, False)
    assert [r.kind for r in store.records(WF)] == [Kind.STEP, Kind.RESULT]


# ---- journal GC in egress ------------------------------------------------------------------------

def test_the_journal_travels_with_every_duty_to_collect_the_checkpoint():
    plan = Plan(calls=(Call("B", Envelope(workflow=WF, gc=GcDuty(delete=("c-me",)))),
                       Call("C", Envelope(workflow=WF, gc=GcDuty(set="s", slot=0, on_full=("c-me",)))),
                       Call("D", Envelope(workflow=WF, gc=GcDuty(delete=("c-other",))))))
    journal_keys = naming.journal_keys("c-me", 2)
    out = _collect_journal_with(plan, "c-me", journal_keys)
    assert out.calls[0].envelope.gc.delete == ("c-me", *journal_keys)
    assert out.calls[1].envelope.gc.on_full == ("c-me", *journal_keys)
    assert out.calls[2].envelope.gc.delete == ("c-other",)
    assert _member_keys("c-me+2") == ["c-me", *journal_keys]
    assert _member_keys("c-me") == ["c-me"]


STEPPED = ("from unum_entry.steps import durable\n\n@durable\ndef handler(event, ctx):\n"
           "    a = ctx.step('a', lambda: event)\n    ctx.transact('b', lambda tx: tx.put('t', ctx.invocation, a))\n"
           "    return {BODY}\n")


@pytest.mark.parametrize("shape", ["chain", "map"])
def test_a_finished_workflow_leaves_no_step_record(tmp_path, shape):
    if shape == "chain":
        functions = {"A": FunctionSource(STEPPED.replace("{BODY}", "a"), [{"op": "invoke", "function": "B"}]),
                     "B": FunctionSource(STEPPED.replace("{BODY}", "a"))}
    else:
        functions = {"A": FunctionSource(STEPPED.replace("{BODY}", "[1, 2, 3]"),
                                         [{"op": "create_set", "function": "S"}, {"op": "map", "function": "W"}]),
                     "W": FunctionSource(STEPPED.replace("{BODY}", "a"), [{"op": "fan_in", "function": "S"}]),
                     "S": FunctionSource(STEPPED.replace("{BODY}", "sum(a)"))}
    workflow = write_workflow(tmp_path / shape, name=shape, entry="A", functions=functions)
    store = MemoryStore()
    with local_platform(workflow, store, workers=2) as platform:
        outcome = platform.run(7 if shape == "chain" else [1, 2, 3], timeout=30)
    assert outcome.result == (7 if shape == "chain" else 6)
    assert [r.kind for r in store.records()] == [Kind.RESULT]
    assert len(store._app) == (2 if shape == "chain" else 5)


def test_step_free_functions_do_no_step_work(tmp_path):
    """A plain handler's context builds no journal record and reads nothing extra."""
    from unum_entry.stores.counting import CountingStore

    workflow = write_workflow(tmp_path / "plain", name="plain", entry="A", functions={
        "A": FunctionSource("def handler(event, context):\n    return event\n", [{"op": "invoke", "function": "B"}]),
        "B": FunctionSource("def handler(event, context):\n    return event\n")})
    store = CountingStore(MemoryStore())
    with local_platform(workflow, store, workers=1) as platform:
        platform.run(1, timeout=30)
    # A reads its checkpoint and start marker, B its checkpoint and input; each commits; A writes
    # the start marker; B the result; deletes: A's checkpoint (by B), B's checkpoint and the marker.
    assert dict(store.counts) == {"read": 4, "create_checkpoint": 2, "create_marker": 1, "create_result": 1, "delete": 3}


def test_concurrent_journals_of_one_step_agree(tmp_path):
    store, calls = MemoryStore(), []
    barrier = threading.Barrier(8)

    def run():
        barrier.wait(timeout=10)
        return journal(store).transact("inc", lambda tx: calls.append(1) or tx.put("c", "n", tx.get("c", "n", 0) + 1),
                                       (), {}, None)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert decode(store.app_read("c", ["n"])["n"].value) == 1


def test_abort_from_a_plain_handler_fails_the_workflow_without_retries(tmp_path):
    workflow = write_workflow(tmp_path / "abort", name="abort", entry="A", functions={
        "A": FunctionSource("def handler(event, ctx):\n    ctx.abort('Refused', f'no {event}')\n")})
    store = MemoryStore()
    with local_platform(workflow, store, workers=1) as platform:
        outcome = platform.run("way", timeout=30)
        assert platform.stats["handler_retries"] == 0
    assert outcome.failure["Error"] == "Refused" and outcome.failure["Cause"] == "no way"
    assert outcome.failure["Attempts"] == 1 and outcome.results == []
    assert [r.kind for r in store.records()] == [Kind.FAILURE]


def test_a_plain_handler_calling_a_step_fails_with_the_fix_in_the_message(tmp_path):
    workflow = write_workflow(tmp_path / "plain-step", name="plain-step", entry="A", functions={
        "A": FunctionSource("def handler(event, ctx):\n    return ctx.step('s', lambda: 1)\n", [], {"max_attempts": 1})})
    store = MemoryStore()
    with local_platform(workflow, store, workers=1) as platform:
        outcome = platform.run(None, timeout=30)
    assert outcome.failure["Error"] == "StepError"
    assert "'A'" in outcome.failure["Cause"] and "@unum_entry.steps.durable" in outcome.failure["Cause"]
