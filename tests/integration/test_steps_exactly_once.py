"""Exactly-once side effects under faults: steps, transactional effects and compensations, on the
file store and on DynamoDB (moto server over HTTP).

The workflow `ledger`: A → map W over 3 items → fan-in Sum → End. Every function is `@durable`:
- a transactional step adds 1 to a counter in a separate application table (`counters`) and
  registers a compensation that subtracts it again and appends itself to an ordered
  compensation log (`undo`, also transactional);
- a plain step appends to an *external* append-only sink (a folder outside the store) with
  `ctx.step_id` as idempotency key (the sink keeps the first entry per key, and counts every
  call so the test can see that duplicates did reach it); its compensation appends `<key>:undo`;
- `ctx.now()`, `ctx.uuid4()` and `ctx.random()` go into the sink entry and the output.

Faults: crashes at every step boundary (runtime and step points), duplicate and concurrent
duplicate deliveries, delayed/reordered deliveries, slow concurrent duplicates (held back
until the rest of the workflow moved on) and, after the run, a late duplicate of every delivery.
Checks: the counter is exactly the number of step executions of one fault-free run; the sink
holds exactly one entry per step, whose recorded non-determinism equals what the workflow
output carries; on abort (ctx.abort or a handler that keeps failing) the counter is back to 0,
every sink entry has one undo, and the undo order is the reverse completion order; the late
duplicates change nothing (no sink call, no creation, same records and application items); no
key is ever created twice; what stays is only retained kinds (checkpoints, sets, step records,
the compensation log, the result or the failure), each with an expiry between the workflow's
deadline and now + TTL, and no step record outside the run's steps.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from builder.local_stack.process import MotoServer
from tests.support.expiry import ttl_from_now
from tests.support.faulty_platform import FaultyPlatform
from tests.support.faulty_store import FaultyStore, StoreWrapper
from tests.support.tracing import CommitWatch, retention_violations, store_snapshot
from unum_entry import naming, steps
from unum_entry.codec import decode, encode
from unum_entry.envelope import Envelope, Frame
from unum_entry.hooks import FaultPoint, StepPoint
from unum_entry.local.faults import FaultInjector, FaultRates
from unum_entry.runtime import Runtime
from unum_entry.handlers import load_handler
from unum_entry.steps import StepsLayer, compensation_request
from unum_entry.stores import open_store
from unum_entry.stores.base import Kind
from unum_entry.stores.file import FileStore
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.integration

PRELUDE = '''
import json, os, threading
from unum_entry.steps import durable

_lock = threading.Lock()


def inc(tx, run, who):
    """The transactional effect: counter += 1 (returns the new value)."""
    n = tx.get("counters", run, 0) + 1
    tx.put("counters", run, n)
    return n


def dec(tx, after, run, who):
    """Compensation of inc: counter -= 1 and append `who` to the ordered undo log."""
    tx.put("counters", run, tx.get("counters", run) - 1)
    head = tx.get("undo", run + ":head", 0)
    tx.put("undo", f"{run}:{head}", who + "/inc")
    tx.put("undo", run + ":head", head + 1)


def sink_append(sink, key, entry):
    """An outside service that deduplicates by idempotency key (first entry per key wins)."""
    with _lock, open(os.path.join(sink, "calls"), "a") as calls:
        calls.write(key + "\\n")
    try:
        fd = os.open(os.path.join(sink, "entries", key.replace("/", "_")), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return key
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(entry))
    return key


def sink_undo(key, sink, who):
    """Compensation of the sink append: an undo entry under its own key."""
    sink_append(sink, key + ":undo", {"undo": who})


def effects(event, ctx, who):
    run, sink = event["run"], event["sink"]
    ctx.transact("inc", inc, run, who, compensate=dec)
    seen = {"t": ctx.now(), "u": ctx.uuid4(), "r": ctx.random()}
    ctx.step("log", lambda sink, who: sink_append(sink, ctx.step_id, {"who": who, **seen}),
             compensate=sink_undo, sink=sink, who=who)
    return seen
'''

FUNCTIONS = {
    "A": ("return {**event, 'items': [0, 1, 2], 'seen': {'A': effects(event, ctx, 'A')}}",
          [{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "W", "items": "$.items"}]),
    "W": ("return {'i': event, 'seen': effects(CTX_EVENT, ctx, f'W{ctx.index}')}",
          [{"op": "fan_in", "function": "Sum"}]),
    "Sum": ("return {'ws': event, 'seen': effects(CTX_EVENT, ctx, 'Sum')}",
            [{"op": "invoke", "function": "End"}]),
    "End": ("seen = effects(CTX_EVENT, ctx, 'End')\n"
            "    if CTX_EVENT.get('abort') == 'abort':\n"
            "        ctx.abort('Declined', 'the test said so')\n"
            "    if CTX_EVENT.get('abort') == 'raise':\n"
            "        raise RuntimeError('End keeps failing')\n"
            "    return {'ws': event['ws'], 'sum': event['seen'], 'end': seen}", []),
}
STEP_FUNCTIONS = ["A", "W0", "W1", "W2", "Sum", "End"]


def write_ledger(root: Path, run_config: dict) -> object:
    """The ledger workflow; `run_config` (run id, sink, abort mode) is baked into the code as
    CTX_EVENT for the functions whose input is another function's output."""
    sources = {}
    for name, (body, instructions) in FUNCTIONS.items():
        code = (PRELUDE + f"\nCTX_EVENT = {run_config!r}\n\n@durable\ndef handler(event, ctx):\n    {body}\n")
        sources[name] = FunctionSource(code, instructions, {"max_attempts": 2} if name == "End" else {})
    return write_workflow(root, name="ledger", entry="A", functions=sources)


def make_sink(root: Path) -> Path:
    (root / "entries").mkdir(parents=True)
    (root / "calls").write_text("")
    return root


def sink_entries(sink: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in (sink / "entries").iterdir()}


STEP_RATES = {**{p: 0.15 for p in FaultPoint}, **{p: 0.2 for p in StepPoint}}
SCHEDULES = [
    FaultRates(crash=STEP_RATES, duplicate=0.2, concurrent_duplicate=0.15, delay=0.2, max_crashes=25,
               late_duplicate=1.0),
    FaultRates(crash={p: 0.35 for p in StepPoint}, concurrent_duplicate=0.3, max_crashes=25, slow_duplicate=0.3),
    FaultRates(duplicate=0.5, concurrent_duplicate=0.4, delay=0.5, slow_duplicate=0.3, late_duplicate=1.0),
]
# What a ledger run leaves until its expiry (nothing is deleted before it).
LEDGER_KINDS = frozenset({Kind.RESULT, Kind.FAILURE, Kind.CHECKPOINT, Kind.SET, Kind.STEP, Kind.COMPENSATION,
                          Kind.CHUNK})
STEPS_PER_FUNCTION = 5  # inc, now, uuid4, random, log
COMPENSATED_STEPS = 2 * len(STEP_FUNCTIONS)  # inc and log of each function


def step_keys(workflow_id: str) -> set[str]:
    """Every step record a ledger run may write: the steps of its six invocations, and each
    compensation's own step and "passed on" marker (steps.advance)."""
    root = (Frame(),)
    invocations = [naming.checkpoint_key(workflow_id, "A", root), naming.checkpoint_key(workflow_id, "Sum", root),
                   naming.checkpoint_key(workflow_id, "End", root),
                   *(naming.checkpoint_key(workflow_id, "W", root + (Frame(i, 3, 0),)) for i in range(3))]
    keys = {naming.step_key(inv, seq) for inv in invocations for seq in range(STEPS_PER_FUNCTION)}
    return keys | {naming.step_key(naming.compensation_invocation(workflow_id, i), seq)
                   for i in range(COMPENSATED_STEPS) for seq in (0, 1)}


def run_ledger(tmp: Path, store, seed: int, rates: FaultRates, abort: str | None) -> dict:
    """One faulty run of the ledger workflow (then, if the rates ask for it, a late duplicate of
    every delivery) and every check; returns fault counts."""
    run = f"run-{seed}-{uuid.uuid4().hex[:6]}"
    sink = make_sink(tmp / f"sink-{run}")
    workflow = write_ledger(tmp / f"wf-{run}", {"run": run, "sink": str(sink), "abort": abort})
    watch = CommitWatch(store)
    faults = FaultInjector(rates, seed)
    served = FaultyStore(watch, faults) if rates.store_error else watch
    started = time.time()
    platform = FaultyPlatform(workflow, served, workers=4, faults=faults)
    try:
        outcome = platform.run({"run": run, "sink": str(sink)}, timeout=90)
        assert not platform.dead_letters, platform.dead_letters
        if rates.late_duplicate:
            # Every delivery again, after the end: no new effect, nothing created, nothing changed.
            before = (store_snapshot(store, outcome.workflow_id), (sink / "calls").read_text(), sink_entries(sink),
                      store.app_read("counters", [run]), store.app_read("undo", [f"{run}:{i}" for i in range(12)]))
            watch.freeze()
            platform.redeliver_late()
            platform.wait_idle(90)
            assert not platform.dead_letters, platform.dead_letters
            again = platform.outcome(outcome.workflow_id)
            assert (again.results, again.failure) == (outcome.results, outcome.failure), "late duplicates changed the outcome"
            assert watch.late == [], f"late duplicates created objects: {watch.late}"
            after = (store_snapshot(store, outcome.workflow_id), (sink / "calls").read_text(), sink_entries(sink),
                     store.app_read("counters", [run]), store.app_read("undo", [f"{run}:{i}" for i in range(12)]))
            assert after[1] == before[1], "late duplicates called the outside service again"
            assert after == before, "late duplicates changed the store, the sink or the application tables"
    finally:
        platform.close()
    counter = store.app_read("counters", [run]).get(run)
    entries = sink_entries(sink)
    calls = (sink / "calls").read_text().split()
    injected = {**faults.injected, "sink_calls": len(calls), "held_back": len(platform.held_back)}
    if abort is None:
        assert outcome.failure is None, outcome.failure
    else:
        assert outcome.failure is not None and outcome.results == []
        assert outcome.failure["Error"] == ("Declined" if abort == "abort" else "RuntimeError"), outcome.failure
    # Nothing is deleted before its expiry, so no key is ever created twice; what stays is the
    # retained kinds, each expiring between the workflow's deadline and now + TTL.
    assert watch.recommits == [], f"keys created more than once: {watch.recommits}"
    assert retention_violations(store, outcome.workflow_id, started_at=started, kinds=LEDGER_KINDS) == []
    records = list(store.records(outcome.workflow_id))
    kinds = sorted(r.kind.value for r in records)
    stray = {r.key for r in records if r.kind is Kind.STEP} - step_keys(outcome.workflow_id)
    assert not stray, f"step records of no step of the run: {sorted(stray)}"
    assert kinds.count("compensation") == COMPENSATED_STEPS, kinds  # the log stays, also on success
    if abort is None:
        assert "failure" not in kinds, kinds
        result = outcome.result
        assert decode(counter.value) == len(STEP_FUNCTIONS)
        assert len(entries) == len(STEP_FUNCTIONS), sorted(entries)
        # What the workflow returned is what the sink recorded: recorded non-determinism.
        by_who = {e["who"]: e for e in entries.values()}
        seen = {"End": result["end"], "Sum": result["sum"],
                **{f"W{w['i']}": w["seen"] for w in result["ws"]}}
        for who, values in seen.items():
            assert {k: by_who[who][k] for k in ("t", "u", "r")} == values, who
        return injected
    assert decode(counter.value) == 0, decode(counter.value)
    undone = {k for k in entries if k.endswith(":undo")}
    assert len(entries) == 2 * len(STEP_FUNCTIONS), sorted(entries)
    assert {k + ":undo" for k in entries if not k.endswith(":undo")} == undone
    order = [decode(v.value) for _, v in sorted(
        ((int(k.rsplit(":", 1)[1]), v) for k, v in store.app_read("undo", [f"{run}:{i}" for i in range(12)]).items()))]
    assert len(order) == len(STEP_FUNCTIONS)
    rank = {"A": 0, "W0": 1, "W1": 1, "W2": 1, "Sum": 2, "End": 3}
    ranks = [rank[who.split("/")[0]] for who in order]
    assert ranks == sorted(ranks, reverse=True), f"compensations not in reverse completion order: {order}"
    assert kinds.count("failure") == 1 and "result" not in kinds, kinds
    return injected


@pytest.fixture(scope="module")
def serial_moto() -> Iterator[str]:
    """A moto server that handles one request at a time (builder/local_stack/moto_serialized.py): moto's
    threaded server applies a failing TransactWriteItems and an item-creating UpdateItem in
    unlocked steps, behaviour real DynamoDB never shows; concurrency stays on the client side."""
    with MotoServer(serialized=True) as moto:
        yield moto.endpoint


@pytest.fixture(params=["file", "dynamodb"])
def ledger_store(request, tmp_path):
    if request.param == "file":
        yield FileStore(tmp_path / "store")
        return
    endpoint = request.getfixturevalue("serial_moto")
    store = open_store(f"dynamodb://unum-{uuid.uuid4().hex[:10]}?endpoint={endpoint}&create=1")
    for table in ("counters", "undo"):  # the application's own tables, next to unum's
        if table not in store.client.list_tables()["TableNames"]:
            store.client.create_table(TableName=table, KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                                      AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                                      BillingMode="PAY_PER_REQUEST")
    yield store
    store.close()


CI_SCHEDULES = {"file": 5, "dynamodb": 3}  # per abort mode; `--schedules N` for more


def run_ledger_schedules(tmp: Path, store, abort: str | None, schedules: int | None,
                         rates: list[FaultRates]) -> dict[str, int]:
    """`run_ledger` for seeds 0..n-1 (n: `--schedules`, else CI_SCHEDULES for the store), seed
    i under `rates[i % len(rates)]`; the faults injected, summed over the runs."""
    n = schedules or CI_SCHEDULES["file" if isinstance(store, FileStore) else "dynamodb"]
    totals: dict[str, int] = {}
    for seed in range(n):
        for key, count in run_ledger(tmp, store, seed, rates[seed % len(rates)], abort).items():
            totals[key] = totals.get(key, 0) + count
    print(f"\n[{type(store).__name__} abort={abort}] {totals}")
    return totals


@pytest.mark.parametrize("abort", [None, "abort", "raise"])
def test_ledger_under_fault_schedules(ledger_store, abort, tmp_path, schedules):
    totals = run_ledger_schedules(tmp_path, ledger_store, abort, schedules, SCHEDULES)
    assert totals.get("crash", 0) > 0
    assert any(k.startswith("crash:step_") for k in totals), totals


STORE_ERROR_SCHEDULES = [
    FaultRates(store_error=0.1, late_duplicate=1.0),
    FaultRates(store_error=0.15, store_error_modes=("after", "partial"), crash=STEP_RATES, max_crashes=10),
]


@pytest.mark.parametrize("abort", [None, "abort", "raise"])
def test_ledger_under_transient_store_errors(ledger_store, abort, tmp_path, schedules):
    """Store operations fail transiently (before, after they happened, half-way through a
    multi-key read), also inside steps: the delivery is redelivered, every effect still happens
    exactly once."""
    totals = run_ledger_schedules(tmp_path, ledger_store, abort, schedules, STORE_ERROR_SCHEDULES)
    assert totals.get("store_error", 0) > 0


def test_a_store_error_inside_a_step_is_redelivered_not_a_handler_failure(tmp_path):
    """The first three store operations fail before they happen; they are A's first step's
    reads, on each of its three attempts' worth of deliveries. A StoreError is transient: the
    platform must redeliver (the delivery policy), not count it as the handler's failure —
    three of them must not fail the workflow (A has max_attempts 3)."""
    rates = FaultRates(store_error=1.0, store_error_modes=("before",), max_store_errors=3)
    injected = run_ledger(tmp_path, FileStore(tmp_path / "store"), 0, rates, None)
    assert injected["store_error"] == 3


@pytest.mark.parametrize("point", list(StepPoint), ids=lambda p: p.value)
def test_crash_at_every_step_point(point, tmp_path):
    """Deterministic: the first three times each step point is reached, the execution dies."""
    store = FileStore(tmp_path / "store")
    abort = "abort" if point is StepPoint.BEFORE_COMPENSATE else None
    injected = run_ledger(tmp_path, store, 5, FaultRates(crash={point: 1.0}, max_crashes=3), abort)
    assert injected.get(f"crash:{point.value}", 0) >= 1, injected


def test_concurrent_executions_of_one_step_run_it_once(tmp_path):
    """Many threads run the same invocation's handler at once (no platform): one effect."""

    run = "race"
    sink = make_sink(tmp_path / "sink")
    workflow = write_ledger(tmp_path / "wf", {"run": run, "sink": str(sink), "abort": None})
    store = FileStore(tmp_path / "store")
    spec = workflow.functions["A"]
    calls: list = []

    class Invoker:
        def invoke(self, function, payload):
            calls.append(function)

    runtime = Runtime(spec.ir, load_handler(spec.folder, spec.ir.handler, function="A"), store, Invoker(),
                      layer=StepsLayer)
    env = Envelope.from_wire({"unum": 2, "workflow": "wf-race", "frames": [[0, 1, 0]],
                              "inputs": [{"value": {"run": run, "sink": str(sink)}}], "start": True})
    barrier = threading.Barrier(8)

    def go(_):
        barrier.wait(timeout=30)
        return runtime.handle(env)

    try:
        with ThreadPoolExecutor(8) as pool:
            reports = list(pool.map(go, range(8)))
    finally:
        runtime.close()
    assert decode(store.app_read("counters", [run])[run].value) == 1
    assert len(sink_entries(sink)) == 1
    assert len({json.dumps(r.value, sort_keys=True) for r in reports if r is not None}) == 1
    assert os.path.getsize(sink / "calls") > 0


def test_a_compensation_entry_a_committed_execution_relies_on_is_never_deleted(tmp_path):
    """Two executions of one invocation register the same step's compensation: X appends the
    entry; Y (a concurrent duplicate) finds it, commits and ends the workflow; only then does X
    read the outcome. The entry must stay: nothing is deleted by the runtime before its expiry,
    and Y's commit relied on it (the schedule the ledger suite hits with concurrent duplicates
    of End)."""
    store = FileStore(tmp_path / "store")
    workflow = "wf-append-race"
    result, failure = naming.result_key(workflow, (Frame(),)), naming.failure_key(workflow)
    entry = encode({"f": "End", "i": "c-end", "s": 4, "e": "effect-1", "n": "log", "c": "sink_undo",
                    "a": [], "kw": {}, "r": None, "tx": False})

    class WorkflowEndsAfterTheCreate(StoreWrapper):
        """Right after X's create, before X reads the outcome: Y finds X's entry, commits, and the
        workflow's result is written."""

        def __init__(self, inner):
            super().__init__(inner)
            self.fired = False

        def get_many(self, keys):
            keys = list(keys)
            if keys == [failure, result] and not self.fired:
                self.fired = True
                assert steps.append_compensation(store, workflow, entry, "effect-1") == (0, False)  # Y: found
                store.create(result, encode({"at": [], "of": [], "value": "done"}), workflow=workflow,
                             kind=Kind.RESULT, expires_at=ttl_from_now(store))
            return super().get_many(keys)

    steps.append_compensation(WorkflowEndsAfterTheCreate(store), workflow, entry, "effect-1")  # X
    assert store.get(naming.compensation_key(workflow, 0)) is not None, (
        "the entry Y's committed execution registered was deleted by X")


def test_a_duplicate_that_runs_after_the_abort_keeps_the_reverse_order(tmp_path):
    """Compensations run in reverse completion order (docs/steps.md). Schedule: End aborts; at
    the moment its compensation chain starts, a duplicate of W0's delivery arrives (at-least-once
    delivery: it may), and the chain's deliveries are slower than it. The duplicate finds its
    steps recorded and its log entry present, sees the failure record and compensates its own
    step at once — before End's, Sum's, W2's and W1's, which completed after it."""
    run = "dup-after-abort"
    sink = make_sink(tmp_path / "sink")
    workflow = write_ledger(tmp_path / "wf", {"run": run, "sink": str(sink), "abort": "abort"})
    store = FileStore(tmp_path / "store")

    class DuplicateOnAbort(FaultyPlatform):
        fired = False

        def submit(self, function, payload, *, delay=0.0):
            request = compensation_request(Envelope.from_wire(payload))
            if request is not None:
                if not self.fired:
                    self.fired = True
                    w0 = next(decode(data) for fn, data in self.accepted
                              if fn == "W" and decode(data)["frames"][-1][0] == 0)
                    super().submit("W", w0)  # the duplicate arrives as the chain starts
                if not request.index == request.stop == request.top:
                    delay = max(delay, 0.1)  # the chain's deliveries come later
            super().submit(function, payload, delay=delay)

    platform = DuplicateOnAbort(workflow, store, workers=4, faults=FaultInjector(FaultRates(), 0))
    try:
        outcome = platform.run({"run": run, "sink": str(sink)}, timeout=60)
    finally:
        platform.close()
    assert outcome.failure is not None and outcome.failure["Error"] == "Declined"
    assert decode(store.app_read("counters", [run])[run].value) == 0
    order = [decode(v.value) for _, v in sorted(
        ((int(k.rsplit(":", 1)[1]), v) for k, v in store.app_read("undo", [f"{run}:{i}" for i in range(12)]).items()))]
    rank = {"A": 0, "W0": 1, "W1": 1, "W2": 1, "Sum": 2, "End": 3}
    ranks = [rank[who.split("/")[0]] for who in order]
    assert ranks == sorted(ranks, reverse=True), f"compensations not in reverse completion order: {order}"
