"""Fixtures for the GCP integration tests: Google's Firestore, Pub/Sub and Cloud Tasks emulators
on loopback (`firestore_emulator`, `pubsub_emulator`, `cloud_tasks_emulator`: one of each per
session, shared with tests/e2e/gcp; tests/support/gcp_emulators.py, registered in
tests/conftest.py). `firestore_store` gives each test a fresh collection.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from builder.local_stack.gcp import FirestoreEmulator
from unum_entry.stores.firestore import FirestoreStore


@pytest.fixture
def firestore_store(firestore_emulator: FirestoreEmulator) -> Iterator[FirestoreStore]:
    store = FirestoreStore.from_url(f"firestore://unum-test-{uuid.uuid4().hex[:12]}?project={firestore_emulator.project}")
    try:
        yield store
    finally:
        store.close()
