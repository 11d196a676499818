"""MemoryStore against the store contract (unum_entry.stores.base), briefly."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.expiry import ttl_from_now
from unum_entry.errors import StoreError, StoreMisuse
from unum_entry.stores.base import Kind, SetState
from unum_entry.stores.memory import MemoryStore

pytestmark = pytest.mark.unit


class Clock:
    """A settable clock for expiry tests."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_create_winner_and_loser() -> None:
    store = MemoryStore()
    assert store.create("c-1", b"first", workflow="wf", expires_at=ttl_from_now(store)) == (b"first", True)
    assert store.create("c-1", b"second", workflow="wf", expires_at=ttl_from_now(store)) == (b"first", False)
    assert store.get("c-1") == b"first"


def test_concurrent_creates_agree_on_one_winner() -> None:
    store = MemoryStore()
    barrier = threading.Barrier(8)
    results: list[tuple[bytes, bool]] = []

    def racer(i: int) -> None:
        barrier.wait()
        results.append(store.create("c-race", f"v{i}".encode(), workflow="wf", expires_at=ttl_from_now(store)))

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [value for value, created in results if created]
    assert len(winners) == 1 and {value for value, _ in results} == {winners[0]}


def add(store: MemoryStore, key: str, slot: int, member: str, size: int = 2, **kwargs) -> SetState:
    kwargs.setdefault("expires_at", ttl_from_now(store))
    return store.add_to_set(key, slot, member, size=size, workflow="wf", **kwargs)


def test_get_many_delete_and_recreate() -> None:
    store = MemoryStore()
    store.create("c-a", b"A", workflow="wf", expires_at=ttl_from_now(store))
    store.create("r-b", b"B", workflow="wf", kind=Kind.RESULT, expires_at=ttl_from_now(store))
    add(store, "s-c", 0, "x")
    assert store.get_many(["c-a", "r-b", "s-c", "c-missing", "c-a"]) == {"c-a": b"A", "r-b": b"B"}
    store.delete(["c-a", "c-missing", "s-c"])
    assert store.get("c-a") is None
    assert store.create("c-a", b"again", workflow="wf", expires_at=ttl_from_now(store)) == (b"again", True)
    assert add(store, "s-c", 1, "y") == SetState(size=2, members={1: "y"})  # a fresh set


def test_sets_are_upserted_idempotent_per_slot_and_report_full() -> None:
    store = MemoryStore()
    assert add(store, "s-1", 1, "b", size=3) == SetState(size=3, members={1: "b"})
    assert add(store, "s-1", 1, "other", size=3) == SetState(size=3, members={1: "b"})
    assert not add(store, "s-1", 5, "stray", size=3).full  # outside the set: stored, never counted
    add(store, "s-1", 0, "a", size=4)  # a later adder's size does not change the set
    state = add(store, "s-1", 2, "c", size=3)
    assert state.full and state.ordered_members() == ["a", "b", "c"]
    [record] = store.records("wf")
    assert record.kind is Kind.SET and record.size == 3 and dict(record.members)[0] == "a"


def test_returned_states_do_not_change_after_later_adds() -> None:
    store = MemoryStore()
    first = add(store, "s-1", 0, "a")
    add(store, "s-1", 1, "b")
    assert dict(first.members) == {0: "a"}


def test_values_and_sets_do_not_mix() -> None:
    store = MemoryStore()
    store.create("c-1", b"x", workflow="wf", expires_at=ttl_from_now(store))
    with pytest.raises(StoreError, match="not a set"):
        add(store, "c-1", 0, "a")
    add(store, "s-1", 0, "a", size=1)
    with pytest.raises(StoreMisuse):
        store.create("s-1", b"v", workflow="wf", expires_at=ttl_from_now(store))


def test_expired_objects_are_absent_recreated_and_swept() -> None:
    clock = Clock()
    store = MemoryStore(ttl_seconds=10, clock=clock)
    store.create("c-1", b"old", workflow="wf", expires_at=ttl_from_now(store))
    add(store, "s-1", 0, "old")
    store.create("c-long", b"kept", workflow="wf", expires_at=int(clock.now) + 100)
    clock.now += 11

    assert store.get("c-1") is None
    assert [record.key for record in store.records()] == ["c-long"]
    assert store.sweep() == 2
    assert store.create("c-1", b"new", workflow="wf", expires_at=ttl_from_now(store)) == (b"new", True)
    assert add(store, "s-1", 1, "new") == SetState(size=2, members={1: "new"})


def test_large_values_are_stored_by_reference_when_a_limit_is_set() -> None:
    store = MemoryStore()
    store.max_value_bytes = 200
    big = bytes(range(256)) * 2
    assert store.create("c-big", big, workflow="wf", expires_at=ttl_from_now(store)) == (big, True)
    assert store.get("c-big") == big
    kinds = sorted(record.kind.value for record in store.records())
    assert kinds == ["checkpoint"] + ["chunk"] * 3
