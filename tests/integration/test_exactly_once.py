"""The exactly-once suite: random fault schedules over every workflow shape, on the file store
and on DynamoDB (moto server over HTTP).

Each schedule: run a tracing workflow (random outputs, random control flow) on the local
platform with a seeded FaultInjector (crashes at every step boundary, duplicate and concurrent
duplicate deliveries, delayed/reordered deliveries), then
- check_exactly_once: the results equal one fault-free run in which every consumer saw the same
  output of each node (replayed with an oracle, see tests/support/tracing.py);
- nothing but the results is left in the store.

`--schedules N` sets the number of schedules per store (CI runs the defaults below).
"""

from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.tracing import NESTED_RESULTS_ONLY, SHAPES, ExecutionLog, RecommitWatch, check_exactly_once, leftovers, write_shape
from unum_entry.hooks import FaultPoint
from unum_entry.local.faults import FaultInjector, FaultRates
from unum_entry.local.platform import LocalPlatform
from unum_entry.runtime import RuntimeConfig
from unum_entry.stores import open_store
from unum_entry.stores.file import FileStore

pytestmark = pytest.mark.integration

CI_SCHEDULES = {"file": 120, "dynamodb": 30}


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("shapes")
    return {name: write_shape(root, name) for name in SHAPES}


@pytest.fixture(params=["file", "dynamodb"])
def store_factory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A callable making a fresh, empty store of the parametrized kind."""
    if request.param == "file":
        yield "file", lambda: FileStore(tmp_path_factory.mktemp("store"))
        return
    server = request.getfixturevalue("moto_server")
    tables: list = []

    def make():
        store = open_store(f"dynamodb://unum-{uuid.uuid4().hex[:12]}?endpoint={server.endpoint}&create=1")
        tables.append(store)
        return store

    yield "dynamodb", make
    for store in tables:
        store.close()


def run_schedule(workflow, store, seed: int, rates: FaultRates, replay_store, config: RuntimeConfig | None = None) -> dict:
    """One faulty run and its checks; returns the injected fault counts."""
    store = RecommitWatch(store)
    log = ExecutionLog()
    faults = FaultInjector(rates, seed)
    input_value = {"v": {"seed": seed}, "t": {}}  # traced like every other value
    with_platform = LocalPlatform(workflow, store, workers=4, faults=faults, wrap=log.wrap, config=config)
    try:
        outcome = with_platform.run(input_value, timeout=60)
        assert not with_platform.dead_letters, with_platform.dead_letters
    finally:
        with_platform.close()
    check_exactly_once(workflow, outcome, log, input_value, replay_store)
    left = leftovers(store, outcome.workflow_id, allow_start_marker=workflow.name in NESTED_RESULTS_ONLY)
    injected = dict(faults.injected)
    if store.recommits:
        # A duplicate re-ran an invocation after its checkpoint was collected (README:
        # "Garbage"): its results are checked like any other; what it leaves is TTL-bounded.
        injected["late_rerun_schedules"] = 1
        injected["late_rerun_leftovers"] = len(left)
        assert all(r.expires_at > 0 for r in store.records(outcome.workflow_id))
    elif store.recreated_sets:
        # Only the sets a racing origin replay re-created after their consumption (README:
        # the zombie-set race) may be left, each with its TTL; anything else is a GC bug.
        injected["zombie_set_schedules"] = 1
        records = {r.key: r for r in store.records(outcome.workflow_id)}
        left_keys = {entry.split(" ", 1)[1] for entry in left}
        assert left_keys <= store.recreated_sets, f"garbage left after the workflow finished: {left}"
        assert all(records[key].expires_at > 0 for key in left_keys)
    else:
        assert left == [], "garbage left after the workflow finished"
    return injected


RATES = st.sampled_from([
    FaultRates.everything(0.1),
    FaultRates.everything(0.25),
    FaultRates(crash={p: 0.3 for p in FaultPoint}),
    FaultRates(duplicate=0.5, concurrent_duplicate=0.3, delay=0.5),
])


def run_random_schedules(kind: str, shapes, store, n: int, tmp_path_factory) -> None:
    """`n` hypothesis-drawn (shape, seed, fault rates) schedules on `store`, each checked by
    `run_schedule`; prints the injected fault totals and requires that faults were injected."""
    totals: dict[str, int] = {}

    @settings(max_examples=n, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(shape=st.sampled_from(sorted(shapes)), seed=st.integers(0, 2**32 - 1), rates=RATES)
    def schedule(shape, seed, rates):
        injected = run_schedule(shapes[shape], store, seed, rates, FileStore(tmp_path_factory.mktemp("replay")))
        for key, count in itertools.chain(injected.items(), [("schedules", 1)]):
            totals[key] = totals.get(key, 0) + count

    schedule()
    print(f"\n[{kind}] fault schedules: {totals}")
    assert totals["schedules"] >= n
    assert totals.get("crash", 0) > 0 and totals.get("duplicate", 0) > 0


def test_random_fault_schedules(shapes, store_factory, schedules, tmp_path_factory):
    kind, make_store = store_factory
    run_random_schedules(kind, shapes, make_store(), schedules or CI_SCHEDULES[kind], tmp_path_factory)


@pytest.mark.parametrize("point", list(FaultPoint), ids=lambda p: p.value)
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_crash_at_every_point(shapes, shape, point, tmp_path):
    """Deterministic coverage: the first three times each point is reached, the execution dies."""
    rates = FaultRates(crash={point: 1.0}, max_crashes=3)
    injected = run_schedule(shapes[shape], FileStore(tmp_path / "s"), seed=7, rates=rates,
                            replay_store=FileStore(tmp_path / "r"))
    assert injected.get(f"crash:{point.value}", 0) >= 1


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_late_duplicates_of_every_delivery(shapes, shape, tmp_path):
    """Every invoke is delivered again long after the original finished (delayed duplicate)."""
    rates = FaultRates(duplicate=1.0, max_delay=0.01)
    injected = run_schedule(shapes[shape], FileStore(tmp_path / "s"), seed=11, rates=rates,
                            replay_store=FileStore(tmp_path / "r"))
    assert injected["duplicate"] >= 1


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_everything_by_reference_under_faults(shapes, shape, tmp_path):
    """inline_limit=0: every value travels as a reference to its producer's checkpoint (the
    plan's choice is unit-tested; this checks exactly-once and GC hold when inputs are read)."""
    injected = run_schedule(shapes[shape], FileStore(tmp_path / "s"), seed=3, rates=FaultRates.everything(0.2),
                            replay_store=FileStore(tmp_path / "r"), config=RuntimeConfig(inline_limit=0))
    assert injected.get("crash", 0) > 0


def test_shapes_cover_every_pattern():
    ops = {ins["op"] for _, fns in SHAPES.values() for fn in fns.values() for ins in fn.instructions}
    shapes_of_fan_in = {ins.get("shape", "aggregate") for _, fns in SHAPES.values() for fn in fns.values()
                        for ins in fn.instructions if ins["op"] == "fan_in"}
    assert ops == {"invoke", "map", "fan_out", "fan_in", "create_set", "pop", "next"}
    assert shapes_of_fan_in == {"aggregate", "neighbour"}
