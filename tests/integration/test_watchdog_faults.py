"""The deadline watchdog and timer fault schedules (tests/support/watchdog_schedules.py) on the
embedded local platform over the file store and DynamoDB (moto server over loopback); Firestore
runs them in tests/integration/gcp/test_watchdog_firestore.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.watchdog_schedules import SCHEDULES
from unum_entry.stores.base import Store
from unum_entry.stores.dynamodb import DynamoDBStore
from unum_entry.stores.file import FileStore

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_on_the_file_store(schedule: str, tmp_path: Path) -> None:
    SCHEDULES[schedule](lambda ttl: FileStore(tmp_path / "store", ttl_seconds=ttl), tmp_path)


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_on_dynamodb(schedule: str, dynamodb_store: DynamoDBStore, tmp_path: Path) -> None:
    def make(ttl: int) -> Store:
        return DynamoDBStore(dynamodb_store.client, dynamodb_store.table, ttl_seconds=ttl)

    SCHEDULES[schedule](make, tmp_path)
