"""The embedded platform's delivery queue: deliveries (and timers) accepted but not yet done.

`DeliveryQueue` is what `LocalPlatform` schedules from: a heap of deliveries by the wall-clock
instant they are due. `MemoryQueue` is that heap alone (it dies with the process). `SQLiteQueue`
also journals every accepted delivery to a SQLite database file, and removes it there only once
its processing ended (done, dropped, failed, or re-queued as a new delivery):

- the journal is written in the order the platform made its calls, in batches (every pending
  operation at once, in one transaction): a delivery's successors (the invokes its execution
  made, its retry) are journaled before the delivery is removed, and a batch is atomic, so the
  file always holds a prefix of the platform's history. A thread gathers a burst for
  `BATCH_INTERVAL`, then marks it due, and the database's next commit carries it (`_ride`);
  the thread commits it itself only when no commit came within another interval. A SIGKILL
  (or, with `synchronous=NORMAL` in WAL mode, a power loss: SQLite loses at most a suffix of the
  WAL) leaves every delivery whose processing had not ended (plus some that had: at-least-once,
  absorbed by the runtime's checkpoints);
- a delivery accepted and finished within one batch never reaches the disk (its put and its
  removal cancel), so a hot chain costs the journal almost nothing;
- `recover(workflow)` loads what a dead process left, to be delivered again.

Rows carry the workflow id, so one database serves every workflow of a store. With the SQLite
store the journal shares the store's `Database` (`SQLiteQueue(store.database)`): one file, one
writer connection, the store's durability, and a journal batch rides in the transaction (and
the one fsync) of the store's next commit: `Database.add_rider`. A file store's queue
is `queue.db` in its folder, a DynamoDB or Firestore store's a file of this machine
(`.unum/queue-<digest>.db`: `unum_entry.local.runs.queue_path`), opened with durability normal.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import os
import secrets
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from unum_entry.envelope import Envelope
from unum_entry.errors import StoreError, StoreMisuse, StoreUnusable
from unum_entry.local.handoff import call_wire
from unum_entry.stores.sqlite_database import Database, Durability

if TYPE_CHECKING:
    from unum_entry.plan import FanOutCalls

log = logging.getLogger("unum.local")

SCHEMA = ["""
CREATE TABLE IF NOT EXISTS unum_queue (
    id INTEGER PRIMARY KEY,      -- unique across processes (a random base per process + a counter)
    workflow TEXT NOT NULL,
    function TEXT NOT NULL,
    payload BLOB NOT NULL,       -- the envelope as on the wire (msgpack)
    ready_at REAL NOT NULL,      -- epoch seconds: due at or after
    failures INTEGER NOT NULL,   -- consecutive failed deliveries before this one
    timer TEXT,                  -- the timer's name (Invoker.invoke_at), NULL for an invoke
    background INTEGER NOT NULL  -- 1: a deadline watchdog's timer (nobody waits for it)
)""",
    "CREATE INDEX IF NOT EXISTS unum_queue_workflow ON unum_queue (workflow)",
    """CREATE TABLE IF NOT EXISTS unum_runs (
    workflow TEXT PRIMARY KEY,   -- one `run` process drives a workflow at a time (unum_entry.local.runs)
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pid_started TEXT NOT NULL,   -- the process's start time (/proc), so a reused pid is not mistaken for it
    since REAL NOT NULL,
    heartbeat REAL               -- epoch seconds of the driver's last sign of life (another host's liveness)
)"""]
#: Columns added since a table was first released: (table, column, declaration), added on open.
ADDED_COLUMNS = [("unum_runs", "heartbeat", "REAL")]
FLUSH_PATIENCE = 5.0    # seconds a failing journal may keep `flush` waiting before it raises
BATCH_INTERVAL = 0.005   # seconds the journal gathers operations before writing them in one transaction
MAX_BACKOFF = 1.0        # seconds between attempts at a journal write that failed
#: Rows waiting for the journal beyond which a fan-out's sender waits for them to be written
#: (`SQLiteQueue.journal_run`): a wide fan-out is encoded faster than it is written, and each
#: row holds its wire form until then (a 100,000-item map held all of them, ~400 B per branch).
JOURNAL_BACKLOG = 4096


@dataclass(slots=True, eq=False)
class Delivery:
    """One accepted delivery: `payload` is the envelope as on the wire; `timer` the timer's name
    (`Invoker.invoke_at`) or None; `id` names its journal row (0 in a MemoryQueue);
    `background`: a deadline watchdog's timer, which `LocalPlatform.wait_idle` never waits for.
    `envelope`: the envelope itself, sealed (unum_entry.local.handoff), when it was handed over
    in this process: a worker's own next delivery, never a queued fan-out's (an object per
    branch). `source`, `position`: a fan-out's call handed over as its position in the
    fan-out's calls, built when taken (unum_entry.local.handoff.open_call).
    `payload` is empty when either is set - except in a durable queue, which journals it (a
    queued fan-out call only until it is journaled: its row keeps the wire form, `wire` builds
    it again)."""

    workflow: str
    function: str
    payload: bytes
    failures: int = 0
    timer: str | None = None
    id: int = 0
    background: bool = False
    envelope: Envelope | None = None
    source: FanOutCalls | None = None
    position: int = 0

    def wire(self) -> bytes:
        """The envelope as on the wire: `payload`, or a fan-out's call built anew (empty for an
        envelope handed over in memory alone)."""
        if self.payload or self.source is None:
            return self.payload
        return call_wire(self.source, self.position)

    def again(self, failures: int) -> Delivery:
        """The same delivery accepted once more (a redelivery, a fault's extra copy): a new journal row."""
        return Delivery(self.workflow, self.function, self.payload, failures, self.timer,
                        background=self.background, envelope=self.envelope, source=self.source,
                        position=self.position)


@dataclass(slots=True, eq=False)
class CallRun:
    """Consecutive calls of one fan-out waiting as one queue entry, not an object per call:
    (`calls`, `positions`), each made a `Delivery` (by position, unum_entry.local.handoff) only
    when taken. `first_id`: the journal row of the first call, the others' following it (0 in a
    MemoryQueue: no rows). `taken`: how many calls have been taken so far."""

    calls: FanOutCalls
    positions: range
    first_id: int = 0
    taken: int = 0

    def __len__(self) -> int:
        return len(self.positions) - self.taken

    def take(self) -> Delivery:
        """The next call as a delivery (the run must not be empty)."""
        delivery = self._delivery(self.taken)
        self.taken += 1
        return delivery

    def pending(self) -> list[Delivery]:
        """The calls not taken yet, as deliveries (diagnostics: nothing is taken)."""
        return [self._delivery(k) for k in range(self.taken, len(self.positions))]

    def _delivery(self, k: int) -> Delivery:
        position = self.positions[k]
        calls = self.calls
        return Delivery(calls.workflow, calls.functions[position], b"", id=self.first_id + k if self.first_id else 0,
                        source=calls, position=position)


class DeliveryQueue(ABC):
    """Deliveries by due time (epoch seconds). Not thread-safe: the platform calls `push`,
    `push_run`, `requeue`, `pop_due`, `next_due`, `snapshot` and `__len__` under its lock;
    `journal`, `journal_run`, `finish`, `recover`, `flush` and `close` are safe from any thread.

    Compact: a delivery due when pushed (nearly all: invokes) waits in a FIFO as the bare
    `Delivery` (~250 B with its envelope), and a fan-out's calls as `CallRun`s (`push_run`:
    nothing per call); only delayed ones (backoffs, timers) pay for a heap entry with their due
    time."""

    def __init__(self) -> None:
        self._due: deque[Delivery | CallRun] = deque()
        self._in_runs = 0  # calls waiting in the runs of `_due` beyond one per run (`__len__`)
        self._heap: list[tuple[float, int, Delivery]] = []
        self._seq = itertools.count()

    def push(self, delivery: Delivery, ready_at: float) -> None:
        """Accept `delivery`, due at `ready_at`; a SQLiteQueue journals it first."""
        if ready_at <= time.time():
            self._due.append(delivery)
        else:
            heapq.heappush(self._heap, (ready_at, next(self._seq), delivery))

    def journal(self, delivery: Delivery, ready_at: float) -> None:
        """Accept `delivery` without queueing it here: its accepter delivers it itself (a
        worker's own next delivery, `LocalPlatform`), unless it hands it back with `requeue`.
        A SQLiteQueue journals it, as `push` would; safe from any thread."""

    def journal_run(self, run: CallRun, wires: Sequence[bytes]) -> None:
        """Accept `run`'s calls, to be queued by `push_run`: a SQLiteQueue journals each with
        its wire form (`wires`, in the run's order; unused in memory) and numbers the rows
        (`run.first_id`); safe from any thread, and to be called before the delivery that made
        the calls is finished."""

    def push_run(self, run: CallRun) -> None:
        """Queue `run`'s calls, due now, accepted before (`journal_run`)."""
        self._due.append(run)
        self._in_runs += len(run) - 1

    def requeue(self, delivery: Delivery) -> None:
        """Queue, due now and behind what is due already, a delivery accepted before (`journal`:
        it is not journaled again)."""
        self._due.append(delivery)

    def pop_due(self, now: float) -> Delivery | None:
        """A delivery due at `now` - a delayed one whose time came first, else the oldest
        pushed due - or None. It stays journaled until `finish`."""
        heap = self._heap
        if heap and heap[0][0] <= now:
            return heapq.heappop(heap)[2]
        due = self._due
        if not due:
            return None
        head = due[0]
        if not isinstance(head, CallRun):
            due.popleft()
            return head
        if len(head) > 1:
            self._in_runs -= 1
        else:
            due.popleft()
        return head.take()

    def next_due(self) -> float | None:
        """When the earliest queued delivery is due (0.0: now), or None if nothing is queued."""
        if self._due:
            return 0.0
        return self._heap[0][0] if self._heap else None

    def snapshot(self) -> list[tuple[float, Delivery]]:
        """Every queued delivery with its due time (0.0: due since it was pushed; diagnostics)."""
        due = [d for entry in self._due for d in (entry.pending() if isinstance(entry, CallRun) else (entry,))]
        return [(0.0, d) for d in due] + [(ready_at, d) for ready_at, _, d in self._heap]

    def __len__(self) -> int:
        return len(self._due) + self._in_runs + len(self._heap)

    @abstractmethod
    def finish(self, delivery: Delivery) -> None:
        """`delivery`'s processing ended (anything it re-queued was pushed before): forget it."""

    @property
    def durable(self) -> bool:
        """Whether deliveries outlive the process (a later `recover` finds them)."""
        return False

    def recover(self, workflow: str) -> list[tuple[float, Delivery]]:
        """The deliveries of `workflow` a previous process left unfinished (journaled, not in
        this queue), each with its due time; the caller pushes them back with `restore`."""
        return []

    def restore(self, delivery: Delivery, ready_at: float) -> None:
        """Queue a recovered delivery again (it is journaled already)."""
        heapq.heappush(self._heap, (ready_at, next(self._seq), delivery))

    def flush(self) -> None:
        """Block until everything pushed or finished so far is on disk (no-op in memory)."""

    def close(self) -> None:
        """Flush, then stop journaling: later calls change nothing on disk."""


class MemoryQueue(DeliveryQueue):
    """The heap alone: deliveries live as long as the process."""

    def finish(self, delivery: Delivery) -> None:
        pass


class SQLiteQueue(DeliveryQueue):
    """The heap, journaled to a SQLite database (module docstring): the store's own `Database`
    (shared: its durability, its group commit; not closed here), or a path, opened here with
    durability normal (WAL: a power loss loses at most a suffix of the journal, which keeps the
    prefix property redelivery needs)."""

    def __init__(self, database: Database | str | os.PathLike[str], *,
                 batch_interval: float = BATCH_INTERVAL) -> None:
        super().__init__()
        self.database, self._owns_database = open_database(database)
        self.path = os.fspath(self.database.path)
        self._base = secrets.randbits(29) << 34  # ids unique across the processes sharing the file
        self._next_id = 1  # the next row's number within `_base` (taken under `_lock`: runs take a block)
        self._batch_interval = batch_interval
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._puts: dict[int, tuple[int, str, str, bytes, float, int, str | None, int]] = {}
        self._dels: list[int] = []
        self._submitted = 0   # operations accepted so far (a generation counter for `flush`)
        self._written = 0     # ... of which are on disk
        self._closed = False
        self._error: BaseException | None = None
        self._carry = False   # pending operations the next commit of the database carries (`_ride`)
        self._inflight = 0    # operations taken by a commit that has not settled yet
        self.database.add_rider(self._ride)
        self._writer = threading.Thread(target=self._write_loop, name="unum-queue-journal", daemon=True)
        self._writer.start()

    @property
    def durable(self) -> bool:
        return True

    def push(self, delivery: Delivery, ready_at: float) -> None:
        self.journal(delivery, ready_at)
        super().push(delivery, ready_at)

    def journal(self, delivery: Delivery, ready_at: float) -> None:
        payload = delivery.wire()
        if not payload:  # a platform bug: the row could never be delivered again
            raise StoreMisuse(f"a delivery to {delivery.function} without its wire form cannot be journaled")
        if delivery.source is not None:
            delivery.payload = b""  # the row keeps it: a queued fan-out call holds its position only
        with self._lock:
            if not delivery.id:
                delivery.id = self._base | self._next_id
                self._next_id += 1
            if not self._closed:
                self._puts[delivery.id] = (delivery.id, delivery.workflow, delivery.function, payload, ready_at,
                                           delivery.failures, delivery.timer, int(delivery.background))
                self._submitted += 1
                self._cv.notify()

    def journal_run(self, run: CallRun, wires: Sequence[bytes]) -> None:
        """`DeliveryQueue.journal_run`; waits for the journal when JOURNAL_BACKLOG rows are pending."""
        calls, now = run.calls, time.time()
        workflow, functions = calls.workflow, calls.functions
        with self._lock:
            puts = self._puts
            run.first_id = first = self._base | self._next_id
            self._next_id += len(run.positions)
            if not self._closed:
                for k, (position, wire) in enumerate(zip(run.positions, wires, strict=True)):
                    puts[first + k] = (first + k, workflow, functions[position], wire, now, 0, None, 0)
                self._submitted += len(run.positions)
                self._cv.notify()
                if len(puts) >= JOURNAL_BACKLOG:
                    self._drain()

    def _drain(self) -> None:
        """Wait (lock held) until what is pending now is written: at most FLUSH_PATIENCE, and not
        while the journal is failing (memory is then the lesser problem; `flush` reports it)."""
        target, deadline = self._submitted, time.monotonic() + FLUSH_PATIENCE
        while self._written < target and self._error is None and not self._closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._cv.wait(left)

    def finish(self, delivery: Delivery) -> None:
        with self._lock:
            if self._closed:
                return
            if self._puts.pop(delivery.id, None) is None:  # else: accepted and done within one batch
                self._dels.append(delivery.id)
            self._submitted += 1
            self._cv.notify()

    def recover(self, workflow: str) -> list[tuple[float, Delivery]]:
        self.flush()
        rows = self.database.read(lambda conn: conn.execute(
            "SELECT id, function, payload, ready_at, failures, timer, background FROM unum_queue WHERE workflow = ?",
            (workflow,)).fetchall())
        return [(ready_at, Delivery(workflow, function, bytes(payload), failures, timer, rid, bool(background)))
                for rid, function, payload, ready_at, failures, timer, background in rows]

    def flush(self) -> None:
        """Wait until everything accepted so far is on disk. Raises StoreError once the journal
        has failed for `FLUSH_PATIENCE` seconds in a row (a database locked too long), at once
        when it failed as StoreUnusable (a full disk, a read-only file: waiting cannot help):
        the caller stops with that error instead of waiting forever; the writer keeps retrying."""
        with self._lock:
            target = self._submitted
            self._cv.notify()
            failing_since: float | None = None
            while self._written < target and not self._closed:
                if self._error is not None:
                    failing_since = failing_since or time.monotonic()
                    if (isinstance(self._error, StoreUnusable) or not self._writer.is_alive()
                            or time.monotonic() - failing_since > FLUSH_PATIENCE):
                        break
                else:
                    failing_since = None
                self._cv.wait(0.1)
            if self._written < target and self._error is not None:
                raise StoreError(f"delivery queue {self.path}: cannot write: {self._error}")

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            with self._lock:
                self._closed = True
                self._cv.notify_all()
            self._writer.join(timeout=5)
            self.database.remove_rider(self._ride)
            if self._owns_database:
                self.database.close()

    def _write_loop(self) -> None:
        """The journal's clock, one wake-up per `batch_interval`: a burst gathers meanwhile (a
        delivery accepted and finished within it cancels out); what is pending then is marked
        due, and the database's next commit carries it (`_ride`: a store write's batch, same
        transaction and fsync, no worker waiting behind a journal-only batch). What is still due
        an interval later - no commit came - this thread commits itself (a write of nothing that
        the rider fills, `sync=False`). Failing writes are retried, in order, with a growing pause."""
        failures = 0
        while True:
            with self._lock:
                while self._written == self._submitted and not self._closed:
                    self._cv.wait()
                if self._closed and not (self._puts or self._dels):
                    return
            time.sleep(self._batch_interval)  # let a burst gather; the commits meanwhile carry what is due
            with self._lock:
                if not self._carry:
                    if self._puts or self._dels:
                        self._carry = True  # the next commit carries it
                    elif not self._inflight:  # everything accepted was finished within the burst: nothing to write
                        self._written = self._submitted
                        self._cv.notify_all()
                    continue
                target = self._submitted  # due for an interval and no commit came: write it here
            try:
                # sync=False: the journal needs WAL order only (prefix property), not an fsync per batch
                self.database.write(_nothing, sync=False)
            except (sqlite3.Error, StoreError) as exc:  # disk full, read-only, locked too long: keep trying, in order
                with self._lock:
                    self._error = exc
            with self._lock:
                if self._written >= target:
                    failures = 0
                    continue
                failures += 1
                if failures == 1:  # once per streak of failures (a full disk would repeat it every second)
                    log.error("delivery queue %s: write failed (%s); retrying", self.path, self._error)
                if self._closed:
                    return
            time.sleep(min(MAX_BACKOFF, 0.01 * 2 ** failures))

    def _ride(self, conn: sqlite3.Connection) -> Callable[[bool], None] | None:
        """The database's rider (`Database.add_rider`): inside a commit's transaction, write
        every pending operation if they are due, in a savepoint (a failure undoes them alone and
        puts them back, in order). All of them at once: the puts, then the removals, in one
        transaction - the file keeps a prefix of the platform's history."""
        if not self._carry:
            return None
        with self._lock:
            if not self._carry:
                return None
            self._carry = False
            puts, dels, self._puts, self._dels = list(self._puts.values()), self._dels, {}, []
            target = self._submitted
            if not (puts or dels):
                if not self._inflight:
                    self._written = target
                    self._cv.notify_all()
                return None
            self._inflight += 1
        try:
            conn.execute("SAVEPOINT unum_queue")
            try:
                _apply(conn, puts=puts, dels=dels)
            except BaseException:
                conn.execute("ROLLBACK TO unum_queue")
                raise
            finally:
                conn.execute("RELEASE unum_queue")
        except BaseException as exc:
            self._settle(puts, dels, target, False, exc)
            if not isinstance(exc, Exception):
                raise
            return None
        return functools.partial(self._settle, puts, dels, target)

    def _settle(self, puts: list[tuple[int, str, str, bytes, float, int, str | None, int]], dels: list[int],
                target: int, committed: bool, error: BaseException | None = None) -> None:
        """Operations `_ride` took were committed (everything accepted up to `target` is on
        disk), or not: put them back in front of what came since, to be written again."""
        with self._lock:
            self._inflight -= 1
            if committed:
                self._written = max(self._written, target)
                self._error = None
            else:
                merged = {row[0]: row for row in puts}
                merged.update(self._puts)
                self._puts = merged
                self._dels = dels + self._dels
                if error is not None:
                    self._error = error
            self._cv.notify_all()


def _nothing(conn: sqlite3.Connection) -> None:
    """The journal thread's own write: the rider (`SQLiteQueue._ride`) fills it."""


def _apply(conn: sqlite3.Connection, *, puts: Sequence[tuple[object, ...]], dels: Sequence[int]) -> None:
    """One journal batch, inside the database's write transaction."""
    if puts:
        conn.executemany("INSERT OR REPLACE INTO unum_queue VALUES (?, ?, ?, ?, ?, ?, ?, ?)", puts)
    if dels:
        conn.executemany("DELETE FROM unum_queue WHERE id = ?", ((i,) for i in dels))


def _add_columns(conn: sqlite3.Connection) -> None:
    """Add the `ADDED_COLUMNS` a database made by an older unum lacks (idempotent)."""
    for table, column, declaration in ADDED_COLUMNS:
        if column not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")


def open_database(where: Database | str | os.PathLike[str]) -> tuple[Database, bool]:
    """(the database holding the queue's tables, whether the caller opened it and must close
    it): `where` itself if it is a `Database` (the SQLite store's), else the file at `where`
    opened with durability normal. The tables are created if absent."""
    owned = not isinstance(where, Database)
    database = Database(where, durability=Durability.NORMAL) if not isinstance(where, Database) else where
    try:
        database.ensure_schema(SCHEMA)
        database.write(_add_columns)
    except BaseException:
        if owned:
            database.close()
        raise
    return database, owned
