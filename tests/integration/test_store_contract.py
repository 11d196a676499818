"""The store contract (`unum_entry.stores.base.Store`), one test per rule, run against every
backend: the embedded file store and DynamoDB (moto server over loopback HTTP)."""

from __future__ import annotations

import time

import pytest

from unum_entry.errors import SetGone
from unum_entry.stores import Kind, SetState, Store
from unum_entry.stores.dynamodb import DynamoDBStore
from unum_entry.stores.file import FileStore

pytestmark = pytest.mark.integration

THREADS = 16


@pytest.fixture(params=["file", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path) -> Store:
    if request.param == "file":
        file_store = FileStore(tmp_path / "store")
        request.addfinalizer(file_store.close)
        return file_store
    return request.getfixturevalue("dynamodb_store")


def reopen(store: Store, **kwargs) -> Store:
    """Another store over the same data (e.g. with a different clock)."""
    if isinstance(store, FileStore):
        return FileStore(store.root, **kwargs)
    if isinstance(store, DynamoDBStore):
        return DynamoDBStore(store.client, store.table, **kwargs)
    if hasattr(store, "reopen"):  # backends whose contract runs from elsewhere (tests/integration/gcp)
        return store.reopen(**kwargs)
    raise TypeError(f"no reopen for {type(store).__name__}")


def later(store: Store) -> Store:
    """The same data seen from after every object `store` writes now has expired."""
    return reopen(store, clock=lambda: time.time() + store.ttl_seconds + 60)


# ---- create / get ------------------------------------------------------------------------------

def test_create_if_absent_gives_the_winners_value_to_the_loser(store: Store) -> None:
    assert store.create("c-1", b"first", workflow="wf") == (b"first", True)
    assert store.create("c-1", b"second", workflow="wf") == (b"first", False)
    assert store.get("c-1") == b"first"


def test_concurrent_creates_of_one_key_agree_on_one_value(store: Store, race) -> None:
    results = race(THREADS, lambda i: store.create("c-race", f"value-{i}".encode(), workflow="wf"))

    winners = [value for value, created in results if created]
    assert len(winners) == 1
    assert {value for value, _ in results} == {winners[0]}
    assert store.get("c-race") == winners[0]


def test_get_and_get_many_leave_out_missing_keys(store: Store) -> None:
    store.create("c-a", b"A", workflow="wf")
    store.create("r-b", b"B", workflow="wf", kind=Kind.RESULT)
    store.create_set("s-c", 2, workflow="wf")

    assert store.get("c-a") == b"A"
    assert store.get("c-missing") is None
    assert store.get("s-c") is None  # a set has no value
    assert store.get_many(["c-a", "r-b", "c-missing", "c-a", "s-c"]) == {"c-a": b"A", "r-b": b"B"}
    assert store.get_many([]) == {}


def test_get_many_reads_more_keys_than_one_batch(store: Store) -> None:
    present = [f"c-{i:03d}" for i in range(230)]
    for key in present:
        store.create(key, key.encode(), workflow="wf")
    missing = [f"c-missing-{i}" for i in range(20)]

    assert store.get_many(present + missing) == {key: key.encode() for key in present}


# ---- delete --------------------------------------------------------------------------------------

def test_delete_many_keys_including_missing_ones(store: Store) -> None:
    keys = [f"c-{i:02d}" for i in range(60)]
    for key in keys:
        store.create(key, b"x", workflow="wf")
    store.create_set("s-1", 3, workflow="wf")
    store.create("c-keep", b"kept", workflow="wf")

    store.delete(keys + ["s-1"] + [f"c-never-{i}" for i in range(10)])
    store.delete(keys)  # again: deleting is idempotent
    store.delete([])

    assert store.get_many(keys) == {}
    assert store.get("c-keep") == b"kept"
    assert {record.key for record in store.records()} == {"c-keep"}
    with pytest.raises(SetGone):
        store.add_to_set("s-1", 0, "late")


def test_a_deleted_key_can_be_created_again(store: Store) -> None:
    store.create("c-1", b"old", workflow="wf")
    store.delete(["c-1"])
    assert store.create("c-1", b"new", workflow="wf") == (b"new", True)


# ---- sets ----------------------------------------------------------------------------------------

def test_create_set_only_once(store: Store) -> None:
    assert store.create_set("s-1", 3, workflow="wf") is True
    assert store.create_set("s-1", 3, workflow="wf") is False


def test_create_set_rejects_an_empty_set(store: Store) -> None:
    with pytest.raises(ValueError, match="size >= 1"):
        store.create_set("s-1", 0, workflow="wf")


def test_add_to_set_returns_the_set_after_the_add_and_is_idempotent_per_slot(store: Store) -> None:
    store.create_set("s-1", 3, workflow="wf")

    assert store.add_to_set("s-1", 1, "b") == SetState(size=3, members={1: "b"})
    assert store.add_to_set("s-1", 1, "b") == SetState(size=3, members={1: "b"})
    # A slot keeps its first member: a retry that computed another name changes nothing.
    assert store.add_to_set("s-1", 1, "b-again") == SetState(size=3, members={1: "b"})
    assert not store.add_to_set("s-1", 0, "a").full

    state = store.add_to_set("s-1", 2, "c")
    assert state.full
    assert state.ordered_members() == ["a", "b", "c"]
    assert store.add_to_set("s-1", 2, "c").full  # a retried last add still sees it full


def test_a_slot_outside_the_set_is_stored_but_never_counted(store: Store) -> None:
    store.create_set("s-1", 2, workflow="wf")

    state = store.add_to_set("s-1", 2, "stray")
    assert not state.has_slot(2) and not state.full

    store.add_to_set("s-1", 0, "a")
    state = store.add_to_set("s-1", 1, "b")
    assert state.has_slot(1) and state.full
    assert state.ordered_members() == ["a", "b"]


def test_concurrent_adds_of_distinct_slots_end_full(store: Store, race) -> None:
    store.create_set("s-fan", THREADS, workflow="wf")

    states = race(THREADS, lambda i: store.add_to_set("s-fan", i, f"m-{i}"))

    everyone = {i: f"m-{i}" for i in range(THREADS)}
    for i, state in enumerate(states):
        assert state.members[i] == f"m-{i}"  # every add sees its own member
        assert state.full == (dict(state.members) == everyone)
    assert any(state.full for state in states)  # the last adder(s) see it full
    final = store.add_to_set("s-fan", 0, "m-0")
    assert final.full and final.ordered_members() == [f"m-{i}" for i in range(THREADS)]


def test_add_to_a_set_that_does_not_exist_raises_set_gone(store: Store) -> None:
    with pytest.raises(SetGone):
        store.add_to_set("s-never", 0, "a")


def test_add_to_a_deleted_set_raises_set_gone(store: Store) -> None:
    store.create_set("s-1", 2, workflow="wf")
    store.add_to_set("s-1", 0, "a")
    store.delete(["s-1"])
    with pytest.raises(SetGone):
        store.add_to_set("s-1", 1, "b")


# ---- expiry --------------------------------------------------------------------------------------

def test_expired_values_read_as_absent_and_can_be_created_again(store: Store) -> None:
    store.create("c-1", b"old", workflow="wf")
    future = later(store)

    assert future.get("c-1") is None
    assert future.get_many(["c-1"]) == {}
    assert list(future.records()) == []
    assert future.create("c-1", b"new", workflow="wf") == (b"new", True)
    assert future.create("c-1", b"newer", workflow="wf") == (b"new", False)
    assert store.get("c-1") == b"new"


def test_expired_sets_can_be_created_again(store: Store) -> None:
    store.create_set("s-1", 2, workflow="wf")
    store.add_to_set("s-1", 0, "old")
    future = later(store)

    assert future.create_set("s-1", 2, workflow="wf") is True
    assert future.add_to_set("s-1", 1, "new") == SetState(size=2, members={1: "new"})


# ---- records -------------------------------------------------------------------------------------

def test_records_lists_live_objects_and_filters_by_workflow(store: Store) -> None:
    store.create("c-a1", b"1", workflow="wf-a")
    store.create("r-a", b"result", workflow="wf-a", kind=Kind.RESULT)
    store.create("f-a", b"failure", workflow="wf-a", kind=Kind.FAILURE)
    store.create_set("s-a", 2, workflow="wf-a")
    store.add_to_set("s-a", 1, "x")
    store.create("c-b1", b"2", workflow="wf-b")

    records = {record.key: record for record in store.records("wf-a")}
    assert set(records) == {"c-a1", "r-a", "f-a", "s-a"}
    assert {key: record.kind for key, record in records.items()} == {
        "c-a1": Kind.CHECKPOINT, "r-a": Kind.RESULT, "f-a": Kind.FAILURE, "s-a": Kind.SET}
    assert records["r-a"].value == b"result"
    assert records["s-a"].size == 2 and dict(records["s-a"].members) == {1: "x"}
    assert all(record.workflow == "wf-a" for record in records.values())
    assert all(record.expires_at > time.time() for record in records.values())

    assert {record.key for record in store.records("wf-b")} == {"c-b1"}
    assert {record.key for record in store.records("wf-none")} == set()
    assert {record.key for record in store.records()} == {"c-a1", "r-a", "f-a", "s-a", "c-b1"}
