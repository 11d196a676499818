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
- a delivery's row is on disk no later than its checkpoint: with the SQLite store every store
  commit carries what is pending (`SQLiteQueue._ride`); a queue in a file of its own writes a
  delivery's row before it runs (`SQLiteQueue.before_run`). A delivery accepted and finished
  before the next write never reaches the disk (its put and its removal cancel);
- a fan-out handed over whole (`LocalPlatform.submit_fan_out`) is journaled as its origin -
  the delivery that sent it, whose committed checkpoint plans the same calls again
  (`Runtime.fan_out`) - and a row per run of WAKE_BATCH calls (`CallRun`), removed once every
  call of the run finished: two rows per 64 branches instead of a row per branch, and no
  branch's wire form encoded. After a crash a run that had not finished is sent again whole
  (its committed calls as duplicates: their checkpoints absorb them, and their egress, which the
  crash may have cut short, runs again);
- a chain is journaled as the row of its first hop (`SQLiteQueue.pass_row`): a delivery whose
  function sends one call at most (`Runtime.passes_one_hop`), its chain hop, passes its row on
  to that call instead of the call getting a row of its own, for up to MAX_HOPS hops. After a
  crash the platform delivers the row's hop again together with every hop after it that
  committed, each built again from its sender's checkpoint (`LocalPlatform._committed_hops`):
  duplicates whose egress runs again, the last one's sending the first hop that did not
  commit. No row per hop to write and delete;
- `recover(workflow)` and `recover_fan_outs(workflow)` load what a dead process left, to be
  delivered again.

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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from unum_entry.codec import decode
from unum_entry.envelope import Envelope
from unum_entry.errors import StoreError, StoreMisuse, StoreUnusable
from unum_entry.local.handoff import call_wire, envelope_wire, is_plain
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
    """CREATE TABLE IF NOT EXISTS unum_fan_outs (
    id INTEGER PRIMARY KEY,      -- numbered as unum_queue's rows
    workflow TEXT NOT NULL,
    function TEXT NOT NULL,      -- the function whose invocation sent the fan-out (its origin)
    payload BLOB NOT NULL,       -- the origin's envelope as on the wire: its checkpoint plans the calls again
    deadline INTEGER NOT NULL,   -- the workflow's deadline the origin ran with (an entry's wire has none yet)
    ready_at REAL NOT NULL       -- epoch seconds it was journaled (`gc`'s horizon)
)""",
    "CREATE INDEX IF NOT EXISTS unum_fan_outs_workflow ON unum_fan_outs (workflow)",
    """CREATE TABLE IF NOT EXISTS unum_fan_out_runs (
    id INTEGER PRIMARY KEY,
    fan_out INTEGER NOT NULL,    -- unum_fan_outs.id
    workflow TEXT NOT NULL,
    start INTEGER NOT NULL,      -- the run's positions in the fan-out: range(start, stop, step)
    stop INTEGER NOT NULL,
    step INTEGER NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS unum_fan_out_runs_workflow ON unum_fan_out_runs (workflow)",
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
MAX_HOPS = 64          # chain hops that pass one journal row on before a hop is journaled on its own (`pass_row`)
FLUSH_PATIENCE = 5.0    # seconds a failing journal may keep `flush` waiting before it raises
BATCH_INTERVAL = 0.005   # seconds the journal gathers operations before writing them in one transaction
MAX_BACKOFF = 1.0        # seconds between attempts at a journal write that failed


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
    it again; an envelope that needs no sealing: `wire` encodes it). `run`: the journaled run a
    fan-out's call was taken from (its row is the run's; None in a MemoryQueue and for a call
    journaled on its own). `accepted`: the journal's count of operations once its row was
    accepted (0: none, or on disk already; `before_run`). `hops`: in a durable queue, how many
    chain hops ago the row it holds was journaled (`SQLiteQueue.pass_row`); -1: it may not pass
    its row on (not a call egress sent: an entry, a timer, a redelivery, a recovered row)."""

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
    run: CallRun | None = None
    accepted: int = 0
    hops: int = -1

    def wire(self) -> bytes:
        """The envelope as on the wire: `payload`, or a fan-out's call built anew, or the
        envelope encoded when it needs no sealing (empty for an envelope sealed in memory alone)."""
        if self.payload:
            return self.payload
        if self.source is not None:
            return call_wire(self.source, self.position)
        if self.envelope is not None and is_plain(self.envelope):
            return envelope_wire(self.envelope)
        return b""

    def again(self, failures: int) -> Delivery:
        """The same delivery accepted once more (a redelivery, a fault's extra copy): a new journal row."""
        return Delivery(self.workflow, self.function, self.payload, failures, self.timer,
                        background=self.background, envelope=self.envelope, source=self.source,
                        position=self.position)


@dataclass(slots=True, eq=False)
class FanOut:
    """A fan-out journaled as its origin (module docstring): the `function` whose invocation
    sent it, that delivery's wire form (`payload`) and the workflow deadline it ran with (the
    runtime sets it on the workflow's first delivery, whose wire has none); `id` its row.
    `runs`: its journaled runs not finished yet; `sealed`: every run of it has been journaled.
    Its row goes when both say nothing is left. `recovered`: a previous process journaled it
    (its calls are planned again as redeliveries: `FanOutCalls.redelivered`)."""

    workflow: str
    function: str
    payload: bytes
    deadline: int
    id: int = 0
    runs: int = 0
    sealed: bool = False
    recovered: bool = False

    def origin(self) -> Envelope:
        """The origin's envelope as it ran (with its deadline): its checkpoint plans the calls
        again (`Runtime.fan_out`). Raises EnvelopeError or ValueError for a payload that is no envelope."""
        return replace(Envelope.from_wire(decode(self.payload)), deadline=self.deadline)


@dataclass(slots=True, eq=False)
class CallRun:
    """Consecutive calls of one fan-out waiting as one queue entry, not an object per call:
    (`calls`, `positions`), each made a `Delivery` (by position, unum_entry.local.handoff) only
    when taken. `first_id`: the run's journal row (0 in a MemoryQueue: no rows), of `fan_out`;
    `unfinished`: its calls whose processing has not ended (the row goes at 0). `taken`: how
    many calls have been taken so far. `accepted`: as `Delivery.accepted`, for the run's row."""

    calls: FanOutCalls
    positions: range
    first_id: int = 0
    taken: int = 0
    fan_out: FanOut | None = None
    unfinished: int = 0
    accepted: int = 0

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
        # (positionally: workflow, function, payload, failures, timer, id, background, envelope, source, position, run)
        return Delivery(calls.workflow, calls.functions[position], b"", 0, None, 0, False, None, calls, position,
                        self if self.first_id else None)


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

    def journal_fan_out(self, workflow: str, function: str, payload: bytes, deadline: int) -> FanOut | None:
        """Accept a fan-out sent by the delivery to `function` whose wire form is `payload` (its
        origin), run with the workflow deadline `deadline`, its runs to follow (`journal_run`, then `seal_fan_out`): a SQLiteQueue journals
        the origin and returns its `FanOut`; None in memory. Safe from any thread, and to be
        called before the origin's delivery is finished."""
        return None

    def journal_run(self, run: CallRun, fan_out: FanOut | None) -> None:
        """Accept `run`'s calls, to be queued by `push_run`: a SQLiteQueue journals the run as
        one row of `fan_out` (`run.first_id`); nothing in memory (`fan_out` None). Safe from
        any thread, and to be called before the delivery that made the calls is finished."""

    def seal_fan_out(self, fan_out: FanOut) -> None:
        """Every run of `fan_out` has been journaled: its row may go once they are finished."""

    def pass_row(self, current: Delivery, successor: Delivery) -> bool:
        """Let `successor`, the one call that `current` sends (its chain hop: the caller has made
        sure it sends no other, `Runtime.passes_one_hop`), hold `current`'s journal row instead
        of a row of its own: whether it does (a SQLiteQueue: the module docstring, "a chain's
        row"). Nothing to do in memory. To be called before `current` is finished, from its worker."""
        return False

    def before_run(self, delivery: Delivery, *, elsewhere: bool = False) -> None:
        """Called by a worker just before `delivery` executes (`elsewhere`: in another process):
        returns once its row (its run's, for a fan-out's call) is on disk. Raises StoreError
        when it cannot be written."""

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

    def pop_calls(self, fan_out: FanOut, function: str, limit: int) -> list[Delivery]:
        """Up to `limit` calls to `function` of the journaled `fan_out`, taken in order from the
        runs at the head of the due queue while they are its (none when another delivery is
        first): more of a batch a helper process runs (unum_entry.local.helpers). Each stays
        journaled until `finish`, as `pop_due`'s."""
        taken: list[Delivery] = []
        due = self._due
        while len(taken) < limit and due:
            head = due[0]
            if not isinstance(head, CallRun) or head.fan_out is not fan_out or not head.first_id:
                break
            functions = head.calls.functions
            while len(taken) < limit and len(head) and functions[head.positions[head.taken]] == function:
                if len(head) > 1:
                    self._in_runs -= 1
                taken.append(head.take())
            if len(head):  # another function's call next, or the limit reached
                break
            due.popleft()
        return taken

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

    def recover_fan_outs(self, workflow: str) -> list[tuple[FanOut, list[tuple[int, range]]]]:
        """The fan-outs of `workflow` a previous process left unfinished: each with the rows and
        positions of its runs not finished (`recover` comes first). The caller plans each
        fan-out's calls again (`Runtime.fan_out`) and queues the runs with `push_run`
        (`CallRun(..., first_id=row, fan_out=..., unfinished=...)`), or gives up on the fan-out
        with `abandon_fan_out`."""
        return []

    def abandon_fan_out(self, fan_out: FanOut, runs: Sequence[int]) -> None:
        """Remove a recovered fan-out and its `runs` rows (its origin is delivered again instead)."""

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
        # Operations accepted and not written yet (`_Pending`): rows to put by id, ids to delete.
        self._queue = _Pending()      # unum_queue
        self._fan_outs = _Pending()   # unum_fan_outs
        self._runs = _Pending()       # unum_fan_out_runs
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
                self._queue.puts[delivery.id] = (delivery.id, delivery.workflow, delivery.function, payload, ready_at,
                                           delivery.failures, delivery.timer, int(delivery.background))
                self._submitted += 1
                delivery.accepted = self._submitted
                self._cv.notify()

    def journal_fan_out(self, workflow: str, function: str, payload: bytes, deadline: int) -> FanOut | None:
        fan_out = FanOut(workflow, function, payload, deadline)
        with self._lock:
            fan_out.id = self._base | self._next_id
            self._next_id += 1
            if not self._closed:
                self._fan_outs.puts[fan_out.id] = (fan_out.id, workflow, function, payload, deadline, time.time())
                self._submitted += 1
                self._cv.notify()
        return fan_out

    def journal_run(self, run: CallRun, fan_out: FanOut | None) -> None:
        if fan_out is None:
            raise StoreMisuse("a durable queue journals a run of calls only as part of its fan-out")
        positions = run.positions
        with self._lock:
            run.first_id = self._base | self._next_id
            self._next_id += 1
            run.fan_out, run.unfinished = fan_out, len(positions) - run.taken
            fan_out.runs += 1
            if not self._closed:
                self._runs.puts[run.first_id] = (run.first_id, fan_out.id, fan_out.workflow, positions.start,
                                                 positions.stop, positions.step)
                self._submitted += 1
                run.accepted = self._submitted
                self._cv.notify()

    def seal_fan_out(self, fan_out: FanOut) -> None:
        with self._lock:
            fan_out.sealed = True
            if not fan_out.runs and not self._closed:
                self._fan_outs.forget(fan_out.id)
                self._submitted += 1
                self._cv.notify()

    def pass_row(self, current: Delivery, successor: Delivery) -> bool:
        if not 0 <= current.hops < MAX_HOPS or not current.id or current.run is not None or self._closed:
            return False
        successor.id, successor.hops = current.id, current.hops + 1
        current.id = 0  # `finish` leaves the row: its chain hop holds it now
        return True

    def before_run(self, delivery: Delivery, *, elsewhere: bool = False) -> None:
        """With the SQLite store every store commit carries the pending rows (`_ride`), so a
        delivery's row is on disk no later than its checkpoint. A queue in a file of its own (a
        file, DynamoDB or Firestore store's) has no such commit, nor has a store commit of
        another process (`elsewhere`: a helper's, unum_entry.local.helpers): a store write would
        make the checkpoint of a delivery whose row is still gathering durable, and a crash
        before its egress finished would leave it committed and undelivered, skipped by its
        sender's duplicate (`_ride` tells the rest). So its row is written here first, with
        whatever else is pending, in one commit (`sync=False`: the file's own durability; in the
        store's file the other process's synced commit, later in the same WAL, makes it durable)."""
        if not self._owns_database and not elsewhere:
            return
        run = delivery.run
        accepted = run.accepted if run is not None else delivery.accepted
        # One write suffices: a commit that took the row before ours has settled by the time ours
        # runs (the writer is one at a time), written or put back for ours. The loop is a bound.
        for _ in range(3):
            if self._written >= accepted:
                return
            try:
                self.database.write(_nothing, sync=False)  # the rider fills it with every pending operation
            except (sqlite3.Error, StoreError) as exc:
                with self._lock:
                    self._error = exc
                if isinstance(exc, StoreError):
                    raise
                raise StoreError(f"delivery queue {self.path}: cannot write: {exc}") from exc
        if self._written < accepted:
            raise StoreError(f"delivery queue {self.path}: a delivery's row was not written")

    def finish(self, delivery: Delivery) -> None:
        run = delivery.run
        with self._lock:
            if self._closed:
                return
            if run is not None:  # a call of a journaled run: the run's row goes with its last call
                run.unfinished -= 1
                if run.unfinished:
                    return
                self._runs.forget(run.first_id)
                fan_out = run.fan_out
                assert fan_out is not None  # set with first_id (`journal_run`)
                fan_out.runs -= 1
                if not fan_out.runs and fan_out.sealed:
                    self._fan_outs.forget(fan_out.id)
            elif not delivery.id:  # it passed its row on to its chain hop (`pass_row`)
                return
            else:  # (a put not written yet cancels out: accepted and done before the next write)
                self._queue.forget(delivery.id)
            self._submitted += 1
            self._cv.notify()

    def recover_fan_outs(self, workflow: str) -> list[tuple[FanOut, list[tuple[int, range]]]]:
        self.flush()

        def read(conn: sqlite3.Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
            conn.execute("BEGIN")  # one snapshot of both tables
            try:
                return (conn.execute("SELECT id, function, payload, deadline FROM unum_fan_outs WHERE workflow = ?",
                                     (workflow,)).fetchall(),
                        conn.execute("SELECT id, fan_out, start, stop, step FROM unum_fan_out_runs WHERE workflow = ?",
                                     (workflow,)).fetchall())
            finally:
                conn.execute("COMMIT")

        origins, rows = self.database.read(read)
        runs: dict[int, list[tuple[int, range]]] = {}
        for rid, fan_out_id, start, stop, step in rows:
            runs.setdefault(int(fan_out_id), []).append((int(rid), range(int(start), int(stop), int(step))))
        found = []
        for fid, function, payload, deadline in origins:
            fan_out = FanOut(workflow, str(function), bytes(payload), int(deadline), int(fid), sealed=True)
            mine = runs.pop(fan_out.id, [])
            fan_out.runs = len(mine)
            if mine:
                found.append((fan_out, mine))
            else:  # its last run finished, the crash came before its own row went
                self.abandon_fan_out(fan_out, [])
        for orphans in runs.values():  # runs of no fan-out (never written before it: defensive)
            self.abandon_fan_out(FanOut(workflow, "", b"", 0, sealed=True), [rid for rid, _ in orphans])
        return found

    def abandon_fan_out(self, fan_out: FanOut, runs: Sequence[int]) -> None:
        with self._lock:
            if self._closed:
                return
            for rid in runs:
                self._runs.forget(rid)
            if fan_out.id:
                self._fan_outs.forget(fan_out.id)
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
                if self._closed and not self._has_pending():
                    return
            time.sleep(self._batch_interval)  # let a burst gather; the commits meanwhile carry what is due
            with self._lock:
                if not self._carry:
                    if self._has_pending():
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

    def _has_pending(self) -> bool:
        """Whether any operation waits to be written (exact under the lock; without it, a hint)."""
        # (each table's lists, not `_Pending.__bool__`: this runs in every commit of the database)
        queue, fan_outs, runs = self._queue, self._fan_outs, self._runs
        return bool(queue.puts or queue.dels or fan_outs.puts or fan_outs.dels or runs.puts or runs.dels)

    def _ride(self, conn: sqlite3.Connection, careful: bool) -> Callable[[bool], None] | None:
        """The database's rider (`Database.add_rider`): inside every commit's transaction, write
        every pending operation (a failure puts them back, in order; `careful`: in a savepoint
        that undoes them alone, the rest of the commit kept). All of them at once: the puts,
        then the removals, in one transaction - the file keeps a prefix of the platform's history.

        Every commit, not only once they are due: a delivery's row must be on disk no later than
        anything its execution commits. A store write that committed an invocation's checkpoint
        while the row of the delivery that ran it was still gathering would, after a crash
        before its egress finished, leave that invocation committed and its delivery gone; a
        duplicate of its sender skips successors that committed (unum_entry.checkpoint.
        not_yet_committed), so its egress would never run and the workflow would stall (found
        by the full-disk test: tests/integration/test_sqlite_store.py). The price: a delivery's
        row is written and deleted in its neighbours' commits, where it used to cancel out (a
        chain hop's is not: it holds its sender's row, `pass_row`)."""
        # (A hint without the lock. `_carry`: the journal's thread writes; even with nothing left
        # to write - a put and its removal cancelled - that write must mark everything written.)
        if not (self._carry or self._has_pending()):
            return None
        with self._lock:
            self._carry = False
            batch = _Batch(self._queue, self._fan_outs, self._runs)
            # A table with nothing pending keeps its (empty) operations: the batch takes the shared
            # `_NONE` instead, which nothing mutates (a chain hop's commit makes one `_Pending`, not three).
            if batch.queue:
                self._queue = _Pending()
            else:
                batch.queue = _NONE
            if batch.fan_outs:
                self._fan_outs = _Pending()
            else:
                batch.fan_outs = _NONE
            if batch.runs:
                self._runs = _Pending()
            else:
                batch.runs = _NONE
            target = self._submitted
            if batch.empty:
                if not self._inflight:
                    self._written = target
                    self._cv.notify_all()
                return None
            self._inflight += 1
        try:
            if careful:
                _apply_apart(batch, conn)
            else:
                batch.apply(conn)
        except BaseException as exc:  # put them back, to be written again (`careful`: after its commit)
            self._settle(batch, target, False, exc)
            if not careful or not isinstance(exc, Exception):
                raise
            return None
        return functools.partial(self._settle, batch, target)

    def _settle(self, batch: _Batch, target: int, committed: bool, error: BaseException | None = None) -> None:
        """Operations `_ride` took were committed (everything accepted up to `target` is on
        disk), or not: put them back in front of what came since, to be written again."""
        with self._lock:
            self._inflight -= 1
            if committed:
                self._written = max(self._written, target)
                self._error = None
            else:
                self._queue = batch.queue.before(self._queue)
                self._fan_outs = batch.fan_outs.before(self._fan_outs)
                self._runs = batch.runs.before(self._runs)
                if error is not None:
                    self._error = error
            self._cv.notify_all()


class _Pending:
    """One table's operations accepted and not written yet: rows to put (by id, in order) and
    ids to delete. A row put and deleted before it was written cancels out."""

    __slots__ = ("puts", "dels")

    def __init__(self, puts: dict[int, tuple[object, ...]] | None = None, dels: list[int] | None = None) -> None:
        self.puts: dict[int, tuple[object, ...]] = {} if puts is None else puts
        self.dels: list[int] = [] if dels is None else dels

    def __bool__(self) -> bool:
        return bool(self.puts or self.dels)

    def forget(self, row: int) -> None:
        """Delete `row`: cancel its put if it was not written yet."""
        if self.puts.pop(row, None) is None:
            self.dels.append(row)

    def before(self, later: _Pending) -> _Pending:
        """These operations (not written) followed by `later`'s."""
        return _Pending({**self.puts, **later.puts}, self.dels + later.dels)


_NONE = _Pending()  # no operations: a batch's share of a table with nothing pending (never mutated)

#: Each table's insert (a row as `_Pending.puts` holds it) and delete.
_INSERT = {"unum_queue": "INSERT OR REPLACE INTO unum_queue VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
           "unum_fan_outs": "INSERT OR REPLACE INTO unum_fan_outs (id, workflow, function, payload, deadline, "
                            "ready_at) VALUES (?, ?, ?, ?, ?, ?)",
           "unum_fan_out_runs": "INSERT OR REPLACE INTO unum_fan_out_runs (id, fan_out, workflow, start, stop, step) "
                                "VALUES (?, ?, ?, ?, ?, ?)"}
_DELETE = {table: f"DELETE FROM {table} WHERE id = ?" for table in _INSERT}


@dataclass(slots=True)
class _Batch:
    """What one journal write takes: every table's pending operations."""

    queue: _Pending
    fan_outs: _Pending
    runs: _Pending

    @property
    def empty(self) -> bool:
        return not (self.queue or self.fan_outs or self.runs)

    def apply(self, conn: sqlite3.Connection) -> None:
        """Write the batch inside the database's write transaction (the caller's): puts, then removals."""
        tables = (("unum_fan_outs", self.fan_outs), ("unum_fan_out_runs", self.runs), ("unum_queue", self.queue))
        for table, pending in tables:
            if pending.puts:
                conn.executemany(_INSERT[table], pending.puts.values())
        for table, pending in tables:
            if pending.dels:
                conn.executemany(_DELETE[table], zip(pending.dels))  # (zip of one list: its rows as 1-tuples)


def _apply_apart(batch: _Batch, conn: sqlite3.Connection) -> None:
    """`batch.apply` in a savepoint: if it raises, its changes are undone and the rest of the
    transaction is kept."""
    conn.execute("SAVEPOINT unum_queue")
    try:
        batch.apply(conn)
    except BaseException:
        conn.execute("ROLLBACK TO unum_queue")
        raise
    finally:
        conn.execute("RELEASE unum_queue")


def _nothing(conn: sqlite3.Connection) -> None:
    """The journal thread's own write: the rider (`SQLiteQueue._ride`) fills it."""


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
