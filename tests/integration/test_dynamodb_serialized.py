"""DynamoDBStore's set upsert racing the creation of its item, on the shared moto server
(builder/local_stack/moto_serialized.py: one request at a time, as atomic as DynamoDB's requests).
One UpdateItem per add is all the fan-in needs: every member lands, exactly one adder sees the
set full.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.expiry import ttl_from_now
from builder.local_stack.process import MotoServer
from unum_entry.stores import open_store
from unum_entry.stores.dynamodb import DynamoDBStore

pytestmark = pytest.mark.integration

THREADS = 16


@pytest.fixture
def store(moto_server: MotoServer) -> Iterator[DynamoDBStore]:
    store = open_store(f"dynamodb://unum-test-{uuid.uuid4().hex[:12]}?endpoint={moto_server.endpoint}&create=1")
    assert isinstance(store, DynamoDBStore)
    try:
        yield store
    finally:
        store.client.delete_table(TableName=store.table)
        store.close()


def test_concurrent_adds_that_race_to_create_the_set_all_land(store: DynamoDBStore, race) -> None:
    everyone = {i: f"m-{i}" for i in range(THREADS)}
    for round_ in range(5):
        key = f"s-race-{round_}"
        states = race(THREADS, lambda i, key=key: store.add_to_set(key, i, f"m-{i}", size=THREADS, workflow="wf", expires_at=ttl_from_now(store)))

        # One atomic UpdateItem each: the adds are serialized, the k-th sees k members.
        assert sorted(len(state.members) for state in states) == list(range(1, THREADS + 1))
        assert sum(state.full for state in states) == 1
        assert all(state.members[i] == f"m-{i}" for i, state in enumerate(states))
        assert dict(store.read([key])[key].members) == everyone


def test_concurrent_adds_of_one_slot_that_race_to_create_the_set_agree(store: DynamoDBStore, race) -> None:
    states = race(8, lambda i: store.add_to_set("s-one", 0, f"m-{i}", size=1, workflow="wf", expires_at=ttl_from_now(store)))

    assert len({state.members[0] for state in states}) == 1 and all(state.full for state in states)
