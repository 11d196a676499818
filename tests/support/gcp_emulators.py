"""Google's emulators as session fixtures, registered once in tests/conftest.py so the GCP
integration tests and the GCP e2e tests share ONE Firestore, ONE Pub/Sub and ONE Cloud Tasks
emulator per session (each JVM costs seconds to start and hundreds of MB; tests keep apart by
collection, topic prefix and queue names of their own).

The clients find them through `FIRESTORE_EMULATOR_HOST` / `PUBSUB_EMULATOR_HOST` (and the Cloud
Tasks emulator's variable), set for the session; the emulator modules are imported lazily, so unit
runs never load them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from builder.local_stack.gcp import FirestoreEmulator, PubSubEmulator
    from builder.local_stack.gcp.cloud_tasks import CloudTasksEmulator


@pytest.fixture(scope="session")
def firestore_emulator() -> Iterator[FirestoreEmulator]:
    """The Firestore emulator; sets FIRESTORE_EMULATOR_HOST for the session."""
    from builder.local_stack.gcp import FirestoreEmulator

    with FirestoreEmulator() as emulator, environment(emulator.env()):
        yield emulator


@pytest.fixture(scope="session")
def pubsub_emulator() -> Iterator[PubSubEmulator]:
    """The Pub/Sub emulator; sets PUBSUB_EMULATOR_HOST for the session."""
    from builder.local_stack.gcp import PubSubEmulator

    with PubSubEmulator() as emulator, environment(emulator.env()):
        yield emulator


@pytest.fixture(scope="session")
def cloud_tasks_emulator() -> Iterator[CloudTasksEmulator]:
    """The Cloud Tasks emulator; sets its host variable for the session."""
    from builder.local_stack.gcp.cloud_tasks import CloudTasksEmulator

    with CloudTasksEmulator() as emulator, environment(emulator.env()):
        yield emulator


class environment:
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
