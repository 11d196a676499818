"""A fan-in branch's checkpoint and its join's first set add in one write where the store can
(`Store.create_joining`: the memory and SQLite stores), as two elsewhere (every wrapper, the
cloud stores): the same result either way, one store write per branch fewer. On SQLite a
worker's batch of branches commits in one write (`Store.create_joining_many`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.maps import map_sum
from unum_entry.local.platform import LocalPlatform
from unum_entry.stores.base import Store
from unum_entry.stores.counting import CountingStore
from unum_entry.stores.memory import MemoryStore
from unum_entry.stores.sqlite import SQLiteStore
from unum_entry.workflow import write_workflow

pytestmark = pytest.mark.unit

WIDTH = 40  # three leaf shards of 16, 16 and 8 slots, then their parent shard

MAP = map_sum(WIDTH)


def counted(store: Store, calls: Counter[str]) -> Store:
    """`store` with its create, create-and-add and add primitives counted (a batch of
    creates-and-adds: as one call of `_create_joining_many`, and each of its items as a
    `_create_joining`; a batch of adds as one call of `_add_to_set_many`, and each of its items
    as an `_add_to_set`)."""
    for name in ("_create", "_create_joining", "_add_to_set", "_create_joining_many", "_add_to_set_many"):
        original = getattr(store, name)
        items = {"_create_joining_many": "_create_joining", "_add_to_set_many": "_add_to_set"}

        def counting(*args: Any, _name: str = name, _original: Any = original) -> Any:
            calls[_name] += 1
            if _name in items:
                calls[items[_name]] += len(args[0])
            return _original(*args)

        setattr(store, name, counting)
    return store


def run_map(tmp_path: Path, store: Store, workers: int = 2) -> Any:
    workflow = write_workflow(tmp_path / "wf", name="map", entry="Split", functions=MAP)
    with LocalPlatform(workflow, store, workers=workers) as platform:
        return platform.run(None, timeout=60)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_each_branch_commits_its_checkpoint_and_its_leaf_add_in_one_write(tmp_path: Path, kind: str) -> None:
    calls: Counter[str] = Counter()
    store = counted(MemoryStore() if kind == "memory" else SQLiteStore.open(tmp_path / "unum.db"), calls)
    outcome = run_map(tmp_path, store)
    store.close()
    assert outcome.failure is None and outcome.result == sum(2 * i for i in range(WIDTH))
    assert calls["_create_joining"] == WIDTH  # each branch: its checkpoint and its leaf add
    assert calls["_add_to_set"] == 3  # only the parent shard's adds, one per leaf that filled
    if kind == "memory":
        assert calls["_create_joining_many"] == 0  # nothing to gain from batches: one lock per write
        assert calls["_add_to_set_many"] == 0


def test_a_store_that_cannot_makes_them_as_two_writes_with_the_same_result(tmp_path: Path) -> None:
    inner: Counter[str] = Counter()
    store = CountingStore(counted(MemoryStore(), inner))  # a wrapper: `create`, then `add_to_set`
    outcome = run_map(tmp_path, store)
    assert outcome.failure is None and outcome.result == sum(2 * i for i in range(WIDTH))
    assert inner["_create_joining"] == 0 and inner["_add_to_set"] == WIDTH + 3


def test_a_batch_of_branches_makes_the_next_level_adds_of_the_leaves_it_filled_in_one_write(tmp_path: Path) -> None:
    """On SQLite a worker's batch of branches commits together (`create_joining_many`), and the
    branches whose leaf add filled their shard make their adds to the parent shard together
    too (`Runtime._next_adds`, `Store.add_to_set_many`): the same adds, fewer writes."""
    calls: Counter[str] = Counter()
    store = counted(SQLiteStore.open(tmp_path / "unum.db"), calls)
    for attempt in range(5):  # (a worker batches once its deliveries have proven quick)
        calls.clear()
        outcome = run_map(tmp_path / str(attempt), store, workers=1)
        assert outcome.failure is None and outcome.result == sum(2 * i for i in range(WIDTH))
        assert calls["_add_to_set"] == 3  # one per leaf that filled, however made
        if calls["_add_to_set_many"]:
            break
    store.close()
    assert calls["_add_to_set_many"] >= 1 and calls["_add_to_set_many"] < 3, calls


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_joining_create_upserts_the_set_its_own_add_names(tmp_path: Path, kind: str) -> None:
    """The store builds a shard's record once for the branches that join it in a row
    (`Store._joining_records`): a create that names another set, size, workflow or expiry
    creates that set, and a bad add is refused as ever, after a good one to the same shard."""
    from unum_entry.errors import StoreMisuse
    from unum_entry.stores.base import Kind, SetAdd

    store = MemoryStore() if kind == "memory" else SQLiteStore.open(tmp_path / "s.db")
    t = 2_000_000_000
    joins = [("c-1", "wf", SetAdd("s-1", 0, "c-1", 2, t)), ("c-2", "wf", SetAdd("s-1", 1, "c-2", 2, t)),
             ("c-3", "wf", SetAdd("s-2", 0, "c-3", 3, t)), ("c-4", "wf", SetAdd("s-3", 0, "c-4", 3, t)),
             ("c-5", "wf", SetAdd("s-4", 0, "c-5", 3, t + 1)), ("c-6", "wf-b", SetAdd("s-5", 0, "c-6", 3, t + 1)),
             ("c-7", "wf-b", SetAdd("s-6", 0, "c-7", 4, t + 1))]
    for key, workflow, join in joins:
        assert store.create_joining(key, b"v", workflow=workflow, expires_at=t, join=join)[1]
    sets = {r.key: (r.workflow, r.size, r.expires_at, dict(r.members)) for r in store.records() if r.kind is Kind.SET}
    assert sets == {"s-1": ("wf", 2, t, {0: "c-1", 1: "c-2"}), "s-2": ("wf", 3, t, {0: "c-3"}),
                    "s-3": ("wf", 3, t, {0: "c-4"}), "s-4": ("wf", 3, t + 1, {0: "c-5"}),
                    "s-5": ("wf-b", 3, t + 1, {0: "c-6"}), "s-6": ("wf-b", 4, t + 1, {0: "c-7"})}
    store.create_joining("c-9", b"v", workflow="wf-b", expires_at=t, join=SetAdd("s-7", 0, "c-9", 4, 1))
    for bad in (SetAdd("s-7", -1, "c-8", 4, 1), SetAdd("s-7", 1, "c-8", 0, 1),
                SetAdd("s-7", 1, "c-8", 4, True)):  # type: ignore[arg-type]  # (True == 1: no expiry)
        with pytest.raises(StoreMisuse):
            store.create_joining("c-8", b"v", workflow="wf-b", expires_at=t, join=bad)
    assert "c-8" not in {r.key for r in store.records()}
