"""The exactly-once suite: random fault schedules over every workflow shape, on the file store
and on DynamoDB (moto server over HTTP).

DynamoDB runs on a moto server that applies one request at a time, as DynamoDB applies each
request atomically (builder/local_stack/moto_serialized.py). Each schedule runs a tracing workflow (random outputs, random control flow) on the local
platform with a seeded FaultInjector, which draws:
- crashes at every step boundary, duplicate and concurrent duplicate deliveries,
  delayed/reordered deliveries (the platform itself);
- slow concurrent duplicates: an extra copy of an invoke whose execution is held back, before or
  after its handler, until the rest of the workflow moved on (tests/support/faulty_platform.py);
- transient store errors on any operation: before it, after it happened (the write landed, the
  caller sees an error), or half-way through a multi-key read (tests/support/faulty_store.py);
- late duplicates: once the workflow finished, a copy of every delivery the platform ever
  accepted is delivered again.

Then it checks:
- check_exactly_once: the results equal one fault-free run in which every consumer saw the same
  output of each node (replayed with an oracle, see tests/support/tracing.py);
- check_checkpoints: the committed checkpoints are exactly that run's invocations, each holding
  the output its consumers saw, produced by one of its executions; every set shard is full;
- no key was ever created twice (CommitWatch): a second creation means a duplicate found an
  object gone — with retained checkpoints it must never happen;
- the late duplicates changed nothing: same results, no creation at all, the store's records
  identical (values, set members, expiries);
- what is left is only results, checkpoints, set shards (and chunks of large values), each
  expiring after the workflow's deadline and at most now + TTL.

`--schedules N` sets the number of schedules per store (CI runs the defaults below).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder.local_stack.process import MotoServer
from tests.support.faulty_platform import FaultyPlatform
from tests.support.faulty_store import FaultyStore, partial_batches, raw_records
from tests.support.tracing import (SHAPES, CommitWatch, ExecutionLog, check_checkpoints, check_exactly_once,
                                   retention_violations, store_snapshot, write_shape)
from unum_entry import fanin, naming
from unum_entry.errors import IRError, WorkflowTimeout
from unum_entry.hooks import FaultPoint
from unum_entry.ir import parse_ir
from unum_entry.local.faults import FaultInjector, FaultRates
from unum_entry.local.platform import LocalPlatform
from unum_entry.retention import Ledger, store_retention
from unum_entry.runtime import RuntimeConfig
from unum_entry.stores import open_store
from unum_entry.stores.base import Kind
from unum_entry.stores.file import FileStore
from unum_entry.stores.sqlite import SQLiteStore
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration

CI_SCHEDULES = {"sqlite": 60, "file": 120, "dynamodb": 30}

# A tracing workflow has no steps and succeeds: only these may stay until their expiry.
TRACING_KINDS = frozenset({Kind.RESULT, Kind.CHECKPOINT, Kind.SET, Kind.CHUNK})


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("shapes")
    return {name: write_shape(root, name) for name in SHAPES}


@pytest.fixture(scope="module")
def dynamodb_endpoint() -> Iterator[str]:
    """moto serving one request at a time (builder/local_stack/moto_serialized.py): DynamoDB applies each
    request atomically, moto's threaded server does not (concurrent set upserts that create their
    item lose members there, and a join then never completes)."""
    with MotoServer(serialized=True) as moto:
        yield moto.endpoint


@pytest.fixture(params=["sqlite", "file", "dynamodb"])
def store_factory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A callable making a fresh, empty store of the parametrized kind."""
    if request.param == "sqlite":  # run's default, durability full
        yield "sqlite", lambda: SQLiteStore.open(tmp_path_factory.mktemp("store") / "unum.db")
        return
    if request.param == "file":
        yield "file", lambda: FileStore(tmp_path_factory.mktemp("store"))
        return
    endpoint = request.getfixturevalue("dynamodb_endpoint")
    tables: list = []

    def make():
        store = open_store(f"dynamodb://unum-{uuid.uuid4().hex[:12]}?endpoint={endpoint}&create=1")
        tables.append(store)
        return store

    yield "dynamodb", make
    for store in tables:
        store.close()


def run_schedule(workflow, store, seed: int, rates: FaultRates, replay_store, config: RuntimeConfig | None = None) -> dict:
    """One faulty run (and, if the rates ask for them, its late duplicates) and every check;
    returns the injected fault counts."""
    watch = CommitWatch(store)
    faults = FaultInjector(rates, seed)
    served = FaultyStore(watch, faults) if rates.store_error else watch
    log = ExecutionLog()
    input_value = {"v": {"seed": seed}, "t": {}}  # traced like every other value
    started = time.time()
    platform = FaultyPlatform(workflow, served, workers=4, faults=faults, wrap=log.wrap, config=config)
    try:
        outcome, stats = _run_and_redeliver(platform, watch, store, input_value, late=bool(rates.late_duplicate),
                                            faults=faults)
    finally:
        platform.close()
    chosen = check_exactly_once(workflow, outcome, log, input_value, replay_store)
    check_checkpoints(store, outcome.workflow_id, chosen, log)
    assert watch.recommits == [], f"keys created more than once: {watch.recommits}"
    problems = retention_violations(store, outcome.workflow_id, started_at=started, kinds=TRACING_KINDS)
    assert problems == [], "\n".join(problems)
    injected = dict(faults.injected)
    injected["redeliveries"] = stats.get("redeliveries", 0)
    injected["handler_retries"] = stats.get("handler_retries", 0)
    injected["held_back"] = len(platform.held_back)
    injected["held_past_the_end"] = sum(1 for h in platform.held_back if h.past_the_end)
    return injected


def snapshot_diff(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    """What differs between two store snapshots, one line per key."""
    lines = [f"new {after[k][0].value} {k}" for k in sorted(set(after) - set(before))]
    lines += [f"gone {before[k][0].value} {k}" for k in sorted(set(before) - set(after))]
    for key in sorted(set(before) & set(after)):
        if before[key] != after[key]:
            changed = [f"{name} {b!r} -> {a!r}" for name, b, a in zip(("kind", "expires_at", "value", "size", "members"),
                                                                    before[key], after[key]) if a != b]
            lines.append(f"changed {before[key][0].value} {key}: " + "; ".join(c[:300] for c in changed))
    return lines


def retained(snapshot: dict[str, tuple]) -> dict[str, tuple]:
    """A store snapshot without chunk records: a duplicate whose value is stored by reference
    writes its chunks before its create loses, and leaves them as orphans until they expire
    (unum_entry.stores.base); every other record must stay exactly as it was."""
    return {key: entry for key, entry in snapshot.items() if entry[0] is not Kind.CHUNK}


def _run_and_redeliver(platform: FaultyPlatform, watch: CommitWatch, store, input_value, *, late: bool,
                       faults: FaultInjector):
    """Run the workflow; then, if `late`, deliver every accepted delivery again and check that
    nothing changed: same outcome, no creation, the very same records. DynamoDB's partial
    batches hit the deliveries only: a check's read giving up on them would fail the harness."""
    try:
        with partial_batches(store, faults):
            workflow_id = platform.start(input_value)
            platform.wait_idle(60)
    except WorkflowTimeout as exc:  # load, a delivery stuck in backoff, or a livelock: say which
        raise WorkflowTimeout(f"{exc}; {platform.in_flight()}") from exc
    outcome = platform.outcome(workflow_id)
    assert not platform.dead_letters, platform.dead_letters
    assert outcome.complete or outcome.failure is not None, (
        f"the workflow stalled: nothing in flight, results cover only part of it ({len(outcome.results)} "
        f"results; retained {outcome.pending}; platform {dict(platform.stats)})")
    if late:
        before = store_snapshot(store, outcome.workflow_id)
        watch.freeze()
        try:
            with partial_batches(store, faults):
                platform.redeliver_late()
                platform.wait_idle(60)
        except WorkflowTimeout as exc:
            raise WorkflowTimeout(f"late duplicates: {exc}; {platform.in_flight()}") from exc
        assert not platform.dead_letters, platform.dead_letters
        again = platform.outcome(outcome.workflow_id)
        assert (again.results, again.failure) == (outcome.results, outcome.failure), (
            f"late duplicates changed the outcome: {again.results!r}, failure {again.failure!r}")
        assert watch.late == [], f"late duplicates created objects: {watch.late}"
        after = retained(store_snapshot(store, outcome.workflow_id))
        assert after == retained(before), f"late duplicates changed the store: {snapshot_diff(retained(before), after)}"
    return outcome, dict(platform.stats)


def _all_new_kinds(rates: FaultRates, p: float) -> FaultRates:
    """`rates` plus every harness-driven kind at intensity `p`: slow duplicates, transient store
    errors, partial DynamoDB batches, handler errors, and a late copy of every delivery."""
    return replace(rates, slow_duplicate=max(rates.slow_duplicate, p), late_duplicate=1.0,
                   store_error=max(rates.store_error, p / 2), unprocessed=max(rates.unprocessed, p),
                   handler_error=max(rates.handler_error, p / 2))


# Every schedule draws every kind of fault; the mixes differ in which kind dominates.
RATE_MIXES = [
    FaultRates.all_kinds(0.1),
    FaultRates.all_kinds(0.2),
    FaultRates.all_kinds(0.3),
    _all_new_kinds(FaultRates(crash={p: 0.3 for p in FaultPoint}), 0.05),                      # crashes
    _all_new_kinds(FaultRates(duplicate=0.5, concurrent_duplicate=0.3, delay=0.5), 0.1),      # duplicates
    _all_new_kinds(FaultRates(slow_duplicate=0.6, max_slow_duplicates=5, concurrent_duplicate=0.3), 0.05),
    _all_new_kinds(FaultRates(store_error=0.3, store_error_modes=("after", "partial"), unprocessed=0.4,
                              crash={p: 0.1 for p in FaultPoint}), 0.05),                       # store trouble
]
RATES = st.sampled_from(RATE_MIXES)

NEW_KINDS = ("slow_duplicate", "late_duplicate", "store_error:before", "store_error:after", "store_error:partial",
             "handler_error")


def run_random_schedules(kind: str, shapes, store, n: int, tmp_path_factory) -> dict[str, int]:
    """`n` hypothesis-drawn (shape, seed, fault rates) schedules on `store`, each checked by
    `run_schedule`; prints the injected fault totals and requires that every kind of fault was
    injected."""
    totals: dict[str, int] = {}
    started = time.monotonic()

    @settings(max_examples=n, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(shape=st.sampled_from(sorted(shapes)), seed=st.integers(0, 2**32 - 1), rates=RATES)
    def schedule(shape, seed, rates):
        try:
            injected = run_schedule(shapes[shape], store, seed, rates, FileStore(tmp_path_factory.mktemp("replay")))
        except BaseException as exc:
            exc.add_note(f"[{kind}] schedule: shape={shape!r} seed={seed} rates={rates!r}")
            raise
        for key, count in itertools.chain(injected.items(), [("schedules", 1)]):
            totals[key] = totals.get(key, 0) + count

    schedule()
    summary = {k: totals[k] for k in sorted(totals) if k.count(":") < 2}
    print(f"\n[{kind}] {time.monotonic() - started:.0f} s, fault schedules: {summary}")
    assert totals["schedules"] >= n
    assert totals.get("crash", 0) > 0 and totals.get("duplicate", 0) > 0
    if n >= 30:  # enough draws for every kind to come up
        assert all(totals.get(k, 0) > 0 for k in NEW_KINDS), {k: totals.get(k, 0) for k in NEW_KINDS}
    return totals


def test_random_fault_schedules(shapes, store_factory, schedules, tmp_path_factory):
    kind, make_store = store_factory
    run_random_schedules(kind, shapes, make_store(), schedules or CI_SCHEDULES[kind], tmp_path_factory)


# Nothing is collected any more, so the runtime never reaches "before_gc".
REACHED_POINTS = [p for p in FaultPoint if p.value != "before_gc"]


@pytest.mark.parametrize("point", REACHED_POINTS, ids=lambda p: p.value)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_crash_at_every_point(shapes, shape, point, tmp_path):
    """Deterministic coverage: the first three times each point is reached, the execution dies."""
    rates = FaultRates(crash={point: 1.0}, max_crashes=3)
    injected = run_schedule(shapes[shape], FileStore(tmp_path / "s"), seed=7, rates=rates,
                            replay_store=FileStore(tmp_path / "r"))
    assert injected.get(f"crash:{point.value}", 0) >= 1


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_late_duplicates_of_every_delivery(shapes, shape, tmp_path):
    """Every delivery ever accepted is delivered again once the workflow finished (and each
    invoke also has a delayed duplicate during the run): nothing changes, nothing is created."""
    rates = FaultRates(duplicate=1.0, max_delay=0.01, late_duplicate=1.0)
    injected = run_schedule(shapes[shape], FileStore(tmp_path / "s"), seed=11, rates=rates,
                            replay_store=FileStore(tmp_path / "r"))
    assert injected["duplicate"] >= 1 and injected["late_duplicate"] >= 1


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_slow_concurrent_duplicates(shapes, shape, tmp_path):
    """Every invoke (up to the budget) gets a racing copy, one execution of which is held back
    until the rest of the workflow is done: it commits last and must change nothing."""
    rates = FaultRates(slow_duplicate=1.0, max_slow_duplicates=4, max_slow=0.5, late_duplicate=1.0)
    injected = run_schedule(shapes[shape], FileStore(tmp_path / "s"), seed=13, rates=rates,
                            replay_store=FileStore(tmp_path / "r"))
    assert injected["slow_duplicate"] >= 1 and injected["held_back"] >= 1


@pytest.mark.parametrize("mode", ["before", "after", "partial"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_transient_store_errors(shapes, shape, mode, tmp_path):
    """A third of all store operations fail: before they happen, after (the write landed, the
    caller saw an error), or half-way through a multi-key read; the platform redelivers."""
    rates = FaultRates(store_error=0.35, store_error_modes=(mode,), max_store_errors=25, late_duplicate=1.0)
    injected = run_schedule(shapes[shape], FileStore(tmp_path / "s"), seed=17, rates=rates,
                            replay_store=FileStore(tmp_path / "r"))
    assert injected["store_error"] >= 1 and injected["redeliveries"] >= 1


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_everything_by_reference_under_faults(shapes, shape, tmp_path):
    """inline_limit=0: every value travels as a reference to its producer's checkpoint (the
    plan's choice is unit-tested; this checks exactly-once when inputs are read), under every
    kind of fault."""
    # Which faults a seed injects depends on thread timing too (a short chain may draw no crash):
    # every schedule is checked in full, and more seeds run until one has injected a crash.
    crashes = 0
    for seed in range(3, 9):
        injected = run_schedule(shapes[shape], FileStore(tmp_path / f"s{seed}"), seed=seed,
                                rates=FaultRates.all_kinds(0.2), replay_store=FileStore(tmp_path / f"r{seed}"),
                                config=RuntimeConfig(inline_limit=0))
        crashes += injected.get("crash", 0)
        if crashes:
            break
    assert crashes > 0


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_late_duplicates_near_and_past_the_deadline(shapes, shape, tmp_path):
    """The retention rule at its edges, with a one-hour TTL and a clock the test moves. The
    workflow runs at t0; then a copy of every delivery it accepted arrives again one minute
    before its deadline (inside the margin: no execution may start), and again two hours after
    it — both well inside the redelivery window (6 h 15 min) of every delivery, so each may
    legitimately arrive then. A finished workflow must stay exactly as it was: same results, no
    failure record, nothing created, the same records."""
    t0 = time.time()
    now = [t0]
    store = FileStore(tmp_path / "s", ttl_seconds=3600, clock=lambda: now[0])
    watch = CommitWatch(store)
    faults = FaultInjector(FaultRates(late_duplicate=1.0), seed=19)
    log = ExecutionLog()
    input_value = {"v": {"seed": 19}, "t": {}}
    platform = FaultyPlatform(shapes[shape], watch, workers=4, faults=faults, wrap=log.wrap)
    try:
        outcome = platform.run(input_value, timeout=60)
        before = store_snapshot(store, outcome.workflow_id)
        watch.freeze()
        for late in (3600 - 60, 3 * 3600):
            now[0] = t0 + late
            platform.redeliver_late()
            platform.wait_idle(60)
            again = platform.outcome(outcome.workflow_id)
            assert again.failure is None, f"{late} s after the start: a finished workflow got a failure: {again.failure}"
            assert again.results == outcome.results
            assert watch.late == [], f"{late} s after the start: late duplicates created {watch.late}"
            assert store_snapshot(store, outcome.workflow_id) == before
    finally:
        platform.close()
    check_exactly_once(shapes[shape], outcome, log, input_value, FileStore(tmp_path / "r"))
    assert retention_violations(store, outcome.workflow_id, started_at=t0, kinds=TRACING_KINDS) == []


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_ingress_check_under_every_fault(shape, tmp_path):
    """Every function with `"ingress_check": true` (a duplicate reads the checkpoint and skips
    its handler), under every kind of fault."""
    workflow = write_shape(tmp_path / "wf", shape, ingress_check=True)
    injected = run_schedule(workflow, FileStore(tmp_path / "s"), seed=23, rates=FaultRates.all_kinds(0.2),
                            replay_store=FileStore(tmp_path / "r"))
    assert injected["late_duplicate"] >= 1


class _SmallItems(FileStore):
    """A file store whose records hold at most 256 bytes: the larger checkpoints and results
    (their traces grow with the workflow) are stored by reference — content-addressed chunks,
    then the record holding their manifest (at most 7 chunk keys fit in 256 bytes; the wide map's
    join output needs more, so it gets 512)."""

    max_value_bytes = 256


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_values_stored_by_reference_under_faults(shapes, shape, tmp_path):
    """Chunked values (a losing writer's chunks stay as orphans until they expire) under every
    kind of fault, store errors after a write included."""
    store = _SmallItems(tmp_path / "s")
    if shape == "wide-map":
        store.max_value_bytes = 512
    injected = run_schedule(shapes[shape], store, seed=29, rates=FaultRates.all_kinds(0.2),
                            replay_store=FileStore(tmp_path / "r"))
    assert injected["late_duplicate"] >= 1
    if shape in {"fan-out-fan-in", "neighbour", "nested-map", "wide-map"}:  # always some value over the limit
        assert any(r.kind is Kind.CHUNK for r in raw_records(store, next(iter(store.records())).workflow))


def test_a_three_level_join_under_faults(tmp_path):
    """257-300 branches join through three levels of shards (leaves, their parents, a root)
    while every kind of fault hits them; the target runs once, with every member in order."""
    workflow = write_shape(tmp_path / "wf", "three-level-map")
    rates = replace(FaultRates.all_kinds(0.05), max_crashes=60, max_store_errors=60, max_slow_duplicates=6)
    injected = run_schedule(workflow, FileStore(tmp_path / "s"), seed=31, rates=rates,
                            replay_store=FileStore(tmp_path / "r"))
    assert injected["crash"] >= 10 and injected["store_error"] >= 10


def test_shapes_cover_every_pattern():
    ops = {ins["op"] for _, fns in SHAPES.values() for fn in fns.values() for ins in fn.instructions}
    shapes_of_fan_in = {ins.get("shape", "aggregate") for _, fns in SHAPES.values() for fn in fns.values()
                        for ins in fn.instructions if ins["op"] == "fan_in"}
    assert ops == {"invoke", "map", "fan_out", "fan_in", "create_set", "pop", "next"}
    assert shapes_of_fan_in == {"aggregate", "neighbour"}


ATTEMPT_CONDITIONS = [
    {"Variable": "$$.Attempt", "NumericGreaterThan": 0},
    {"Not": {"Variable": "$$.Attempt", "NumericEquals": 0}},
    {"And": [{"Variable": "$.v", "IsPresent": True}, {"Variable": "$.x", "NumericLessThanPath": "$$.Attempt"}]},
]


@pytest.mark.parametrize("when", ATTEMPT_CONDITIONS)
def test_a_condition_over_the_attempt_is_refused_at_ir_load(when, tmp_path):
    """Egress decisions may depend only on committed output and the request's identity: two
    executions of one invocation have different attempt counts, so a condition over $$.Attempt
    could route them differently. Such an IR never loads (not as a document, not in a workflow)."""
    doc = {"unum_ir": 1, "function": "A", "handler": "app.handler",
           "instructions": [{"op": "invoke", "function": "B", "when": when}, {"op": "invoke", "function": "C"}]}
    with pytest.raises(IRError, match=r"\$\$\.Attempt") as refused:
        parse_ir(doc, source="a.json")
    assert refused.value.field.startswith("instructions[0].when")
    with pytest.raises(IRError, match=r"\$\$\.Attempt"):
        load_workflow(write_workflow(tmp_path / "wf", name="attempt", entry="A", functions={
            "A": FunctionSource("def handler(event, ctx):\n    return event\n", doc["instructions"]),
            "B": FunctionSource("def handler(event, ctx):\n    return event\n"),
            "C": FunctionSource("def handler(event, ctx):\n    return event\n"),
        }))


WIDE_JOIN_BRANCHES = 40  # three leaf shards (16 + 16 + 8) under a root of 3 slots


def _wide_join(root) -> object:
    """A → map W over 40 items → fan-in Sum, which has no instructions: its commit is the
    result record, so a duplicate cannot see it committed and every call of it gets through."""
    item = "def handler(event, ctx):\n    return event\n"
    return write_workflow(root / "wide-join", name="wide-join", entry="A", functions={
        "A": FunctionSource(f"def handler(event, ctx):\n    return list(range({WIDE_JOIN_BRANCHES}))\n",
                            [{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "W", "items": "$"}]),
        "W": FunctionSource(item, [{"op": "fan_in", "function": "Sum"}]),
        "Sum": FunctionSource("def handler(event, ctx):\n    return sum(event)\n"),
    })


def test_a_full_join_is_carried_on_by_one_branch_only(store_factory, tmp_path):
    """The wide-map WorkflowTimeout on DynamoDB (seed 757336232, mix 4): DynamoDB cannot tell
    which add completed a shard, and every later execution of *any* branch — each duplicate,
    retry and late copy — saw the shards full and invoked the target again (~440 deliveries of
    Sum for ~40 branches under mix 4, each reading every leaf shard: a 20x slower schedule).
    Now the completer claims the shard (unum_entry.fanin.CLAIM_SLOT): a late copy of every branch
    sends the target at most one more call (the completer's own copy), on every store."""
    kind, make_store = store_factory
    store = make_store()
    sent: Counter[str] = Counter()

    class Counting(LocalPlatform):
        def submit(self, function, payload, *, delay=0.0):
            sent[function] += 1
            super().submit(function, payload, delay=delay)

    workflow = _wide_join(tmp_path)
    with Counting(workflow, store, workers=4) as platform:
        accepted: list[tuple[str, dict]] = []
        submit = platform.submit

        def recorded(function, payload, *, delay=0.0):
            accepted.append((function, payload))
            submit(function, payload, delay=delay)

        platform.submit = recorded
        outcome = platform.run(None, timeout=60)
        assert outcome.result == sum(range(WIDE_JOIN_BRANCHES)), outcome
        assert sent["Sum"] == 1, sent
        branches = [payload for function, payload in accepted if function == "W"]
        assert len(branches) == WIDE_JOIN_BRANCHES
        sent.clear()
        for payload in branches:  # a late copy of every branch, after the end
            submit("W", payload)
        platform.wait_idle(60)
        assert platform.outcome(outcome.workflow_id).result == outcome.result
    assert sent["Sum"] <= 1, f"[{kind}] {sent['Sum']} calls of the target from {len(branches)} late branch copies"


def test_a_branch_duplicated_while_another_completes_the_shard(store_factory):
    """Branch q fills the last slot of a 2-wide join; before q's execution goes on, a duplicate
    of branch p (already joined) adds again and sees the set full too. Exactly one of them
    carries the join on — whichever the store names (the completer, or on DynamoDB the first
    claim) — and every retry of each (a crash anywhere, redelivered) decides the same."""

    kind, make_store = store_factory
    store = make_store()
    ledger = Ledger("wf-dup", int(time.time()) + 3600, store_retention(store))
    join = dict(workflow="wf-dup", expires_at=ledger.deadline)
    assert fanin.join(store, ledger, "set-dup", 2, 0, "member-p") is False   # p joins first
    store.add_to_set(naming.set_shard_key("set-dup", 0, 0), 1, "member-q", size=2, **join)  # q's add lands...
    p_again = fanin.join(store, ledger, "set-dup", 2, 0, "member-p")  # ...p's duplicate sees it full
    q = fanin.join(store, ledger, "set-dup", 2, 1, "member-q")        # q goes on
    assert [p_again, q].count(True) == 1, f"[{kind}] p's duplicate {p_again}, q {q}: exactly one carries on"
    for _ in range(2):  # retries after a crash at any point decide the same
        assert fanin.join(store, ledger, "set-dup", 2, 0, "member-p") is p_again
        assert fanin.join(store, ledger, "set-dup", 2, 1, "member-q") is q
