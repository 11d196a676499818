"""`run`'s delivery queue and its driver record: resuming, cooperating, stopping honestly.

`run` keeps its pending deliveries and timers in a database (`unum_entry.local.queue.SQLiteQueue`),
so a `run` killed at any instant is resumed by running it again with the same `--workflow-id`:
the deliveries it left are re-driven. The database is the SQLite store's own, a file store's
`queue.db`, or for a DynamoDB or Firestore store a file of this machine's
(`.unum/queue-<digest>.db` in the current directory: `unum_entry.local.runs.queue_path`). A
store with no such place (the memory store of the Python API) gets a queue in memory.

One process drives a workflow at a time (`unum_entry.local.runs`): a second `run` of the same id
waits for the first one's outcome and prints it (exit 0), or takes over if the first one dies.
SIGTERM stops a run like Ctrl-C (the queue is flushed; the resume command is printed;
builder.commands.interrupts).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from unum_entry.errors import WorkflowTimeout
from unum_entry.local.queue import DeliveryQueue, MemoryQueue, SQLiteQueue
from unum_entry.local.runs import Owner, Runs, queue_path
from unum_entry.stores.base import Store

FOLLOW_POLL = 0.2  # seconds between a following run's looks at the store


@dataclass
class RunQueue:
    """The queue `run` gives its LocalPlatform, and the driver records beside it (None: the
    store keeps no queue database)."""

    queue: DeliveryQueue
    runs: Runs | None

    @classmethod
    def for_store(cls, store: Store) -> RunQueue:
        from unum_entry.stores.sqlite import SQLiteStore

        if isinstance(store, SQLiteStore):  # the journal shares the store's database: module docstring of queue.py
            return cls(SQLiteQueue(store.database), Runs(store.database))
        path = queue_path(store)
        if path is None:
            return cls(MemoryQueue(), None)
        return cls(SQLiteQueue(path), Runs(path))

    def close(self) -> None:
        if self.runs is not None:
            self.runs.close()


def follow(runs: Runs, workflow_id: str, owner: Owner, *, timeout: float, ended: Callable[[], bool],
           message: Callable[[str], None]) -> bool:
    """Wait while `owner` drives `workflow_id`: True once the workflow `ended()`; False once this
    process has become its driver (the owner stopped or died first). Raises WorkflowTimeout."""
    since = datetime.fromtimestamp(owner.since, timezone.utc).strftime("%H:%M:%S UTC")
    message(f"workflow {workflow_id} is being run by process {owner.pid} (since {since}); waiting for its outcome")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ended():
            return True
        if runs.acquire(workflow_id) is None:
            message(f"process {owner.pid} stopped driving workflow {workflow_id}; continuing it here")
            return False
        time.sleep(FOLLOW_POLL)
    raise WorkflowTimeout(f"workflow {workflow_id} still run by process {owner.pid} after {timeout:g} s")


def utc(epoch: float) -> str:
    """An instant as `2026-11-25 13:05:00 UTC`."""
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
