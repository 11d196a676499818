"""The store contract (`unum_entry.stores.base.Store`), one test per rule, run against every
backend: the embedded SQLite store (one database file), the embedded file store, the in-process
memory store and DynamoDB (moto server over loopback HTTP) here; Firestore (its emulator)
through tests/integration/gcp/test_firestore_contract.py.

Large values are tested with each backend's `max_value_bytes`: the real item limits on DynamoDB
and Firestore, a forced small one on the SQLite, file and memory stores (which have no limit)."""

from __future__ import annotations

import os
import time

import pytest

from tests.support.expiry import ttl_from_now
from unum_entry.errors import StoreError, StoreMisuse
from unum_entry.stores import Kind, SetState, Store
from unum_entry.stores.base import MANIFEST_TAG, Joining, SetAdd
from unum_entry.stores.dynamodb import DynamoDBStore
from unum_entry.stores.file import FileStore
from unum_entry.stores.memory import MemoryStore
from unum_entry.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.integration

THREADS = 16
SMALL_LIMIT = 1000  # max_value_bytes forced on stores without a limit of their own


@pytest.fixture(params=["sqlite", "file", "memory", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path) -> Store:
    if request.param == "sqlite":
        sqlite_store = SQLiteStore.open(tmp_path / "unum.db")
        request.addfinalizer(sqlite_store.close)
        return sqlite_store
    if request.param == "file":
        file_store = FileStore(tmp_path / "store")
        request.addfinalizer(file_store.close)
        return file_store
    if request.param == "memory":
        return MemoryStore()
    return request.getfixturevalue("dynamodb_store")


def reopen(store: Store, **kwargs) -> Store:
    """Another store over the same data (e.g. with a different clock)."""
    if isinstance(store, FileStore):
        other: Store = FileStore(store.root, **kwargs)
    elif isinstance(store, DynamoDBStore):
        other = DynamoDBStore(store.client, store.table, **kwargs)
    elif isinstance(store, MemoryStore):
        other = MemoryStore(**kwargs)
        other._records, other._app, other._lock = store._records, store._app, store._lock  # the same data
    elif hasattr(store, "reopen"):  # backends whose contract runs from elsewhere (tests/integration/gcp)
        other = store.reopen(**kwargs)
    else:
        raise TypeError(f"no reopen for {type(store).__name__}")
    if "max_value_bytes" in vars(store):  # a limit forced on the instance (see `limited`)
        other.max_value_bytes = store.max_value_bytes
    return other


def at(store: Store, when: float) -> Store:
    """The same data seen at time `when`."""
    return reopen(store, clock=lambda: when)


def later(store: Store) -> Store:
    """The same data seen from after every object `store` writes now has expired."""
    return at(store, time.time() + store.ttl_seconds + 60)


def limited(store: Store) -> int:
    """The store's max_value_bytes, forcing SMALL_LIMIT on a store without one."""
    if store.max_value_bytes is None:
        store.max_value_bytes = SMALL_LIMIT
    return store.max_value_bytes


def add(store: Store, key: str, slot: int, member: str, size: int = 2, **kwargs) -> SetState:
    kwargs.setdefault("expires_at", ttl_from_now(store))
    return store.add_to_set(key, slot, member, size=size, workflow=kwargs.pop("workflow", "wf"), **kwargs)


# ---- create / get ------------------------------------------------------------------------------

def test_create_if_absent_gives_the_winners_value_to_the_loser(store: Store) -> None:
    assert store.create("c-1", b"first", workflow="wf", expires_at=ttl_from_now(store)) == (b"first", True)
    assert store.create("c-1", b"second", workflow="wf", expires_at=ttl_from_now(store)) == (b"first", False)
    assert store.get("c-1") == b"first"


def test_concurrent_creates_of_one_key_agree_on_one_value(store: Store, race) -> None:
    results = race(THREADS, lambda i: store.create("c-race", f"value-{i}".encode(), workflow="wf", expires_at=ttl_from_now(store)))

    winners = [value for value, created in results if created]
    assert len(winners) == 1
    assert {value for value, _ in results} == {winners[0]}
    assert store.get("c-race") == winners[0]


def test_get_and_get_many_leave_out_missing_keys(store: Store) -> None:
    store.create("c-a", b"A", workflow="wf", expires_at=ttl_from_now(store))
    store.create("r-b", b"B", workflow="wf", kind=Kind.RESULT, expires_at=ttl_from_now(store))
    add(store, "s-c", 0, "x")

    assert store.get("c-a") == b"A"
    assert store.get("c-missing") is None
    assert store.get("s-c") is None  # a set has no value
    assert store.get_many(["c-a", "r-b", "c-missing", "c-a", "s-c"]) == {"c-a": b"A", "r-b": b"B"}
    assert store.get_many([]) == {}
    assert set(store.read(["c-a", "s-c", "c-missing"])) == {"c-a", "s-c"}


def test_get_many_reads_more_keys_than_one_batch(store: Store) -> None:
    present = [f"c-{i:03d}" for i in range(230)]
    for key in present:
        store.create(key, key.encode(), workflow="wf", expires_at=ttl_from_now(store))
    missing = [f"c-missing-{i}" for i in range(20)]

    assert store.get_many(present + missing) == {key: key.encode() for key in present}


def test_create_on_a_set_is_refused(store: Store) -> None:
    add(store, "s-1", 0, "a")
    with pytest.raises(StoreMisuse, match="holds a set"):
        store.create("s-1", b"v", workflow="wf", expires_at=ttl_from_now(store))


# ---- delete --------------------------------------------------------------------------------------

def test_delete_many_keys_including_missing_ones(store: Store) -> None:
    keys = [f"c-{i:02d}" for i in range(60)]
    for key in keys:
        store.create(key, b"x", workflow="wf", expires_at=ttl_from_now(store))
    add(store, "s-1", 0, "old", size=3)
    store.create("c-keep", b"kept", workflow="wf", expires_at=ttl_from_now(store))

    store.delete(keys + ["s-1"] + [f"c-never-{i}" for i in range(10)])
    store.delete(keys)  # again: deleting is idempotent
    store.delete([])

    assert store.get_many(keys) == {}
    assert store.get("c-keep") == b"kept"
    assert {record.key for record in store.records()} == {"c-keep"}
    # A deleted set is gone: the next add starts a fresh one.
    assert add(store, "s-1", 1, "new", size=3) == SetState(size=3, members={1: "new"})


def test_a_deleted_key_can_be_created_again(store: Store) -> None:
    store.create("c-1", b"old", workflow="wf", expires_at=ttl_from_now(store))
    store.delete(["c-1"])
    assert store.create("c-1", b"new", workflow="wf", expires_at=ttl_from_now(store)) == (b"new", True)


# ---- sets ----------------------------------------------------------------------------------------

def test_add_to_set_creates_the_set_keeps_each_slots_first_member_and_reports_full(store: Store) -> None:
    assert add(store, "s-1", 1, "b", size=3) == SetState(size=3, members={1: "b"})
    assert add(store, "s-1", 1, "b", size=3) == SetState(size=3, members={1: "b"})
    # A slot keeps its first member: a retry that computed another name changes nothing.
    assert add(store, "s-1", 1, "b-again", size=3) == SetState(size=3, members={1: "b"})
    assert not add(store, "s-1", 0, "a", size=3).full

    state = add(store, "s-1", 2, "c", size=3)
    assert state.full  # the add that fills the last slot sees the set full
    assert state.ordered_members() == ["a", "b", "c"]
    assert add(store, "s-1", 2, "c", size=3).full  # a retried last add still sees it full


def test_what_an_add_or_a_read_returned_never_sees_later_adds(store: Store) -> None:
    """A set state an add returns and a set record a read returns are the set as it was then
    (the memory store adds in place to its own members: each answer carries a copy)."""
    expires = ttl_from_now(store)
    first = add(store, "s-copy", 0, "a", size=3)
    [read] = store.read(["s-copy"]).values()
    joined = store.create_joining("c-copy", b"v", workflow="wf", expires_at=expires,
                                  join=SetAdd("s-copy", 1, "b", 3, expires))[2]
    if joined is None:
        add(store, "s-copy", 1, "b", size=3)
    add(store, "s-copy", 2, "c", size=3)
    assert dict(first.members) == {0: "a"} and dict(read.members) == {0: "a"}
    if joined is not None:  # (a store that joins in its creates)
        assert dict(joined.members) == {0: "a", 1: "b"}
    assert dict(store.read(["s-copy"])["s-copy"].members) == {0: "a", 1: "b", 2: "c"}


def test_a_set_keeps_the_size_of_its_first_add(store: Store) -> None:
    # (All adders of one set belong to one workflow: set names hash the workflow id.)
    expiry = int(time.time()) + 3600
    add(store, "s-1", 0, "a", size=2, workflow="wf-1", expires_at=expiry)
    state = add(store, "s-1", 1, "b", size=5, workflow="wf-1", expires_at=expiry + 500)

    assert state == SetState(size=2, members={0: "a", 1: "b"}) and state.full
    (record,) = store.records()
    assert (record.key, record.kind, record.workflow, record.size) == ("s-1", Kind.SET, "wf-1", 2)
    assert record.expires_at in (expiry, expiry + 500)  # Firestore keeps the last adder's document expiry
    assert dict(record.members) == {0: "a", 1: "b"}


def test_add_to_set_refuses_bad_sizes_and_slots(store: Store) -> None:
    with pytest.raises(StoreMisuse, match="size >= 1"):
        add(store, "s-1", 0, "a", size=0)
    with pytest.raises(StoreMisuse, match="negative"):
        add(store, "s-1", -1, "a")
    assert store.read(["s-1"]) == {}


def test_a_slot_outside_the_set_is_stored_but_never_counted(store: Store) -> None:
    state = add(store, "s-1", 2, "stray")
    assert not state.has_slot(2) and not state.full

    add(store, "s-1", 0, "a")
    state = add(store, "s-1", 1, "b")
    assert state.has_slot(1) and state.full
    assert state.ordered_members() == ["a", "b"]


def test_concurrent_adders_of_distinct_slots_all_land_and_one_sees_full(store: Store, race) -> None:
    rounds = 3 if isinstance(store, (FileStore, MemoryStore)) else 1
    everyone = {i: f"m-{i}" for i in range(THREADS)}
    for round_ in range(rounds):
        key = f"s-fan-{round_}"
        # Every thread's add may be the one that creates the set.
        states = race(THREADS, lambda i, key=key: add(store, key, i, f"m-{i}", size=THREADS))

        for i, state in enumerate(states):
            assert state.size == THREADS
            assert state.members[i] == f"m-{i}"  # every add sees its own member
            assert state.full == ({slot: m for slot, m in state.members.items() if slot < THREADS} == everyone)
        assert any(state.full for state in states)  # the completing adder (maybe others) sees it full
        final = store.read([key])[key]
        assert {slot: m for slot, m in final.members.items() if slot < THREADS} == everyone  # none lost


def test_concurrent_adders_agree_on_which_add_completed_the_set(store: Store, race) -> None:
    """On stores with ordered sets, every adder that sees the set full names the same
    completing slot, and exactly the adders of that slot are told they completed it."""
    if not store.ordered_sets:
        state = None
        for slot in range(3):
            state = add(store, "s-who", slot, f"m-{slot}", size=3)
        assert state.full and state.completed_by is None  # the store cannot tell: unknown
        return
    states = race(THREADS, lambda i: add(store, "s-who", i, f"m-{i}", size=THREADS))
    completers = {state.completed_by for state in states if state.full}
    assert len(completers) == 1 and completers != {None}
    again = add(store, "s-who", 0, "m-0", size=THREADS)  # a later duplicate add
    assert again.full and again.completed_by == completers.pop()


def test_concurrent_adders_of_one_slot_agree_on_its_first_member(store: Store, race) -> None:
    states = race(8, lambda i: add(store, "s-one", 0, f"m-{i}", size=1))

    winners = {state.members[0] for state in states}
    assert len(winners) == 1 and all(state.full for state in states)
    assert store.read(["s-one"])["s-one"].members[0] == winners.pop()


def test_add_to_a_key_holding_a_value_is_refused(store: Store) -> None:
    store.create("c-1", b"x", workflow="wf", expires_at=ttl_from_now(store))
    with pytest.raises(StoreError, match="not a set"):
        add(store, "c-1", 0, "a")
    assert store.get("c-1") == b"x"


# ---- create_joining: a create and its set add in one write -------------------------------------

def joining(store: Store, key: str, value: bytes, set_key: str, slot: int, size: int = 2):
    return store.create_joining(key, value, workflow="wf", expires_at=ttl_from_now(store),
                                join=SetAdd(set_key, slot, key, size, ttl_from_now(store)))


def test_create_joining_adds_to_the_set_with_the_create_or_leaves_the_add_to_the_caller(store: Store) -> None:
    stored, created, state = joining(store, "c-j0", b"v0", "s-j", 0)
    assert (stored, created) == (b"v0", True)
    if store.joins_in_create:  # the embedded stores: one write
        assert state is not None and state.size == 2 and dict(state.members) == {0: "c-j0"} and not state.full
        assert store.read(["s-j"])["s-j"].members == {0: "c-j0"}
        _, _, full = joining(store, "c-j1", b"v1", "s-j", 1)
        assert full is not None and full.full and (full.completed_by == 1 or not store.ordered_sets)
    else:  # the cloud stores: `create` alone, the caller adds
        assert state is None and store.read(["s-j"]) == {}
    assert store.get("c-j0") == b"v0"


def test_a_losing_create_joining_adds_nothing(store: Store) -> None:
    store.create("c-won", b"first", workflow="wf", expires_at=ttl_from_now(store))
    assert joining(store, "c-won", b"second", "s-lost", 0) == (b"first", False, None)
    assert store.read(["s-lost"]) == {}


def test_create_joining_onto_a_key_holding_a_value_writes_neither(store: Store) -> None:
    store.create("c-not-a-set", b"x", workflow="wf", expires_at=ttl_from_now(store))
    if not store.joins_in_create:
        assert joining(store, "c-alone", b"v", "c-not-a-set", 0) == (b"v", True, None)
        return
    with pytest.raises(StoreError, match="not a set"):
        joining(store, "c-alone", b"v", "c-not-a-set", 0)
    assert store.get("c-alone") is None and store.get("c-not-a-set") == b"x"  # both or neither


def test_concurrent_create_joinings_of_one_key_add_once(store: Store, race) -> None:
    results = race(THREADS, lambda i: joining(store, "c-jrace", f"v-{i}".encode(), "s-jrace", 0, size=1))
    winners = [r for r in results if r[1]]
    assert len(winners) == 1 and {r[0] for r in results} == {winners[0][0]}
    assert all(r[2] is None for r in results if not r[1])
    if store.joins_in_create:
        assert winners[0][2] is not None and winners[0][2].full
        assert store.read(["s-jrace"])["s-jrace"].members == {0: "c-jrace"}


# ---- create_joining_many: a batch of fan-in branches' creates and adds -------------------------

def joinings(store: Store, *items: tuple[str, bytes, str, int, int]) -> list:
    """`create_joining_many` of (key, value, set key, slot, set size) items."""
    expiry = ttl_from_now(store)
    return store.create_joining_many([Joining(key, value, "wf", expiry, SetAdd(set_key, slot, key, size, expiry))
                                      for key, value, set_key, slot, size in items])


def test_create_joining_many_answers_each_item_as_create_joining_would(store: Store) -> None:
    """Each item in order: created with the set right after its own add (the add that fills
    the set sees it full and, on ordered stores, itself as its completer; an add before it
    not), or the winner's value and no add for a key that exists."""
    store.create("c-b-won", b"first", workflow="wf", expires_at=ttl_from_now(store))
    results = joinings(store, ("c-b0", b"v0", "s-b", 0, 3), ("c-b-won", b"second", "s-b", 1, 3),
                       ("c-b2", b"v2", "s-b", 2, 3), ("c-b1", b"v1", "s-b", 1, 3), ("c-b-other", b"o", "s-o", 0, 1))
    assert [(stored, created) for stored, created, _ in results] == [
        (b"v0", True), (b"first", False), (b"v2", True), (b"v1", True), (b"o", True)]
    assert results[1][2] is None  # the loser adds nothing
    assert all(store.get(key) == value for key, value in [("c-b0", b"v0"), ("c-b2", b"v2"), ("c-b1", b"v1")])
    if not store.joins_in_create:  # the cloud stores: creates alone, the callers add
        assert all(state is None for _, _, state in results) and store.read(["s-b", "s-o"]) == {}
        return
    states = [state for _, _, state in results]
    assert dict(states[0].members) == {0: "c-b0"} and not states[0].full
    assert dict(states[2].members) == {0: "c-b0", 2: "c-b2"} and not states[2].full
    assert states[3].full and dict(states[3].members) == {0: "c-b0", 2: "c-b2", 1: "c-b1"}
    assert states[3].completed_by == 1 or not store.ordered_sets
    assert states[4].full and dict(states[4].members) == {0: "c-b-other"}
    assert store.read(["s-b"])["s-b"].members == {0: "c-b0", 2: "c-b2", 1: "c-b1"}


def test_create_joining_many_fails_only_the_items_whose_own_add_is_wrong(store: Store) -> None:
    """Where the store joins in its creates, a bad add (a negative slot; a set key that holds a
    value) fails its own item and writes neither its create nor its add; the other items are
    made (elsewhere the creates are made and the callers' adds fail later, as with
    `create_joining`)."""
    store.create("c-holds-value", b"x", workflow="wf", expires_at=ttl_from_now(store))
    results = joinings(store, ("c-f0", b"v0", "s-f", 0, 2), ("c-bad-slot", b"b", "s-f", -1, 2),
                       ("c-onto-value", b"w", "c-holds-value", 0, 2), ("c-f1", b"v1", "s-f", 1, 2))
    assert results[0][:2] == (b"v0", True) and results[3][:2] == (b"v1", True)
    if store.joins_in_create:
        assert isinstance(results[1], StoreMisuse) and store.get("c-bad-slot") is None
        assert isinstance(results[2], StoreError) and "not a set" in str(results[2])
        assert store.get("c-onto-value") is None and store.get("c-holds-value") == b"x"
        assert results[3][2] is not None and results[3][2].full
    assert store.get("c-f0") == b"v0" and store.get("c-f1") == b"v1"


# ---- expiry --------------------------------------------------------------------------------------

def test_expired_values_read_as_absent_and_can_be_created_again(store: Store) -> None:
    store.create("c-1", b"old", workflow="wf", expires_at=ttl_from_now(store))
    future = later(store)

    assert future.get("c-1") is None
    assert future.get_many(["c-1"]) == {}
    assert future.read(["c-1"]) == {}
    assert list(future.records()) == []
    assert future.create("c-1", b"new", workflow="wf", expires_at=ttl_from_now(future)) == (b"new", True)
    assert future.create("c-1", b"newer", workflow="wf", expires_at=ttl_from_now(future)) == (b"new", False)
    assert store.get("c-1") == b"new"


def test_create_stores_the_given_expiry(store: Store) -> None:
    now = int(time.time())
    store.create("c-short", b"s", workflow="wf", expires_at=now + 100)
    store.create("c-default", b"d", workflow="wf", expires_at=ttl_from_now(store))

    expiries = {record.key: record.expires_at for record in store.records()}
    assert expiries["c-short"] == now + 100
    assert now + store.ttl_seconds - 5 <= expiries["c-default"] <= now + store.ttl_seconds + 5

    soon = at(store, now + 200)  # after c-short's expiry, long before the default one
    assert soon.get_many(["c-short", "c-default"]) == {"c-default": b"d"}
    assert soon.create("c-short", b"again", workflow="wf", expires_at=now + 900) == (b"again", True)
    assert at(store, now + 300).get("c-short") == b"again"


def test_expired_sets_are_absent_and_an_add_starts_a_fresh_one(store: Store) -> None:
    now = int(time.time())
    add(store, "s-1", 0, "old", expires_at=now + 100)
    soon = at(store, now + 200)

    assert soon.read(["s-1"]) == {}
    assert [record.key for record in soon.records()] == []
    assert add(soon, "s-1", 1, "new", size=3, expires_at=now + 900) == SetState(size=3, members={1: "new"})
    assert add(soon, "s-1", 0, "newer", size=3, expires_at=now + 900) == SetState(size=3, members={0: "newer", 1: "new"})


def test_sweep_deletes_exactly_the_expired_records(store: Store) -> None:
    now = int(time.time())
    for i in range(5):
        store.create(f"c-old-{i}", b"x", workflow="wf", expires_at=now + 100)
    store.create("r-old", b"r", workflow="wf", kind=Kind.RESULT, expires_at=now + 100)
    add(store, "s-old", 0, "a", expires_at=now + 100)
    store.create("c-live", b"live", workflow="wf", expires_at=now + 1000)
    add(store, "s-live", 0, "a", expires_at=now + 1000)

    assert store.sweep(now=now + 50) == 0  # nothing has expired yet
    assert store.sweep(now=now + 200) == 7
    assert store.sweep(now=now + 200) == 0  # idempotent

    assert {record.key for record in store.records()} == {"c-live", "s-live"}
    assert {record.key for record in at(store, now + 200).records()} == {"c-live", "s-live"}
    assert store.get("c-live") == b"live"
    assert store.create("c-old-0", b"fresh", workflow="wf", expires_at=ttl_from_now(store)) == (b"fresh", True)


def test_sweep_uses_the_stores_clock_by_default(store: Store) -> None:
    now = int(time.time())
    store.create("c-1", b"x", workflow="wf", expires_at=now + 100)
    assert store.sweep() == 0
    assert at(store, now + 200).sweep() == 1
    assert store.get("c-1") is None


# ---- values larger than a record -----------------------------------------------------------------

def test_a_large_value_is_stored_by_reference_and_read_whole(store: Store) -> None:
    limit = limited(store)
    big = os.urandom(2 * limit + 17)

    assert store.create("c-big", big, workflow="wf", expires_at=ttl_from_now(store)) == (big, True)
    assert store.create("c-big", b"loser", workflow="wf", expires_at=ttl_from_now(store)) == (big, False)  # the loser gets the whole winner
    assert store.get("c-big") == big
    assert store.get_many(["c-big", "c-missing"]) == {"c-big": big}
    assert store.read(["c-big"])["c-big"].value == big

    records = {record.key: record for record in store.records("wf")}
    assert records["c-big"].value == big and records["c-big"].kind is Kind.CHECKPOINT
    chunks = [record for record in records.values() if record.kind is Kind.CHUNK]
    assert len(chunks) == 3 and all(0 < len(chunk.value or b"") <= limit for chunk in chunks)
    assert all(chunk.key.startswith("b-") and chunk.workflow == "wf" for chunk in chunks)
    assert all(chunk.expires_at == records["c-big"].expires_at for chunk in chunks)


def test_a_value_at_the_limit_is_stored_inline(store: Store) -> None:
    limit = limited(store)
    exact = b"\x92" + os.urandom(limit - 1)
    assert store.create("c-exact", exact, workflow="wf", expires_at=ttl_from_now(store)) == (exact, True)
    assert store.get("c-exact") == exact
    assert [record.kind for record in store.records()] == [Kind.CHECKPOINT]


def test_concurrent_creates_of_large_values_agree_on_one(store: Store, race) -> None:
    limit = limited(store)
    values = [bytes([i]) * (limit + 1 + i) for i in range(4)]

    results = race(4, lambda i: store.create("c-big", values[i], workflow="wf", expires_at=ttl_from_now(store)))

    winners = [value for value, created in results if created]
    assert len(winners) == 1 and {value for value, _ in results} == {winners[0]}
    assert store.get("c-big") == winners[0]


def test_a_value_that_starts_like_a_manifest_round_trips(store: Store) -> None:
    limited(store)
    for key, value in (("c-1", MANIFEST_TAG), ("c-2", MANIFEST_TAG + b"\x92\x90\x00"), ("c-3", b"")):
        assert store.create(key, value, workflow="wf", expires_at=ttl_from_now(store)) == (value, True)
        assert store.create(key, b"other", workflow="wf", expires_at=ttl_from_now(store)) == (value, False)
        assert store.get(key) == value


def test_an_expired_large_value_is_absent_and_swept_with_its_chunks(store: Store) -> None:
    limit = limited(store)
    now = int(time.time())
    store.create("c-big", os.urandom(limit + 1), workflow="wf", expires_at=now + 100)

    assert at(store, now + 200).get("c-big") is None
    assert store.sweep(now=now + 200) == 3  # the record and its two chunks
    assert list(store.records()) == []


# ---- records -------------------------------------------------------------------------------------

def test_records_lists_live_objects_and_filters_by_workflow(store: Store) -> None:
    store.create("c-a1", b"1", workflow="wf-a", expires_at=ttl_from_now(store))
    store.create("r-a", b"result", workflow="wf-a", kind=Kind.RESULT, expires_at=ttl_from_now(store))
    store.create("f-a", b"failure", workflow="wf-a", kind=Kind.FAILURE, expires_at=ttl_from_now(store))
    add(store, "s-a", 1, "x", workflow="wf-a")
    store.create("c-b1", b"2", workflow="wf-b", expires_at=ttl_from_now(store))

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


def test_tally_reads_the_records_asked_for_and_counts_every_live_record_by_kind(store: Store) -> None:
    """What a workflow's outcome is read from (`read_outcome`): the same on every backend, whether
    it scans (the default) or counts and filters on its side (SQLite)."""
    limit = limited(store)
    now = int(time.time())
    big = os.urandom(limit + 1)  # a result stored by reference: returned resolved, its chunks counted
    store.create("c-1", b"1", workflow="wf", expires_at=now + 300)
    store.create("c-old", b"2", workflow="wf", expires_at=now + 100)
    store.create("root", b"claim", workflow="wf", expires_at=now + 300)
    store.create("r-big", big, workflow="wf", kind=Kind.RESULT, expires_at=now + 400)
    store.create("f-1", b"failure", workflow="wf", kind=Kind.FAILURE, expires_at=now + 300)
    store.create("r-old", b"gone", workflow="wf", kind=Kind.RESULT, expires_at=now + 100)
    add(store, "s-1", 0, "c-1", workflow="wf", expires_at=now + 300)
    store.create("r-other", b"other", workflow="wf-other", kind=Kind.RESULT, expires_at=now + 300)

    tally = at(store, now + 200).tally("wf", (Kind.RESULT, Kind.FAILURE), ("root", "c-missing"))
    assert {record.key: record.value for record in tally.records} == {"root": b"claim", "r-big": big,
                                                                      "f-1": b"failure"}
    chunks = sum(1 for record in store.records("wf") if record.kind is Kind.CHUNK)
    assert chunks >= 1
    assert dict(tally.counts) == {Kind.CHECKPOINT: 2, Kind.RESULT: 1, Kind.FAILURE: 1, Kind.SET: 1,
                                  Kind.CHUNK: chunks}
    assert tally.latest_expiry == now + 400
    assert dict(at(store, now + 200).tally("wf-none", (Kind.RESULT,)).counts) == {}
    assert at(store, now + 200).tally("wf-none", (Kind.RESULT,)).latest_expiry is None
    assert at(store, now + 500).tally("wf", (Kind.RESULT,)) == ([], {}, None)


def test_a_tallied_set_stays_as_it_was_read(store: Store) -> None:
    """A set `tally` returns is the set at the read: a later add changes the store's, not it."""
    add(store, "s-1", 0, "c-0", size=3)
    [record] = store.tally("wf", (), ("s-1",)).records
    add(store, "s-1", 1, "c-1", size=3)
    assert (record.size, dict(record.members)) == (3, {0: "c-0"})
    assert dict(store.tally("wf", (), ("s-1",)).records[0].members) == {0: "c-0", 1: "c-1"}


# ---- workflows (listing: `python -m builder list`, the web page) ---------------------------------

def test_workflows_counts_each_workflows_objects_by_kind_with_its_expiries(store: Store) -> None:
    now = int(time.time())
    store.create("c-b1", b"1", workflow="wf-b", expires_at=now + 100)
    store.create("c-b2", b"2", workflow="wf-b", expires_at=now + 300)
    store.create("r-b", b"result", workflow="wf-b", kind=Kind.RESULT, expires_at=now + 300)
    add(store, "s-a", 0, "c-a1", workflow="wf-a", expires_at=now + 50)
    store.create("f-a", b"failure", workflow="wf-a", kind=Kind.FAILURE, expires_at=now + 200)

    entries = store.workflows()
    assert [entry.workflow for entry in entries] == ["wf-a", "wf-b"]  # sorted by id
    a, b = entries
    assert dict(a.objects) == {Kind.SET: 1, Kind.FAILURE: 1}
    assert (a.results, a.failure, a.first_expiry, a.last_expiry) == ((), "f-a", now + 50, now + 200)
    assert dict(b.objects) == {Kind.CHECKPOINT: 2, Kind.RESULT: 1}
    assert (b.results, b.failure, b.first_expiry, b.last_expiry) == (("r-b",), None, now + 100, now + 300)


def test_workflows_leaves_out_what_has_expired(store: Store) -> None:
    now = int(time.time())
    store.create("c-1", b"1", workflow="wf", expires_at=now + 100)
    add(store, "s-1", 0, "c-1", workflow="wf", expires_at=now + 100)
    store.create("c-2", b"2", workflow="wf", expires_at=now + 300)
    store.create("c-old", b"3", workflow="wf-old", expires_at=now + 100)
    add(store, "s-old", 1, "c-old", workflow="wf-old", expires_at=now + 100)

    [entry] = at(store, now + 200).workflows()  # the set and checkpoints of 100 s have expired
    assert entry.workflow == "wf" and dict(entry.objects) == {Kind.CHECKPOINT: 1}
    assert (entry.first_expiry, entry.last_expiry) == (now + 300, now + 300)
    assert at(store, now + 400).workflows() == []
    assert {entry.workflow for entry in store.workflows()} == {"wf", "wf-old"}  # still live now


def test_workflows_counts_the_chunks_of_a_value_stored_by_reference(store: Store) -> None:
    limit = limited(store)
    store.create("r-big", os.urandom(limit + 1), workflow="wf", kind=Kind.RESULT, expires_at=ttl_from_now(store))

    [entry] = store.workflows()
    assert dict(entry.objects) == {Kind.RESULT: 1, Kind.CHUNK: 2} and entry.results == ("r-big",)
