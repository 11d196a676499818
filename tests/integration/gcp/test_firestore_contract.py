"""The store contract (tests/integration/test_store_contract.py), every test of it, run against
the Firestore store on Google's Firestore emulator (gRPC over loopback), plus what only
Firestore has: the TTL field, its document ids and its URL."""

from __future__ import annotations

import datetime
import time

import pytest

from tests.integration import test_store_contract as contract
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
    store.create("c-1", b"x", workflow="wf")
    store.create_set("s-1", 2, workflow="wf")
    collection = store.client.collection(store.collection)
    for key in ("c-1", "s-1"):
        stamp = collection.document(key).get().to_dict()[EXPIRE_AT]
        assert isinstance(stamp, datetime.datetime)  # a Firestore timestamp: what a TTL policy needs
        assert abs(stamp.timestamp() - (time.time() + store.ttl_seconds)) < 60


def test_keys_that_cannot_be_document_ids_are_refused(store: FirestoreStore) -> None:
    for key in ("c-a/b", "..", "__x__"):
        with pytest.raises(StoreError, match="document id"):
            store.create(key, b"x", workflow="wf")


def test_a_document_that_is_not_a_unum_record_is_named(store: FirestoreStore) -> None:
    store.client.collection(store.collection).document("c-alien").set({"hello": "world"})
    with pytest.raises(StoreError, match=r"'c-alien'.*not a unum record.*hello"):
        store.get("c-alien")


def test_add_to_a_value_is_refused(store: FirestoreStore) -> None:
    store.create("c-1", b"x", workflow="wf", kind=Kind.CHECKPOINT)
    with pytest.raises(StoreError, match="not a set"):
        store.add_to_set("c-1", 0, "a")


def test_open_store_by_url(firestore_emulator) -> None:
    store = open_store(f"firestore://unum-url-test?project={firestore_emulator.project}")
    try:
        assert isinstance(store, FirestoreStore) and store.collection == "unum-url-test"
        assert store.create("c-url", b"v", workflow="wf") == (b"v", True)
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
