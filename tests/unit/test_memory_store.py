"""MemoryStore against the store contract (unum_entry.stores.base), briefly."""

from __future__ import annotations

import threading
import time

import pytest

from unum_entry.errors import SetGone, StoreError
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
    assert store.create("c-1", b"first", workflow="wf") == (b"first", True)
    assert store.create("c-1", b"second", workflow="wf") == (b"first", False)
    assert store.get("c-1") == b"first"


def test_concurrent_creates_agree_on_one_winner() -> None:
    store = MemoryStore()
    barrier = threading.Barrier(8)
    results: list[tuple[bytes, bool]] = []

    def racer(i: int) -> None:
        barrier.wait()
        results.append(store.create("c-race", f"v{i}".encode(), workflow="wf"))

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [value for value, created in results if created]
    assert len(winners) == 1 and {value for value, _ in results} == {winners[0]}


def test_get_many_delete_and_recreate() -> None:
    store = MemoryStore()
    store.create("c-a", b"A", workflow="wf")
    store.create("r-b", b"B", workflow="wf", kind=Kind.RESULT)
    store.create_set("s-c", 2, workflow="wf")
    assert store.get_many(["c-a", "r-b", "s-c", "c-missing", "c-a"]) == {"c-a": b"A", "r-b": b"B"}
    store.delete(["c-a", "c-missing", "s-c"])
    assert store.get("c-a") is None
    assert store.create("c-a", b"again", workflow="wf") == (b"again", True)
    assert store.create_set("s-c", 2, workflow="wf") is True


def test_sets_are_idempotent_per_slot_and_report_full() -> None:
    store = MemoryStore()
    assert store.create_set("s-1", 3, workflow="wf") is True
    assert store.create_set("s-1", 3, workflow="wf") is False
    assert store.add_to_set("s-1", 1, "b") == SetState(size=3, members={1: "b"})
    assert store.add_to_set("s-1", 1, "other") == SetState(size=3, members={1: "b"})
    assert not store.add_to_set("s-1", 5, "stray").full  # outside the set: stored, never counted
    store.add_to_set("s-1", 0, "a")
    state = store.add_to_set("s-1", 2, "c")
    assert state.full and state.ordered_members() == ["a", "b", "c"]
    [record] = store.records("wf")
    assert record.kind is Kind.SET and record.size == 3 and dict(record.members)[0] == "a"


def test_returned_states_do_not_change_after_later_adds() -> None:
    store = MemoryStore()
    store.create_set("s-1", 2, workflow="wf")
    first = store.add_to_set("s-1", 0, "a")
    store.add_to_set("s-1", 1, "b")
    assert dict(first.members) == {0: "a"}


def test_add_to_a_missing_or_deleted_set_raises_set_gone() -> None:
    store = MemoryStore()
    with pytest.raises(SetGone):
        store.add_to_set("s-never", 0, "a")
    store.create_set("s-1", 2, workflow="wf")
    store.delete(["s-1"])
    with pytest.raises(SetGone):
        store.add_to_set("s-1", 0, "a")


def test_values_and_sets_do_not_mix() -> None:
    store = MemoryStore()
    store.create("c-1", b"x", workflow="wf")
    with pytest.raises(StoreError):
        store.add_to_set("c-1", 0, "a")
    store.create_set("s-1", 1, workflow="wf")
    with pytest.raises(TypeError):
        store.create("s-1", b"v", workflow="wf")


def test_expired_objects_are_absent_and_can_be_created_again() -> None:
    clock = Clock()
    store = MemoryStore(ttl_seconds=10, clock=clock)
    store.create("c-1", b"old", workflow="wf")
    store.create_set("s-1", 2, workflow="wf")
    store.add_to_set("s-1", 0, "old")
    clock.now += 11

    assert store.get("c-1") is None
    assert list(store.records()) == []
    assert store.create("c-1", b"new", workflow="wf") == (b"new", True)
    with pytest.raises(SetGone):
        store.add_to_set("s-1", 1, "late")
    assert store.create_set("s-1", 2, workflow="wf") is True
    assert store.add_to_set("s-1", 1, "new") == SetState(size=2, members={1: "new"})
