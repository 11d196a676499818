"""The exactly-once fault suite (tests/integration/test_exactly_once.py) on the Firestore store:
random fault schedules over every workflow shape on the local platform, with every checkpoint,
set and result going through Google's Firestore emulator. Same checks: results equal one
fault-free run, and nothing but the results is left in the collection.

CI runs `CI_SCHEDULES` schedules (the emulator is ~10x slower than the file store);
`--schedules N` runs more.
"""

from __future__ import annotations

import uuid

import pytest

from tests.integration.test_exactly_once import run_random_schedules, run_schedule
from tests.support.tracing import SHAPES, write_shape
from unum_entry.local.faults import FaultRates
from unum_entry.stores.file import FileStore
from unum_entry.stores.firestore import FirestoreStore

pytestmark = pytest.mark.integration

CI_SCHEDULES = 40


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("shapes")
    return {name: write_shape(root, name) for name in SHAPES}


def _store(emulator) -> FirestoreStore:
    return FirestoreStore.from_url(f"firestore://unum-{uuid.uuid4().hex[:12]}?project={emulator.project}")


def test_random_fault_schedules_on_firestore(shapes, firestore_emulator, schedules, tmp_path_factory):
    store = _store(firestore_emulator)
    try:
        run_random_schedules("firestore", shapes, store, schedules or CI_SCHEDULES, tmp_path_factory)
    finally:
        store.close()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_under_concurrent_duplicates_on_firestore(shapes, shape, firestore_emulator, tmp_path):
    """Every shape once with heavy duplication: concurrent creates and set adds on one document."""
    store = _store(firestore_emulator)
    try:
        injected = run_schedule(shapes[shape], store, seed=5,
                                rates=FaultRates(duplicate=0.5, concurrent_duplicate=0.5, delay=0.3),
                                replay_store=FileStore(tmp_path / "r"))
    finally:
        store.close()
    assert injected.get("concurrent_duplicate", 0) + injected.get("duplicate", 0) >= 1
