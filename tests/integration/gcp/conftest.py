"""Fixtures for the GCP integration tests: Google's Firestore and Pub/Sub emulators on loopback.

One emulator process group per session (started here on free ports, stopped at the end). The
clients find them through `FIRESTORE_EMULATOR_HOST` / `PUBSUB_EMULATOR_HOST`, set for the
session (the Google client libraries read only those variables). `firestore_store` gives each
test a fresh collection.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from builder.local_stack.gcp import FirestoreEmulator, PubSubEmulator
from builder.local_stack.gcp.cloud_tasks import CloudTasksEmulator
from unum_entry.stores.firestore import FirestoreStore


@pytest.fixture(scope="session")
def firestore_emulator() -> Iterator[FirestoreEmulator]:
    with FirestoreEmulator() as emulator, _environment(emulator.env()):
        yield emulator


@pytest.fixture(scope="session")
def pubsub_emulator() -> Iterator[PubSubEmulator]:
    with PubSubEmulator() as emulator, _environment(emulator.env()):
        yield emulator


@pytest.fixture(scope="session")
def cloud_tasks_emulator() -> Iterator[CloudTasksEmulator]:
    with CloudTasksEmulator() as emulator, _environment(emulator.env()):
        yield emulator


@pytest.fixture
def firestore_store(firestore_emulator: FirestoreEmulator) -> Iterator[FirestoreStore]:
    store = FirestoreStore.from_url(f"firestore://unum-test-{uuid.uuid4().hex[:12]}?project={firestore_emulator.project}")
    try:
        yield store
    finally:
        store.close()


class _environment:
    """Set environment variables for the block, restoring the previous values afterwards."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for name, value in self.values.items():
            self.saved[name] = os.environ.get(name)
            os.environ[name] = value

    def __exit__(self, *exc: object) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
