"""Who drives a workflow on the embedded engine, and what a store's delivery queue says of it.

One `python -m builder run` process at a time drives a workflow id: it records itself (host,
pid, the process's start time) in the queue database's `unum_runs` table before it delivers
anything (`acquire`), and removes the record when it stops (`release`). A second `run` of the
same id finds the first one alive and waits for its outcome instead of racing it; a record whose
process is gone (killed) is taken over. Owner liveness is exact on one machine: the pid must
exist AND have the recorded start time, so a reused pid is not mistaken for the owner. A pid on
another host (a store file on a shared disk) cannot be checked: the driver refreshes its record's
`heartbeat` every `HEARTBEAT_INTERVAL` seconds (a thread, from `acquire` to `release`), and a
record of another host whose heartbeat is older than `STALE_AFTER` seconds counts as dead. The
two hosts' clocks may disagree by minutes, so `acquire` does not trust the other clock alone: a
heartbeat that looks stale (or ahead) on this clock is alive while it keeps changing, watched on
this process's monotonic clock; unchanged for `STALE_AFTER` seconds of watching, it is dead.

`run_state` is what `list`, `inspect` and the UI ask: a workflow with no outcome whose deliveries
are pending (or whose owner was killed before its queue was written) and that no live process
drives is `interrupted` (resumable with `run --workflow-id ID --resume`); one with only timers
pending and no live driver is waiting for its next timer.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from unum_entry.errors import StoreError
from unum_entry.local.queue import open_database
from unum_entry.stores.base import ClientStore, Store
from unum_entry.stores.sqlite_database import Database

QUEUE_FILE = "queue.db"  # in a file store's folder
REMOTE_QUEUE_FOLDER = ".unum"  # in the current directory: the queue files of DynamoDB and Firestore stores
HEARTBEAT_INTERVAL = 2.0  # seconds between a driver's heartbeats
STALE_AFTER = 10.0        # seconds without a heartbeat after which another host's driver counts as dead


@dataclass(frozen=True, slots=True)
class Owner:
    """A process that drives (or drove) a workflow."""

    host: str
    pid: int
    pid_started: str
    since: float
    heartbeat: float | None = None  # epoch seconds (None: a record of an older unum, which had none)

    def alive(self, now: float | None = None) -> bool:
        """Whether this process still runs: on this host, its pid with its start time; on
        another, a heartbeat at most `STALE_AFTER` seconds old (by `now`, default this clock)."""
        if self.host != socket.gethostname():
            last = self.since if self.heartbeat is None else self.heartbeat
            return (time.time() if now is None else now) - last <= STALE_AFTER
        return _process_started(self.pid) == self.pid_started


def me() -> Owner:
    """The calling process as an owner."""
    now = time.time()
    return Owner(socket.gethostname(), os.getpid(), _process_started(os.getpid()) or "", now, now)


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
    `queue.db` in a file store's folder; for a store reached over the network (DynamoDB,
    Firestore: a `ClientStore`), `.unum/queue-<digest of its location>.db` in the current
    directory (beside `run`'s default store: the queue is this machine's, the store is not);
    None for other stores (the memory store: its queue is in memory)."""
    from unum_entry.stores.file import FileStore

    if isinstance(store, FileStore):
        return Path(store.root) / QUEUE_FILE
    if isinstance(store, ClientStore):
        digest = hashlib.sha256(store.location().encode()).hexdigest()[:16]
        return Path.cwd() / REMOTE_QUEUE_FOLDER / f"queue-{digest}.db"
    try:
        from unum_entry.stores.sqlite import SQLiteStore
    except ImportError:  # pragma: no cover - the SQLite store is part of unum
        return None
    if isinstance(store, SQLiteStore):
        return Path(store.path)
    return None


class Runs:
    """The `unum_runs` table (and the queue's rows) of the queue database (module docstring):
    the SQLite store's own `Database` (shared, not closed here) or a path, as `SQLiteQueue`.
    Every error leaves as the database's one-line StoreError."""

    def __init__(self, database: Database | str | os.PathLike[str], *,
                 heartbeat_interval: float = HEARTBEAT_INTERVAL, stale_after: float = STALE_AFTER) -> None:
        self.database, self._owns_database = open_database(database)
        self.path = os.fspath(self.database.path)
        self._interval = heartbeat_interval
        self._stale_after = stale_after
        # workflow -> (another host's driver and heartbeat as last read, monotonic time first read so)
        self._watched: dict[str, tuple[tuple[str, int, float], float]] = {}
        self._beating: dict[str, threading.Event] = {}  # workflow -> set to stop its heartbeat thread

    def acquire(self, workflow: str) -> Owner | None:
        """Record this process as `workflow`'s driver; returns None when it now is, or the live
        process that drives it already."""
        mine = me()

        def acquire(conn: sqlite3.Connection) -> Owner | None:
            found = self._owner(conn, workflow)
            if found is not None and self._alive(workflow, found) and (found.host, found.pid) != (mine.host, mine.pid):
                return found
            conn.execute("INSERT OR REPLACE INTO unum_runs (workflow, host, pid, pid_started, since, heartbeat) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         (workflow, mine.host, mine.pid, mine.pid_started, mine.since, mine.heartbeat))
            return None

        found = self.database.write(acquire)
        if found is None and workflow not in self._beating:
            stop = self._beating[workflow] = threading.Event()
            threading.Thread(target=self._beat, args=(workflow, mine, stop), name="unum-run-heartbeat",
                             daemon=True).start()
        return found

    def _alive(self, workflow: str, owner: Owner) -> bool:
        """`owner.alive()` on this host. Another host's driver is alive while its heartbeat is
        within `stale_after` seconds of this clock either way, or has changed within the last
        `stale_after` seconds this process watched it (module docstring: clocks that disagree)."""
        if owner.host == socket.gethostname():
            return owner.alive()
        beat = owner.since if owner.heartbeat is None else owner.heartbeat
        now, mark = time.monotonic(), (owner.host, owner.pid, beat)
        seen = self._watched.get(workflow)
        if seen is None or seen[0] != mark:
            self._watched[workflow] = seen = (mark, now)
        return abs(time.time() - beat) <= self._stale_after or now - seen[1] <= self._stale_after

    def release(self, workflow: str) -> None:
        """Drop this process's record of driving `workflow` (another's stays); stop its heartbeat."""
        stop = self._beating.pop(workflow, None)
        if stop is not None:
            stop.set()
        mine = me()
        self.database.write(lambda conn: conn.execute(
            "DELETE FROM unum_runs WHERE workflow = ? AND host = ? AND pid = ?", (workflow, mine.host, mine.pid)))

    def _beat(self, workflow: str, mine: Owner, stop: threading.Event) -> None:
        """Refresh this process's record's heartbeat every interval until `stop` (a failed
        refresh is retried at the next beat: a record left stale long enough is taken over)."""
        while not stop.wait(self._interval):
            try:
                self.database.write(lambda conn: conn.execute(  # no fsync needed: liveness, not data
                    "UPDATE unum_runs SET heartbeat = ? WHERE workflow = ? AND host = ? AND pid = ?",
                    (time.time(), workflow, mine.host, mine.pid)), sync=False)
            except StoreError:
                continue

    def drop_timers(self, workflow: str) -> None:
        """Forget `workflow`'s timers (its deadline watchdog's, a Task's timeout left after the
        Task ended): once it has an outcome they would change nothing when they fire
        (unum_entry.watchdog; a continuation of an ended workflow is stale), and nothing else
        ever removes them."""
        self.database.write(lambda conn: conn.execute(
            "DELETE FROM unum_queue WHERE workflow = ? AND (background OR timer IS NOT NULL)", (workflow,)))

    def forget(self, workflows: list[str]) -> int:
        """Delete every queued delivery, timer and driver record of `workflows` (`rm`, `gc`: the
        workflows' records are gone, so nothing queued for them may run); returns the rows deleted."""
        def forget(conn: sqlite3.Connection) -> int:
            deleted = 0
            for workflow in workflows:
                for table in ("unum_queue", "unum_fan_outs", "unum_fan_out_runs", "unum_runs"):
                    deleted += conn.execute(f"DELETE FROM {table} WHERE workflow = ?", (workflow,)).rowcount
            return deleted

        return self.database.write(forget) if workflows else 0

    def owner(self, workflow: str) -> Owner | None:
        """The recorded driver of `workflow` (alive or not), or None."""
        return self.database.read(lambda conn: self._owner(conn, workflow))

    def close(self) -> None:
        """Stop every heartbeat; close the database if this opened it (a path)."""
        for stop in self._beating.values():
            stop.set()
        self._beating.clear()
        if self._owns_database:
            self.database.close()

    @staticmethod
    def _owner(conn: sqlite3.Connection, workflow: str) -> Owner | None:
        try:
            row = conn.execute("SELECT host, pid, pid_started, since, heartbeat FROM unum_runs WHERE workflow = ?",
                               (workflow,)).fetchone()
        except sqlite3.OperationalError as exc:  # a database of an older unum, read-only here: no heartbeat yet
            if "heartbeat" not in str(exc):
                raise
            row = conn.execute("SELECT host, pid, pid_started, since, NULL FROM unum_runs WHERE workflow = ?",
                               (workflow,)).fetchone()
        if row is None:
            return None
        return Owner(row[0], int(row[1]), str(row[2]), float(row[3]), None if row[4] is None else float(row[4]))


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
            if "unum_fan_out_runs" in tables:  # a fan-out's calls journaled as runs (unum_entry.local.queue)
                deliveries += conn.execute("SELECT coalesce(sum((stop - start + step - 1) / step), 0) "
                                           "FROM unum_fan_out_runs WHERE workflow = ?", (workflow,)).fetchone()[0]
            owner = Runs._owner(conn, workflow) if "unum_runs" in tables else None
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise StoreError(f"delivery queue {path}: {exc}") from exc
    return RunState(int(deliveries), int(timers), next_timer, owner)


def open_runs(store: Store) -> Runs | None:
    """The `Runs` of `store`'s queue database if it has one already (the SQLite store's own
    database, shared; a file store's existing `queue.db`), else None. Never creates a file."""
    from unum_entry.stores.sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        return Runs(store.database)
    path = queue_path(store)
    if path is None or not path.exists():
        return None
    return Runs(path)


def forget_workflows(store: Store, workflows: list[str]) -> int:
    """`rm`: delete the queued deliveries, timers and driver records of `workflows` from
    `store`'s queue database (nothing may run for a workflow whose records are gone); returns
    the rows deleted (0 when the store keeps no queue database)."""
    runs = open_runs(store)
    if runs is None:
        return 0
    try:
        return runs.forget(workflows)
    finally:
        runs.close()


def collect(store: Store, horizon: float) -> int:
    """`gc`: delete the queue rows (deliveries, timers, driver records) of every workflow that
    has no live record left in `store`, no live driver, and whose rows are all older than
    `horizon` (epoch seconds: queued deliveries due, driver records made, by then), so a run that
    has journaled its entry but committed nothing yet is left alone. Returns the rows deleted."""
    runs = open_runs(store)
    if runs is None:
        return 0
    try:
        def candidates(conn: sqlite3.Connection) -> set[str]:
            queued = conn.execute("SELECT workflow FROM (SELECT workflow, ready_at FROM unum_queue UNION ALL "
                                  "SELECT workflow, ready_at FROM unum_fan_outs) GROUP BY workflow "
                                  "HAVING max(ready_at) <= ?", (horizon,)).fetchall()
            young = {r[0] for r in conn.execute("SELECT workflow FROM unum_runs WHERE since > ?", (horizon,))}
            drivers = conn.execute("SELECT workflow FROM unum_runs WHERE since <= ? AND workflow NOT IN "
                                   "(SELECT workflow FROM unum_queue WHERE ready_at > ?)", (horizon, horizon)).fetchall()
            return {r[0] for r in queued + drivers} - young

        found = runs.database.read(candidates)
        dead = []
        for workflow in sorted(found):
            owner = runs.owner(workflow)
            if (owner is None or not owner.alive()) and next(iter(store.records(workflow)), None) is None:
                dead.append(workflow)
        return runs.forget(dead)
    finally:
        runs.close()
