"""Who drives a workflow on the embedded engine, and what a store's delivery queue says of it.

One `python -m builder run` process at a time drives a workflow id: it records itself (host,
pid, the process's start time) in the queue database's `unum_runs` table before it delivers
anything (`acquire`), and removes the record when it stops (`release`). A second `run` of the
same id finds the first one alive and waits for its outcome instead of racing it; a record whose
process is gone (killed) is taken over. Owner liveness is exact on one machine: the pid must
exist AND have the recorded start time, so a reused pid is not mistaken for the owner.

`run_state` is what `list`, `inspect` and the UI ask: a workflow with no outcome whose deliveries
are pending (or whose owner was killed before its queue was written) and that no live process
drives is `interrupted` (resumable with `run --workflow-id ID --resume`); one with only timers
pending and no live driver is waiting for its next timer.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from unum_entry.errors import StoreError
from unum_entry.local.queue import connect, transaction
from unum_entry.stores.base import Store

QUEUE_FILE = "queue.db"  # in a file store's folder


@dataclass(frozen=True, slots=True)
class Owner:
    """A process that drives (or drove) a workflow."""

    host: str
    pid: int
    pid_started: str
    since: float

    def alive(self) -> bool:
        """Whether this process still runs (on another host: assumed alive)."""
        if self.host != socket.gethostname():
            return True
        return _process_started(self.pid) == self.pid_started


def me() -> Owner:
    """The calling process as an owner."""
    return Owner(socket.gethostname(), os.getpid(), _process_started(os.getpid()) or "", time.time())


def _process_started(pid: int) -> str | None:
    """A token for when process `pid` started (Linux: /proc/PID/stat field 22), "" where /proc
    is absent but the pid exists, None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2:].split()[19].decode()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return ""
        return ""


def queue_path(store: Store) -> Path | None:
    """The database that holds `store`'s delivery queue: the SQLite store's own file, or
    `queue.db` in a file store's folder; None for other stores (their queue is in memory)."""
    from unum_entry.stores.file import FileStore

    if isinstance(store, FileStore):
        return Path(store.root) / QUEUE_FILE
    try:
        from unum_entry.stores.sqlite import SQLiteStore
    except ImportError:  # pragma: no cover - the SQLite store is part of unum
        return None
    if isinstance(store, SQLiteStore):
        return Path(store.path)
    return None


class Runs:
    """The `unum_runs` table of the queue database at `path` (module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._conn = connect(self.path)

    def acquire(self, workflow: str) -> Owner | None:
        """Record this process as `workflow`'s driver; returns None when it now is, or the live
        process that drives it already."""
        mine = me()
        try:
            with transaction(self._conn) as conn:
                found = self._owner(conn, workflow)
                if found is not None and found.alive() and (found.host, found.pid) != (mine.host, mine.pid):
                    return found
                conn.execute("INSERT OR REPLACE INTO unum_runs VALUES (?, ?, ?, ?, ?)",
                             (workflow, mine.host, mine.pid, mine.pid_started, mine.since))
        except sqlite3.Error as exc:
            raise StoreError(f"delivery queue {self.path}: {exc}") from exc
        return None

    def release(self, workflow: str) -> None:
        """Drop this process's record of driving `workflow` (another's stays)."""
        mine = me()
        try:
            with transaction(self._conn) as conn:
                conn.execute("DELETE FROM unum_runs WHERE workflow = ? AND host = ? AND pid = ?",
                             (workflow, mine.host, mine.pid))
        except sqlite3.Error as exc:
            raise StoreError(f"delivery queue {self.path}: {exc}") from exc

    def drop_watchdog(self, workflow: str) -> None:
        """Forget `workflow`'s deadline watchdog timers: once it has an outcome they would
        change nothing when they fire (unum_entry.watchdog), and nothing else ever removes them."""
        try:
            with transaction(self._conn) as conn:
                conn.execute("DELETE FROM unum_queue WHERE workflow = ? AND background", (workflow,))
        except sqlite3.Error as exc:
            raise StoreError(f"delivery queue {self.path}: {exc}") from exc

    def owner(self, workflow: str) -> Owner | None:
        """The recorded driver of `workflow` (alive or not), or None."""
        return self._owner(self._conn, workflow)

    def close(self) -> None:
        self._conn.close()

    @staticmethod
    def _owner(conn: sqlite3.Connection, workflow: str) -> Owner | None:
        row = conn.execute("SELECT host, pid, pid_started, since FROM unum_runs WHERE workflow = ?",
                           (workflow,)).fetchone()
        return None if row is None else Owner(row[0], int(row[1]), str(row[2]), float(row[3]))


@dataclass(frozen=True, slots=True)
class RunState:
    """What the queue database knows of one workflow: deliveries pending (timers apart), when
    the next timer is due (epoch seconds), and its recorded driver."""

    deliveries: int
    timers: int
    next_timer: float | None
    owner: Owner | None

    @property
    def driven(self) -> bool:
        """A live process drives it."""
        return self.owner is not None and self.owner.alive()

    @property
    def interrupted(self) -> bool:
        """Pending work (or a driver killed before its queue was written) and no live driver."""
        if self.driven:
            return False
        return self.deliveries > 0 or (self.owner is not None and not self.timers)

    @property
    def timer_only(self) -> bool:
        """Only timers pending and no live driver: waiting until `next_timer`."""
        return not self.driven and not self.deliveries and self.timers > 0


def run_state(store: Store, workflow: str) -> RunState | None:
    """`workflow`'s state in `store`'s delivery queue; None when the store keeps no queue
    database (or it does not exist yet). Reads only; never creates the file."""
    path = queue_path(store)
    if path is None or not path.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "unum_queue" not in tables:
                return None
            deliveries, timers, next_timer = conn.execute(
                "SELECT count(*) FILTER (WHERE timer IS NULL), count(*) FILTER (WHERE timer IS NOT NULL AND NOT "
                "background), min(ready_at) FILTER (WHERE timer IS NOT NULL AND NOT background) FROM unum_queue "
                "WHERE workflow = ?", (workflow,)).fetchone()
            owner = Runs._owner(conn, workflow) if "unum_runs" in tables else None
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StoreError(f"delivery queue {path}: {exc}") from exc
    return RunState(int(deliveries), int(timers), next_timer, owner)
