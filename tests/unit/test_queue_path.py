"""Where `run` journals its delivery queue (unum_entry.local.runs.queue_path): a DynamoDB or
Firestore store gets one file of this machine per table or collection on its endpoint, in
`.unum/` of the current directory; the same data opened twice maps to the same file."""

from __future__ import annotations

from pathlib import Path

import pytest

from unum_entry.local.runs import queue_path
from unum_entry.stores import open_store

pytestmark = pytest.mark.unit


def dynamodb_path(table: str, endpoint: str = "http://127.0.0.1:5001", region: str = "us-east-1") -> Path | None:
    store = open_store(f"dynamodb://{table}?endpoint={endpoint}&region={region}")  # builds a client, sends nothing
    try:
        return queue_path(store)
    finally:
        store.close()


def test_a_dynamodb_table_on_its_endpoint_names_one_queue_file_in_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = dynamodb_path("orders")
    assert path is not None and path.parent == tmp_path / ".unum" and path.name.startswith("queue-")
    assert dynamodb_path("orders") == path
    others = {dynamodb_path("orders2"), dynamodb_path("orders", endpoint="http://127.0.0.1:5002"),
              dynamodb_path("orders", region="eu-west-1")}
    assert path not in others and len(others) == 3
    assert not path.exists(), "queue_path only names the file"


def test_a_firestore_collection_names_its_own_queue_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:8085")

    def path(url: str) -> Path | None:
        store = open_store(url)
        try:
            return queue_path(store)
        finally:
            store.close()

    first = path("firestore://orders?project=demo-a")
    assert first is not None and first.parent == tmp_path / ".unum"
    assert path("firestore://orders?project=demo-a") == first
    assert len({first, path("firestore://orders?project=demo-b"), path("firestore://other?project=demo-a")}) == 3
