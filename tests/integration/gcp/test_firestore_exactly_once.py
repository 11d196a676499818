"""The exactly-once fault suite (tests/integration/test_exactly_once.py) on the Firestore store:
random fault schedules over every workflow shape on the local platform, with every checkpoint,
set shard and result going through Google's Firestore emulator. Same faults (crashes, duplicate,
concurrent, slow and late duplicates, transient store errors before/after/half-way) and the same
checks: results equal one fault-free run, the checkpoints hold what every consumer saw, no key
is created twice, late duplicates change nothing, and only retained kinds are left, each
expiring between the workflow's deadline and now + TTL.

CI runs `CI_SCHEDULES` schedules (the emulator is ~10x slower than the file store);
`--schedules N` runs more.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.integration.test_exactly_once import run_random_schedules, run_schedule
from tests.support.tracing import SHAPES, write_shape
from unum_entry.local.faults import FaultRates
from unum_entry.stores.file import FileStore
from unum_entry.stores.firestore import FirestoreStore

pytestmark = pytest.mark.integration

CI_SCHEDULES = 50


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
    """Every shape once with heavy duplication: concurrent creates and set adds on one document,
    slow duplicates committing last, transient errors, and a late copy of every delivery."""
    store = _store(firestore_emulator)
    rates = FaultRates(duplicate=0.5, concurrent_duplicate=0.5, delay=0.3, slow_duplicate=0.3,
                       store_error=0.1, late_duplicate=1.0)
    try:
        injected = run_schedule(shapes[shape], store, seed=5, rates=rates, replay_store=FileStore(tmp_path / "r"))
    finally:
        store.close()
    assert injected.get("concurrent_duplicate", 0) + injected.get("duplicate", 0) >= 1
    assert injected.get("late_duplicate", 0) >= 1


def test_a_late_re_add_leaves_a_full_shard_unchanged(firestore_emulator):
    """What the exactly-once suite's late duplicates do to a fan-in shard: a branch's duplicate
    re-adds its member to a shard that is already full, with its own (here: earlier) expiry. The
    store contract (Store.add_to_set): a set that exists keeps its own size, workflow and expiry —
    a late duplicate must change nothing (on DynamoDB: if_not_exists; on the file store: kept)."""
    store = _store(firestore_emulator)
    try:
        first = int(time.time()) + 3600
        store.add_to_set("s-late-readd", 0, "c-a", size=2, workflow="wf-late", expires_at=first)
        store.add_to_set("s-late-readd", 1, "c-b", size=2, workflow="wf-late", expires_at=first + 5)
        before = store.read(["s-late-readd"])["s-late-readd"]
        store.add_to_set("s-late-readd", 0, "c-a", size=2, workflow="wf-late", expires_at=first - 10)  # the duplicate
        after = store.read(["s-late-readd"])["s-late-readd"]
    finally:
        store.close()
    assert before.expires_at == first
    assert (after.expires_at, dict(after.members), after.size) == (before.expires_at, dict(before.members), before.size)
