"""Transactional steps on the Firestore store (Firestore transactions, Google's emulator over
loopback): the `Store.transact` / `app_read` tests of tests/integration/test_steps_stores.py
(all-or-nothing across collections, first record wins, version conflicts, guards), concurrent
transactions on one item (the emulator aborts contended ones: bounded retries), and the
exactly-once steps fault suite (tests/integration/test_steps_exactly_once.py: crashes at every
step point, duplicates, transient store errors, compensations) on Firestore."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.integration import test_steps_stores as steps_stores
from tests.integration.test_steps_exactly_once import SCHEDULES, STORE_ERROR_SCHEDULES, run_ledger
from tests.support.expiry import ttl_from_now
from unum_entry.codec import decode, encode
from unum_entry.errors import TransactionConflict
from unum_entry.stores.base import AppOp
from unum_entry.stores.firestore import FirestoreStore

pytestmark = pytest.mark.integration

# Every backend-independent test of the transactional store suite, with the `store` fixture below.
globals().update({name: test for name, test in vars(steps_stores).items()
                  if name.startswith("test_") and "file_store" not in name})


def _fresh(emulator) -> FirestoreStore:
    return FirestoreStore.from_url(f"firestore://unum-{uuid.uuid4().hex[:12]}?project={emulator.project}")


@pytest.fixture
def store(firestore_emulator):
    store = _fresh(firestore_emulator)
    yield store
    store.close()


def test_concurrent_transactions_on_one_item_all_land(store):
    """4 writers x 5 increments of one item, each a read then a versioned transaction retried on
    TransactionConflict: every increment lands exactly once (aborts by the emulator's lock
    timeouts are retried inside `transact`, bounded)."""
    item = f"shared-{uuid.uuid4().hex[:8]}"

    def increments(worker: int) -> int:
        conflicts = 0
        for i in range(5):
            for _ in range(200):  # bounded: each round either lands or lost to another writer
                found = store.app_read("accounts", [item]).get(item)
                value, version = (decode(found.value), found.version) if found else (0, 0)
                try:
                    store.transact(f"t-{item}-{worker}-{i}", b"", [AppOp("accounts", item, version, write=True,
                                                                        value=encode(value + 1))],
                                   workflow="wf-tx", expires_at=ttl_from_now(store))
                    break
                except TransactionConflict:
                    conflicts += 1
            else:
                raise AssertionError(f"worker {worker}: increment {i} never landed")
        return conflicts

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(increments, range(4)))
    found = store.app_read("accounts", [item])[item]
    assert (decode(found.value), found.version) == (20, 20)


@pytest.mark.parametrize("abort", [None, "abort"])
def test_ledger_under_fault_schedules_on_firestore(firestore_emulator, abort, tmp_path):
    """Crashes at every step point, duplicates, late duplicates: every effect exactly once."""
    store = _fresh(firestore_emulator)
    try:
        totals: dict[str, int] = {}
        for seed in range(2):
            for key, count in run_ledger(tmp_path / f"s{seed}", store, seed, SCHEDULES[seed % len(SCHEDULES)],
                                         abort).items():
                totals[key] = totals.get(key, 0) + count
        assert totals.get("crash", 0) > 0, totals
    finally:
        store.close()


def test_ledger_under_transient_store_errors_on_firestore(firestore_emulator, tmp_path):
    store = _fresh(firestore_emulator)
    try:
        injected = run_ledger(tmp_path, store, 1, STORE_ERROR_SCHEDULES[0], None)
        assert injected.get("store_error", 0) > 0, injected
    finally:
        store.close()
