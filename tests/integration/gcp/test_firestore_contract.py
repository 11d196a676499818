"""The store contract (tests/integration/test_store_contract.py), every test of it, run against
the Firestore store on Google's Firestore emulator (gRPC over loopback), plus what only
Firestore has: the TTL field, its document ids and its URL."""

from __future__ import annotations

import datetime
import os
import time

import pytest

from tests.integration import test_store_contract as contract
from tests.support.expiry import ttl_from_now
from unum_entry.errors import StoreError
from unum_entry.stores import Kind, open_store
from unum_entry.stores.firestore import EXPIRE_AT, FirestoreStore

pytestmark = pytest.mark.integration

# Every contract test, collected here with the `store` fixture below.
globals().update({name: test for name, test in vars(contract).items() if name.startswith("test_")})


class _ReopenableFirestoreStore(FirestoreStore):
    def reopen(self, **kwargs) -> FirestoreStore:
        """Another store over the same collection (the contract's `later` uses another clock)."""
        return _ReopenableFirestoreStore(self.client, self.collection, **kwargs)


@pytest.fixture
def store(firestore_store: FirestoreStore) -> FirestoreStore:
    return _ReopenableFirestoreStore(firestore_store.client, firestore_store.collection)


def test_every_object_carries_the_ttl_policy_timestamp(store: FirestoreStore) -> None:
    store.create("c-1", b"x", workflow="wf", expires_at=ttl_from_now(store))
    store.add_to_set("s-1", 0, "a", size=2, workflow="wf", expires_at=ttl_from_now(store))
    collection = store.client.collection(store.collection)
    for key in ("c-1", "s-1"):
        stamp = collection.document(key).get().to_dict()[EXPIRE_AT]
        assert isinstance(stamp, datetime.datetime)  # a Firestore timestamp: what a TTL policy needs
        assert abs(stamp.timestamp() - (time.time() + store.ttl_seconds)) < 60


def test_keys_that_cannot_be_document_ids_are_refused(store: FirestoreStore) -> None:
    for key in ("c-a/b", "..", "__x__"):
        with pytest.raises(StoreError, match="document id"):
            store.create(key, b"x", workflow="wf", expires_at=ttl_from_now(store))


def test_a_document_that_is_not_a_unum_record_is_named(store: FirestoreStore) -> None:
    store.client.collection(store.collection).document("c-alien").set({"hello": "world"})
    with pytest.raises(StoreError, match=r"'c-alien'.*not a unum record.*hello"):
        store.get("c-alien")


def test_add_to_a_value_is_refused_and_keeps_the_value(store: FirestoreStore) -> None:
    store.create("c-1", b"x", workflow="wf", kind=Kind.CHECKPOINT, expires_at=ttl_from_now(store))
    with pytest.raises(StoreError, match="not a set"):
        store.add_to_set("c-1", 0, "a", size=1, workflow="wf", expires_at=ttl_from_now(store))
    assert store.get("c-1") == b"x" and [r.kind for r in store.records()] == [Kind.CHECKPOINT]


def test_a_set_document_follows_the_documented_layout(store: FirestoreStore) -> None:
    store.add_to_set("s-1", 1, "c-b", size=2, workflow="wf", expires_at=2_000_000_000)
    store.add_to_set("s-1", 1, "c-other", size=3, workflow="wf", expires_at=2_000_000_000)
    store.add_to_set("s-1", 0, "c-a", size=2, workflow="wf", expires_at=2_000_000_100)

    doc = store.client.collection(store.collection).document("s-1").get().to_dict()
    assert doc["n"] == ["2:2000000000", "3:2000000000", "2:2000000100"]  # the first one counts
    assert doc["m"] == ["1:2000000000:c-b", "1:2000000000:c-other", "0:2000000100:c-a"]
    assert "t" not in doc and doc["w"] == "wf"
    assert store.read(["s-1"])["s-1"].members == {1: "c-b", 0: "c-a"}


@pytest.fixture
def rpcs(store: FirestoreStore, monkeypatch):
    """Every RPC the store's client sends, by method name (counted at the generated API client)."""
    sent: list[str] = []
    api = store.client._firestore_api
    for name in ("commit", "batch_get_documents", "run_query", "begin_transaction", "batch_write"):
        original = getattr(api, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            sent.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(api, name, counted)
    return sent


def test_requests_per_create_and_per_add(store: FirestoreStore, rpcs) -> None:
    assert store.create("c-1", b"winner", workflow="wf", expires_at=ttl_from_now(store)) == (b"winner", True)
    assert rpcs == ["commit"]
    rpcs.clear()
    assert store.create("c-1", b"loser", workflow="wf", expires_at=ttl_from_now(store)) == (b"winner", False)
    assert rpcs == ["commit", "batch_get_documents"]  # the conflict, then the winner
    rpcs.clear()
    for slot in range(16):
        state = store.add_to_set("s-1", slot, f"c-{slot}", size=16, workflow="wf", expires_at=ttl_from_now(store))
    assert state.full and rpcs == ["commit", "batch_get_documents"] * 16  # one upsert, one read each


def test_a_value_over_a_document_is_stored_by_reference(store: FirestoreStore, rpcs) -> None:
    big = os.urandom(2 * 1024 * 1024)
    assert store.create("c-big", big, workflow="wf", expires_at=ttl_from_now(store)) == (big, True)
    assert rpcs == ["commit"] * 4  # three 900 KB chunks, then the checkpoint's manifest
    assert store.get("c-big") == big
    assert store.create("c-big", b"loser", workflow="wf", expires_at=ttl_from_now(store)) == (big, False)


def test_the_emulator_enforces_the_document_size_limit(store: FirestoreStore) -> None:
    """Without storing by reference a value over 1 MiB fails (what the test above relies on)."""
    from google.api_core.exceptions import InvalidArgument

    with pytest.raises(InvalidArgument, match="longer than 1048487 bytes"):
        store.client.collection(store.collection).document("c-raw").set({"v": b"x" * (1024 * 1024 + 10)})
    with pytest.raises(InvalidArgument, match="maximum entity size is 1048576 bytes"):
        store.client.collection(store.collection).document("c-raw").set({"a": b"x" * 600_000, "b": b"y" * 600_000})


def test_open_store_by_url(firestore_emulator) -> None:
    store = open_store(f"firestore://unum-url-test?project={firestore_emulator.project}")
    try:
        assert isinstance(store, FirestoreStore) and store.collection == "unum-url-test"
        assert store.create("c-url", b"v", workflow="wf", expires_at=ttl_from_now(store)) == (b"v", True)
        assert store.get("c-url") == b"v"
    finally:
        store.close()


@pytest.mark.parametrize("url, problem", [
    ("firestore://", "malformed"),
    ("firestore://coll/sub", "malformed"),
    ("firestore://coll?region=x", "unknown option"),
    ("firestore://coll?project=a&project=b", "more than once"),
    ("firestore://__unum__", "invalid"),
])
def test_bad_urls_are_named(url: str, problem: str) -> None:
    with pytest.raises(StoreError, match=problem):
        open_store(url)


def test_listing_workflows_reads_no_values(store: FirestoreStore) -> None:
    # (Not starting with MANIFEST_TAG: random bytes did one run in 256, stored by reference as a chunk.)
    store.create("r-1", b"\x92" + os.urandom(999), workflow="wf", kind=Kind.RESULT, expires_at=ttl_from_now(store))
    store.add_to_set("s-1", 0, "c-a", size=2, workflow="wf", expires_at=ttl_from_now(store))
    listed = {record.key: record for record in store._scan_keys()}  # what `workflows` reads
    assert listed["r-1"].value is None and listed["r-1"].kind is Kind.RESULT
    assert listed["s-1"].size == 2 and dict(listed["s-1"].members) == {0: "c-a"}
    [entry] = store.workflows()
    assert dict(entry.objects) == {Kind.RESULT: 1, Kind.SET: 1} and entry.results == ("r-1",)
