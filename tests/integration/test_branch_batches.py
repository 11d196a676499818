"""A worker's batch of fan-in branches on the SQLite store (`Runtime.handle_many`,
`Store.create_joining_many`): each handler runs, the batch's checkpoints and join adds are made
in one transaction, then each egress. What a delivery sees must not differ from being handled
alone: the same records, a failing handler retried alone, a failed write redelivering its
branches with each committing once."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.maps import map_sum
from unum_entry.codec import decode
from unum_entry.errors import StoreError
from unum_entry.local.platform import LocalPlatform
from unum_entry.local.queue import SQLiteQueue
from unum_entry.stores.base import Kind
from unum_entry.stores.sqlite import SQLiteStore
from unum_entry.workflow import write_workflow

pytestmark = pytest.mark.integration

WIDTH = 300
MAP = map_sum(WIDTH)
EXPECTED = sum(2 * i for i in range(WIDTH))


class Batches:
    """Counts the store's batched writes (`_create_joining_many`) and their items."""

    def __init__(self, store: SQLiteStore, fail_first: int = 0) -> None:
        self.writes: list[int] = []
        self.failed = 0
        self._fail_first = fail_first
        self._lock = threading.Lock()
        original = store._create_joining_many

        def counting(items: list[Any]) -> Any:
            with self._lock:
                if self.failed < self._fail_first:
                    self.failed += 1
                    raise StoreError("injected: the batch's transaction failed")
                self.writes.append(len(items))
            return original(items)

        store._create_joining_many = counting  # type: ignore[method-assign]

    @property
    def batched(self) -> int:
        """Branches committed in writes of more than one."""
        return sum(n for n in self.writes if n > 1)


def run_map(tmp_path: Path, name: str, *, batching: bool = True, fail_first: int = 0,
            wrap: Any = None) -> tuple[Any, SQLiteStore, Batches, Counter[str]]:
    workflow = write_workflow(tmp_path / f"wf-{name}", name="map", entry="Split", functions=MAP)
    store = SQLiteStore.open(tmp_path / f"{name}.db")
    batches = Batches(store, fail_first)
    with LocalPlatform(workflow, store, workers=1, queue=SQLiteQueue(store.database), wrap=wrap,
                       retry_delay=0.001) as platform:
        platform._batching = batching
        outcome = platform.run(None, workflow_id="wf-batches", timeout=120)
        stats = Counter(platform.stats)
    return outcome, store, batches, stats


def records(store: SQLiteStore) -> dict[str, Any]:
    """Every checkpoint's value (without its history stamp) and every set's members."""
    found: dict[str, Any] = {}
    for record in store.records("wf-batches"):
        if record.kind is Kind.CHECKPOINT:
            found[record.key] = decode(record.value)
        elif record.kind is Kind.SET:
            found[record.key] = dict(record.members)
    return found


def test_a_map_committed_in_batches_leaves_the_records_one_by_one_would(tmp_path: Path) -> None:
    batched, store, batches, stats = run_map(tmp_path, "batched")
    alone, other, none, _ = run_map(tmp_path, "alone", batching=False)
    assert batched.result == alone.result == EXPECTED
    assert batches.batched > WIDTH // 2, batches.writes  # most branches were committed in batches
    assert none.writes == []
    assert records(store) == records(other)
    assert stats["committed"] == WIDTH + 2 and stats["replayed"] == 0
    store.close()
    other.close()


def test_a_handler_failing_in_a_batch_is_retried_alone(tmp_path: Path) -> None:
    calls: Counter[int] = Counter()

    def wrap(name: str, handler: Any) -> Any:
        if name != "Item":
            return handler

        def flaky(event: Any, context: Any) -> Any:
            calls[event] += 1
            if event == 37 and calls[event] == 1:
                raise ValueError("first attempt of item 37")
            return handler(event, context)

        return flaky

    outcome, store, batches, stats = run_map(tmp_path, "flaky", wrap=wrap)
    assert outcome.result == EXPECTED
    assert batches.batched > WIDTH // 2, batches.writes
    assert calls[37] == 2 and all(calls[i] == 1 for i in range(WIDTH) if i != 37)
    assert stats["handler_retries"] == 1 and stats["committed"] == WIDTH + 2
    store.close()


def test_a_batch_whose_write_fails_is_delivered_again_and_each_branch_commits_once(tmp_path: Path) -> None:
    outcome, store, batches, stats = run_map(tmp_path, "failing", fail_first=2)
    assert outcome.result == EXPECTED
    assert batches.failed == 2 and stats["redeliveries"] >= 2
    assert stats["committed"] == WIDTH + 2 and stats["dead_letters"] == 0
    assert len([key for key, value in records(store).items() if isinstance(value, int)]) == WIDTH
    store.close()
