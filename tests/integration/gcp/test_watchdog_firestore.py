"""The deadline watchdog and timer fault schedules (tests/support/watchdog_schedules.py) on the
Firestore store (Google's emulator over loopback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.watchdog_schedules import SCHEDULES
from unum_entry.stores.base import Store
from unum_entry.stores.firestore import FirestoreStore

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_on_firestore(schedule: str, firestore_store: FirestoreStore, tmp_path: Path) -> None:
    def make(ttl: int) -> Store:
        return FirestoreStore(firestore_store.client, firestore_store.collection, ttl_seconds=ttl)

    SCHEDULES[schedule](make, tmp_path)
