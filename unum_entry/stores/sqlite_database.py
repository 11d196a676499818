"""The unum SQLite database file: connections, durability and group commit, shared by the
SQLite store (`unum_entry.stores.sqlite`) and anything else keeping tables in the same file (the
embedded engine's durable delivery queue).

One file (plus SQLite's `-wal` and `-shm` beside it) in WAL mode. `PRAGMA application_id` marks a
unum database and `PRAGMA user_version` its schema version (a newer one is refused, a foreign
SQLite file too); the store's tables are created on open (`SCHEMA`), other components add theirs
with `Database.ensure_schema` (prefix their names, e.g. `unum_queue`).

Durability (`Durability`, like DBOS's setting; the `durability` URL parameter, `run
--durability` or `UNUM_DURABILITY`):
- `full` (default): `synchronous=FULL`. In WAL mode SQLite syncs the WAL file at every commit,
  so a write that returned survives a power loss or OS crash ("With synchronous=FULL in WAL
  mode, an additional sync operation of the WAL file happens after each transaction commit. The
  extra WAL sync following each transaction helps ensure that transactions are durable across a
  power loss", https://www.sqlite.org/pragma.html#pragma_synchronous). That assumes the disk
  honours fsync (no lying write cache).
- `normal`: `synchronous=NORMAL`: the WAL is synced only at checkpoints. Survives a process
  crash (kill -9: committed frames are in the page cache); "a transaction committed in WAL mode
  with synchronous=NORMAL might roll back following a power loss or system crash" (same page).
- `off`: `synchronous=OFF`: no syncs at all; survives a process crash, an OS crash or power loss
  may lose recent commits or (rarely) corrupt the file.

Group commit. An fsync costs 0.3-1 ms here, so one commit per write would cap a store at about a
thousand writes per second. Writers of one process therefore share commits (leader/follower): a
writer queues its function; if no commit is in progress it becomes the leader, takes every queued
function, runs them in one transaction (a function that raises rolls back only its own changes
and gets its exception: the batch then runs again, a SAVEPOINT per function), commits once (one
fsync) and hands each writer its result. Writers that queue meanwhile wait, each on a lock of its
own, and form the next batch; the leader wakes each of its batch's writers once and hands the
lead to the first writer queued meanwhile (no herd woken at every commit). A write returns only
after the commit that holds it is durable (a `sync=False` write - the delivery queue's journal -
only after it is committed, in order: `Database.write`). Riders (`Database.add_rider`: the
delivery queue's journal) add their pending changes to whichever batch commits next, in its
transaction: no transaction, and no writer waiting, of their own. With durability full the WAL is
presized (`_presize_wal`) so that commits overwrite allocated blocks instead of growing the file;
a long run of writes (a wide fan-out) checkpoints a larger one (`expect_bulk_writes`).
Processes sharing the file serialise on SQLite's lock; SQLITE_BUSY is retried with
sub-millisecond pauses (bounded by `busy_timeout`) and then raised as StoreError. Every sqlite3
error leaves as a one-line StoreError naming the file and what to do (read-only, disk full,
corrupt, locked, newer schema); the first three as StoreUnusable (someone has to act first).

Use: `db.write(fn)` runs `fn(connection)` group-committed (fn must not BEGIN/COMMIT nor call
`write` again: no re-entrancy), `db.read(fn)` on a per-thread read connection, `with
db.transaction() as conn:` an exclusive transaction on the caller's thread (not batched).
"""

from __future__ import annotations

import contextlib
import enum
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from unum_entry.errors import StoreError, StoreUnusable

T = TypeVar("T")

SCHEMA_VERSION = 2
APPLICATION_ID = 0x756E756D  # "unum": marks a database this module made
DEFAULT_BUSY_TIMEOUT = 30.0  # seconds a writer waits for another process's lock before StoreError
#: With durability full, the WAL is grown to this many pages before the first commit and checkpointed
#: (hence rewritten from its start) at this size: commits overwrite allocated blocks, whose
#: fdatasync skips the file system's metadata journal (half the cost of one that grows the file).
WAL_PAGES = 512
#: The WAL's checkpoint size once a long run of writes is expected (`Database.expect_bulk_writes`).
BULK_WAL_PAGES = 32768


class Durability(str, enum.Enum):
    """How far a returned write survives (module docstring): `full` a power loss, `normal` and
    `off` a process crash only."""

    FULL = "full"
    NORMAL = "normal"
    OFF = "off"

    @classmethod
    def parse(cls, text: str | Durability, where: str = "durability") -> Durability:
        """The setting named `text`; a bad name is a StoreError naming `where` and the choices."""
        try:
            return cls(str(text.value if isinstance(text, Durability) else text).lower())
        except ValueError:
            raise StoreError(f"{where}: unknown durability {text!r}: use full, normal or off") from None




#: The store's tables (unum_entry.stores.sqlite), created when a database is opened.
SCHEMA = [
    """CREATE TABLE IF NOT EXISTS unum_records (
           key TEXT PRIMARY KEY NOT NULL,
           kind TEXT NOT NULL,
           workflow TEXT NOT NULL,
           expires_at INTEGER NOT NULL,
           value BLOB,
           size INTEGER,
           members BLOB)""",
    # One workflow's records page by page in the order they were made (`records(workflow)`). Its
    # entries are (workflow, rowid), so a create appends at its workflow's end. Schema 1 indexed
    # (workflow, key): names are hashes, so every create also read and wrote a random page of
    # that index, two random pages per create instead of one (docs/embedded-store.md).
    "CREATE INDEX IF NOT EXISTS unum_records_by_workflow ON unum_records (workflow)",
    """CREATE TABLE IF NOT EXISTS unum_app (
           tbl TEXT NOT NULL,
           key TEXT NOT NULL,
           value BLOB NOT NULL,
           version INTEGER NOT NULL,
           PRIMARY KEY (tbl, key))""",
]


#: What brings a database of an older schema up to SCHEMA_VERSION: {version: statements that
#: make it that version}, run in order on open, in the transaction that then creates `SCHEMA`;
#: each must also be a no-op on a new file (`IF EXISTS`), which runs them all.
MIGRATIONS: dict[int, list[str]] = {
    2: ["DROP INDEX IF EXISTS unum_records_by_workflow_key"],  # replaced by unum_records_by_workflow
}

#: sqlite_master rows (tables, indexes) that are not unum's
_FOREIGN = "name NOT LIKE 'unum\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_autoindex\\_unum\\_%' ESCAPE '\\'"
_COLUMNS_PAD = "key, kind, workflow, expires_at, value"  # the WAL presize's scratch row (never committed)


#: A rider (`Database.add_rider`): called by a batch's leader inside the batch's transaction,
#: just before its commit (writer connection held, so riders' calls are in commit order), it may
#: add changes of its own and returns None (nothing added) or `settle`, called once with whether
#: the commit succeeded (it holds the rider's changes: durable as the batch is). A rider never
#: fails the batch. Called with `careful=False`, it adds its changes as they come (no savepoint:
#: two statements per commit) and may raise; the leader then rolls the transaction back, runs
#: the batch's writes again and calls every rider with `careful=True`: each in a SAVEPOINT of
#: its own, undone there if it fails (and then it returns None). How the delivery queue's
#: journal rides in the store's commits instead of committing on its own.
Rider = Callable[[sqlite3.Connection, bool], "Callable[[bool], None] | None"]


def _none_synced(batch: list[_Write]) -> bool:
    """No write of `batch` asks for an fsync (a loop, not `any` of a generator: every commit asks)."""
    for item in batch:
        if item.sync:
            return False
    return True


class _RiderFailed(Exception):
    """A rider raised in a batch's quick pass (`Rider`): the batch is to run again, carefully."""


class _Connection(sqlite3.Connection):
    """A connection that can be weakly referenced: a thread's read connection is closed when
    the thread ends (its thread-local goes), while `close()` can still reach the live ones."""


class _Write:
    """One queued write: its function, then its result or error once its batch has committed."""

    __slots__ = ("fn", "sync", "done", "result", "error", "wake", "leads")

    def __init__(self, fn: Callable[[sqlite3.Connection], Any], sync: bool = True) -> None:
        self.fn = fn
        self.sync = sync
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.wake: threading.Lock | None = None  # held while its writer sleeps: released once, to wake it
        self.leads = False  # handed the lead (set before `wake` is released)


class Database:
    """One SQLite database file shared by the threads of a process: a writer connection used
    by one batch leader at a time, a read connection per thread, group commit (module
    docstring). Share one `Database` per file per process; several processes may open the
    same file. Every sqlite3 error leaves it as a StoreError naming the file."""

    def __init__(self, path: str | os.PathLike[str], *, durability: Durability | str = Durability.FULL,
                 busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        self.path = Path(path)
        self.durability = Durability.parse(durability, f"store {self.path}")
        self.busy_timeout = busy_timeout
        self._batch_lock = threading.Lock()  # guards _pending and _leading
        self._pending: list[_Write] = []
        self._leading = False
        self._write_mutex = _WriterMutex()  # the writer connection: one batch or transaction at a time
        self._local = threading.local()
        self._readers: weakref.WeakSet[_Connection] = weakref.WeakSet()  # not kept alive: see _Connection
        self._readers_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._forks = _forks[0]
        self._riders: list[Rider] = []
        self._closed = False
        self._wal_ready = self.durability is not Durability.FULL  # see _presize_wal
        self._bulk = False  # see expect_bulk_writes
        self._bulk_applied = False  # ... on the current writer connection
        self._open()

    # ---- public API ----------------------------------------------------------------------

    def write(self, fn: Callable[[sqlite3.Connection], T], *, sync: bool = True) -> T:
        """`fn(connection)` inside a write transaction shared with concurrent writers (group
        commit); returns its result once that transaction is committed (and synced, with
        durability full). If `fn` raises, its own changes are rolled back and the exception is
        raised here; the other writers of the batch are unaffected. `fn` may run on another
        thread (the batch's leader) and must not begin or commit transactions.

        `sync=False` (the delivery queue's journal): this write needs only WAL order, not an
        fsync of its own - a batch holding nothing else commits as `synchronous=NORMAL`, so a
        power loss may drop it, but only together with every later commit (WAL: a suffix is
        lost, never a middle), and the next synced commit makes it durable too."""
        self._check_process()
        item = _Write(fn, sync)
        with self._batch_lock:
            self._pending.append(item)
            if self._leading:
                item.wake = threading.Lock()
                item.wake.acquire()
            else:
                self._leading = True
        if item.wake is not None:
            try:
                item.wake.acquire()  # woken exactly once: its batch committed, or it leads the next batch
            except BaseException:  # Ctrl-C in the main thread: withdraw, and never strand the lead
                self._withdraw(item)
                raise
        if not item.done:
            self._lead()
        if item.error is not None:
            raise item.error
        return item.result  # type: ignore[no-any-return]

    def _withdraw(self, item: _Write) -> None:
        """`item`'s writer stopped waiting (interrupted): drop it if no batch has taken it yet,
        and if it had just been handed the lead, pass the lead on (or give it up)."""
        assert item.wake is not None
        with self._batch_lock:
            if item in self._pending:
                self._pending.remove(item)
            if item.leads:  # handed the lead, whether or not it woke before the interrupt
                if self._pending:
                    self._pending[0].leads = True
                    assert self._pending[0].wake is not None
                    self._pending[0].wake.release()
                else:
                    self._leading = False

    def _lead(self) -> None:
        """As the batch leader: commit every pending write (the leader's own among them) in one
        transaction, wake each of their writers, and hand the lead to the first write queued
        meanwhile (or give it up). Each waiting writer is woken once, by its own lock: no herd of
        threads woken to go back to sleep at every commit."""
        batch: list[_Write] = []
        try:
            with self._batch_lock:
                batch, self._pending = self._pending, []
            self._commit_batch(batch)
        finally:
            with self._batch_lock:
                for other in batch:
                    if other.wake is not None:
                        other.wake.release()
                if self._pending:
                    successor = self._pending[0]
                    assert successor.wake is not None  # queued while we led
                    successor.leads = True
                    successor.wake.release()  # not done: it wakes as the next leader
                else:
                    self._leading = False

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` on this thread's read connection (autocommit: every statement sees
        every transaction committed before it began; wrap several statements in `BEGIN` …
        `COMMIT` for one snapshot)."""
        self._check_process()
        with self._mapped("read"):
            return fn(self._reader())

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An exclusive write transaction on the caller's thread (not batched): `BEGIN
        IMMEDIATE` … `COMMIT`, or `ROLLBACK` if the block raises."""
        self._check_process()
        with self._write_mutex:
            conn = self._writer_connection()
            with self._mapped("begin"):
                self._presize_wal(conn)
                self._begin(conn)
            try:
                yield conn
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            with self._mapped("commit"):
                self._commit(conn)

    def ensure_schema(self, statements: Sequence[str]) -> None:
        """Run `CREATE … IF NOT EXISTS` statements (idempotent) in one write transaction: how
        a component adds its own tables to the file (prefix their names, e.g. `unum_queue`)."""

        def create(conn: sqlite3.Connection) -> None:
            for statement in statements:
                conn.execute(statement)

        self.write(create)

    def add_rider(self, rider: Rider) -> None:
        """Let `rider` add its own changes to every batch this database commits (`Rider`)."""
        self._riders = [*self._riders, rider]  # a new list: a leader iterating the old one is unaffected

    def remove_rider(self, rider: Rider) -> None:
        """Stop calling `rider` (idempotent)."""
        self._riders = [other for other in self._riders if other is not rider]

    def close(self) -> None:
        """Close every connection (idempotent). The file stays."""
        self._closed = True
        with self._readers_lock:
            readers, self._readers = list(self._readers), weakref.WeakSet()
        for conn in readers:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()
        with self._write_mutex:
            writer, self._writer = self._writer, None
            if writer is not None:
                with contextlib.suppress(sqlite3.Error):
                    writer.close()

    def expect_bulk_writes(self) -> None:
        """From now on, checkpoint the WAL at BULK_WAL_PAGES instead of WAL_PAGES (or SQLite's
        default of 1,000 with durability normal or off). Idempotent; takes effect at the next
        batch this process commits.

        Why: names are hashes, so each create writes a random page of the key index (module
        `unum_entry.stores.sqlite`, and docs/embedded-store.md). A checkpoint copies each page in
        the WAL into the file once and syncs the file, while its process holds the writer's turn.
        With a small WAL a page is copied about once per create. A WAL of BULK_WAL_PAGES holds
        thousands of commits, so a page that several of them touched is copied once, and there
        are 64 times fewer checkpoints. Measured with a million-item durable map + sum and one
        helper: 129.2 s with 512 pages, 109.1 s with 32,768 (docs/embedded-engine.md, "Round 18").
        Costs: the WAL grows to ~128 MiB, growing as commits append to it; each checkpoint takes
        longer, and holds the writer's turn longer; a crash leaves more WAL for the next open to
        read. Nothing a commit guarantees changes: `full` still syncs the WAL at every commit.
        Not the default: a short run's commits would each pay for growing the WAL (about twice
        the fsync), and only a long run of writes gains."""
        self._bulk = True

    def share_writes(self) -> None:
        """Take the writer's turn, from now on, through a lock file next to the database
        (`_WriterMutex`) that the other processes writing it in turn take too (the embedded
        engine's helper processes: unum_entry.local.helpers). Call it before another process
        starts writing. Raises StoreError when the lock file cannot be opened."""
        lock_path = f"{self.path}-writers"
        try:
            self._write_mutex.share(lock_path)
        except OSError as exc:
            raise StoreError(f"store {self.path}: cannot open {lock_path} ({exc.strerror})") from exc

    def __reduce__(self) -> tuple[Any, ...]:
        """Picklable (e.g. for a spawned process): the other process opens the file afresh."""
        return (_reopened, (str(self.path), self.durability.value, self.busy_timeout))

    # ---- connections ---------------------------------------------------------------------

    def _open(self) -> None:
        """Create the file (and its folder) if needed, check it is a unum database of a schema
        this version knows, and create the tables."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"store {self.path}: cannot create its folder ({exc.strerror}): use a writable "
                             "--store path") from exc
        self._preflight()
        conn = self._writer_connection()
        with self._mapped("open"):
            with self._write_mutex:
                self._begin(conn)
                try:
                    version = conn.execute("PRAGMA user_version").fetchone()[0]
                    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
                    tables = conn.execute(f"SELECT count(*) FROM sqlite_master WHERE {_FOREIGN}").fetchone()[0]
                    if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables):
                        raise StoreError(f"store {self.path}: an SQLite database, but not a unum store (it has "
                                         "tables of its own): use another --store path")
                    if version > SCHEMA_VERSION:
                        raise StoreError(f"store {self.path} was written by a newer unum (schema {version}, this "
                                         f"version knows up to {SCHEMA_VERSION}): upgrade unum to use it")
                    for number in range(version + 1, SCHEMA_VERSION + 1):  # (a new file: each a no-op)
                        for statement in MIGRATIONS.get(number, ()):
                            conn.execute(statement)
                    for statement in SCHEMA:
                        conn.execute(statement)
                    if version < SCHEMA_VERSION:
                        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
                self._commit(conn)

    def _preflight(self) -> None:
        """Refuse, from its header alone and before SQLite touches it (opening sets WAL mode),
        a file that is not an SQLite database, another program's database (an application id
        of its own, or pages of its own without ours) or one of a newer unum. A header can lag
        behind a WAL that was never checkpointed: `_open` checks again inside a transaction."""
        try:
            with open(self.path, "rb") as handle:
                header = handle.read(100)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"store {self.path}: cannot read it ({exc.strerror})") from exc
        if not header:
            return  # empty: SQLite makes it a database
        if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
            raise StoreError(f"store {self.path} is corrupt or not an SQLite database (its header is not "
                             "SQLite's): move it aside and use another --store path")
        pages, version, app_id = (int.from_bytes(header[at:at + 4], "big") for at in (28, 60, 68))
        if app_id not in (0, APPLICATION_ID) or (app_id == 0 and pages > 1 and self._foreign_tables()):
            raise StoreError(f"store {self.path}: an SQLite database, but not a unum store (it has tables of "
                             "its own): use another --store path")
        if app_id == APPLICATION_ID and version > SCHEMA_VERSION:
            raise StoreError(f"store {self.path} was written by a newer unum (schema {version}, this version "
                             f"knows up to {SCHEMA_VERSION}): upgrade unum to use it")

    def _foreign_tables(self) -> bool:
        """Whether the file (unmarked, with pages) has tables that are not unum's: a file with
        only `unum_*` tables is an older unum's delivery queue (`queue.db`), which was not marked."""
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=self.busy_timeout)
            try:
                return bool(conn.execute(f"SELECT count(*) FROM sqlite_master WHERE {_FOREIGN}").fetchone()[0])
            finally:
                conn.close()
        except sqlite3.Error:
            return True

    def _connect(self, *, writer: bool = False) -> _Connection:
        with self._mapped("open"):
            # isolation_level=None: no implicit transactions; we BEGIN and COMMIT ourselves. The
            # writer waits for another connection's lock in `_retrying` (sub-millisecond retries),
            # not in SQLite's busy handler, which sleeps 1, 2, 5, 10… ms between tries.
            conn = cast(_Connection, sqlite3.connect(self.path, timeout=0 if writer else self.busy_timeout,
                                                     isolation_level=None, check_same_thread=False,
                                                     factory=_Connection))
            try:
                mode = self._retrying(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
                if str(mode).lower() != "wal":
                    raise StoreError(f"store {self.path}: SQLite refused WAL mode (journal_mode={mode}); the "
                                     "store needs a local file system")
                conn.execute(f"PRAGMA synchronous={self.durability.value.upper()}")
                if writer:
                    # A savepoint's statement journal (the pages `ROLLBACK TO` would restore) in
                    # memory. SQLite spills one over 64 KiB to a temporary file: 16 fan-in
                    # branches in a savepoint (`create_joining_many`) on a big store change more
                    # than 16 pages (names are hashes), so every batch opened, wrote and deleted a
                    # file. Crash recovery never reads it (the WAL does); it is gone at the
                    # transaction's end and holds one transaction's changed pages at most.
                    conn.execute("PRAGMA temp_store = MEMORY")
            except BaseException:
                conn.close()
                raise
        return conn

    def _writer_connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        if self._writer is None:
            self._writer = self._connect(writer=True)
            self._bulk_applied = False
        return self._writer

    def _reader(self) -> sqlite3.Connection:
        conn: _Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreError(f"store {self.path} is closed")
            conn = self._connect()
            self._local.conn = conn
            with self._readers_lock:
                self._readers.add(conn)
        return conn

    def _check_process(self) -> None:
        """After a fork the parent's connections must not be used (SQLite's rule): start afresh.
        The inherited ones are left unclosed on purpose (closing could disturb the parent).
        A fork is noticed by `_forks` (counted in the child by `os.register_at_fork`), not by
        `os.getpid()`: a system call on every read and write."""
        if self._forks != _forks[0]:
            self._forks = _forks[0]
            self._orphans = (self._writer, list(self._readers), self._local)  # kept alive, never closed
            self._writer, self._readers, self._local = None, weakref.WeakSet(), threading.local()
            self._batch_lock, self._pending, self._leading = threading.Lock(), [], False
            self._riders = []  # the parent's (their threads did not follow the fork)
            self._write_mutex, self._readers_lock = _WriterMutex(), threading.Lock()

    # ---- group commit --------------------------------------------------------------------

    def _commit_batch(self, batch: list[_Write]) -> None:
        """Run `batch` in one transaction and commit; then mark each write done with its result
        or error (every write gets the error if the commit fails). A write that raises leaves
        no change of its own and fails alone: the batch runs first with no savepoints (each
        costs two statements per write, most of a batch's statements besides the writes'
        own); if a write raises, that transaction is rolled back and the batch runs again, one
        SAVEPOINT per write (`_run_savepointed`). A batch of `sync=False` writes only, on a `full`
        database, commits as `synchronous=NORMAL` (set around the transaction: SQLite reads the
        setting outside transactions only). The hot path of every write: no generator context
        managers, no closures unless SQLite says busy."""
        try:
            with self._write_mutex:
                conn = self._writer if self._writer is not None else self._writer_connection()
                relaxed = self.durability is Durability.FULL and _none_synced(batch)
                try:
                    if not self._wal_ready:
                        self._presize_wal(conn)
                    if self._bulk and not self._bulk_applied:  # (outside a transaction; after the presize's setting)
                        conn.execute(f"PRAGMA wal_autocheckpoint = {BULK_WAL_PAGES}")
                        self._bulk_applied = True
                    if relaxed:  # (outside the transaction: SQLite reads the setting there only)
                        conn.execute("PRAGMA synchronous = NORMAL")
                    try:
                        self._begin(conn)
                        try:
                            results = self._run_writes(conn, batch)
                            if conn.in_transaction:  # (not after a lone write that raised: rolled back)
                                try:
                                    self._commit_riding(conn, careful=False)
                                except _RiderFailed:  # again, each rider in a savepoint of its own (`Rider`)
                                    conn.execute("ROLLBACK")
                                    self._begin(conn)
                                    results = self._run_writes(conn, batch)
                                    if conn.in_transaction:
                                        self._commit_riding(conn, careful=True)
                        except BaseException:
                            with contextlib.suppress(sqlite3.Error):
                                conn.execute("ROLLBACK")
                            raise
                    finally:
                        if relaxed:
                            conn.execute("PRAGMA synchronous = FULL")
                except sqlite3.Error as exc:
                    raise self._as_store_error(exc, "write") from exc
        except BaseException as exc:
            for item in batch:
                item.error, item.done = exc, True
            if not isinstance(exc, Exception):
                raise
            return
        for item, value, error in results:
            item.result, item.error, item.done = value, error, True

    def _run_writes(self, conn: sqlite3.Connection,
                    batch: list[_Write]) -> list[tuple[_Write, Any, BaseException | None]]:
        """Every write of `batch` in the open transaction: without savepoints, and if one raises,
        again from a new transaction, each in a savepoint of its own."""
        results = self._run_optimistic(conn, batch)
        if results is None:  # a write raised: its transaction is rolled back
            self._begin(conn)
            results = self._run_savepointed(conn, batch)
        return results

    def _run_optimistic(self, conn: sqlite3.Connection,
                        batch: list[_Write]) -> list[tuple[_Write, Any, BaseException | None]] | None:
        """Every write of `batch` in the open transaction, with no savepoints: their results,
        or None once one raises (the transaction then rolled back). A lone write that raises
        gets its error here: rolling back the whole transaction undid exactly its changes (and
        the riders' wait for the next commit)."""
        results: list[tuple[_Write, Any, BaseException | None]] = []
        for item in batch:
            try:
                results.append((item, item.fn(conn), None))
            except Exception as exc:
                with contextlib.suppress(sqlite3.Error):  # (SQLite may have rolled back already: disk full)
                    conn.execute("ROLLBACK")
                if len(batch) == 1:
                    return [(item, None, self._as_store_error(exc, "write"))]
                return None
        return results

    def _run_savepointed(self, conn: sqlite3.Connection,
                         batch: list[_Write]) -> list[tuple[_Write, Any, BaseException | None]]:
        """Every write of `batch` in the open transaction, each in a SAVEPOINT of its own: one
        that raises undoes only its own changes and gets its error."""
        results: list[tuple[_Write, Any, BaseException | None]] = []
        for item in batch:
            conn.execute("SAVEPOINT w")
            try:
                value = item.fn(conn)
            except Exception as exc:  # the writer's own failure: undo only its changes
                conn.execute("ROLLBACK TO w")
                conn.execute("RELEASE w")
                results.append((item, None, self._as_store_error(exc, "write")))
            else:
                conn.execute("RELEASE w")
                results.append((item, value, None))
        return results

    def _commit_riding(self, conn: sqlite3.Connection, *, careful: bool) -> None:
        """Commit the batch's transaction with the riders' changes in it (`Rider`); tell each
        rider whether its changes were committed. _RiderFailed when a rider raised (not
        `careful`): the transaction is to be rolled back and the batch run again, carefully."""
        riders = self._riders
        if not riders:
            self._commit(conn)
            return
        settles: list[Callable[[bool], None]] = []
        try:
            for rider in riders:
                try:
                    settle = rider(conn, careful)
                except Exception as exc:
                    if careful:
                        raise
                    raise _RiderFailed() from exc
                if settle is not None:
                    settles.append(settle)
            self._commit(conn)
        except BaseException:
            for settle in settles:
                settle(False)
            raise
        for settle in settles:
            settle(True)

    def _presize_wal(self, conn: sqlite3.Connection) -> None:
        """Before the first write of a `full` database (once per process; the caller holds the
        writer), grow the `-wal` file to `WAL_PAGES` pages and fsync it, then keep it that size.

        Why: a commit that appends to the WAL changes the file's size, so its fdatasync also
        commits the file system's metadata journal; one that overwrites allocated blocks syncs
        data alone (ext4 here: ~170 µs against ~340 µs). SQLite rewrites the WAL from its start
        after each checkpoint without shrinking it, so once grown it stays grown; but a fresh WAL
        (each process's first open deletes-and-recreates it) grows commit by commit. How: one
        transaction writes a `WAL_PAGES`-page blob with a tiny page cache, so SQLite spills the
        pages to the WAL as uncommitted frames, and rolls back: every reader ignores frames past
        the last commit, the next commits overwrite them, nothing is committed. The auto-checkpoint
        threshold is set to the same size so the WAL cycles within it."""
        if self._wal_ready:
            return
        self._wal_ready = True
        conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_PAGES}")
        wal = Path(f"{self.path}-wal")
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        with contextlib.suppress(OSError):
            if wal.stat().st_size >= WAL_PAGES * page_size:
                return
        cache = conn.execute("PRAGMA cache_size").fetchone()[0]
        conn.execute("PRAGMA cache_size = 8")
        try:
            self._begin(conn)
            conn.execute(f"INSERT INTO unum_records ({_COLUMNS_PAD}) VALUES (?, 'value', '', 0, zeroblob(?))",
                         ("unum WAL presize (never committed)", WAL_PAGES * page_size))
        except sqlite3.Error as exc:  # an optimisation only: a full disk or a read-only file is the write's to report
            if _busy(exc):
                raise
            return
        finally:
            if conn.in_transaction:  # (SQLite itself rolls back on a full disk)
                conn.execute("ROLLBACK")
            conn.execute(f"PRAGMA cache_size = {int(cache)}")
        with contextlib.suppress(OSError):  # the grown size made durable now, not by the first commit
            fd = os.open(wal, os.O_RDONLY)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)

    def _begin(self, conn: sqlite3.Connection) -> None:
        """BEGIN IMMEDIATE (take the write lock now: no deadlock upgrading a read), retrying
        SQLITE_BUSY until `busy_timeout` has passed."""
        self._execute_busy(conn, "BEGIN IMMEDIATE")

    def _commit(self, conn: sqlite3.Connection) -> None:
        self._execute_busy(conn, "COMMIT")

    def _execute_busy(self, conn: sqlite3.Connection, statement: str) -> None:
        """`statement` at once (the hot path: no closure), retried while SQLite says busy (`_retrying`)."""
        try:
            conn.execute(statement)
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise
            self._retrying(lambda: conn.execute(statement))

    def _retrying(self, step: Callable[[], T]) -> T:
        """`step()`, retried while SQLite says busy (another connection holds the write lock),
        with short growing pauses, until `busy_timeout` has passed: then the busy error."""
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.0001
        while True:
            try:
                return step()
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 1.5, 0.005)

    # ---- errors --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _mapped(self, operation: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise self._as_store_error(exc, operation) from exc

    def _as_store_error(self, exc: BaseException, operation: str) -> BaseException:
        """A sqlite3 error as the one-line StoreError that says what to do (a StoreUnusable when
        someone has to act before a write can succeed); others unchanged."""
        if not isinstance(exc, sqlite3.Error):
            return exc
        text = str(exc)
        lowered = text.lower()
        where = f"store {self.path}"
        unusable = True  # waiting cannot help: someone has to act (StoreUnusable)
        if _busy(exc):
            message = (f"{where}: the database stayed locked by another process for over {self.busy_timeout:g} s "
                       f"({operation}): retry when it is done, or use another --store")
            unusable = False
        elif "readonly" in lowered or "read-only" in lowered:
            message = f"{where}: cannot write it, the file or its folder is read-only: use a writable --store path"
        elif "disk is full" in lowered or "disk full" in lowered:
            message = f"{where}: the disk is full: free space, then run again with the same --workflow-id"
        elif "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
            message = (f"{where} is corrupt or not an SQLite database ({text}): move it aside and use "
                       "another --store path")
        elif "unable to open" in lowered:
            message = f"{where}: cannot open the database file{self._why_unopenable()}: use a writable --store path"
        else:
            message = f"{where}: {operation} failed: {type(exc).__name__}: {text}"
            unusable = False
        error = (StoreUnusable if unusable else StoreError)(message)
        error.__cause__ = exc
        return error


    def _why_unopenable(self) -> str:
        """Why SQLite could not open (or create, with its -wal and -shm) the file, if the file
        system tells: read-only, or a folder that is missing or not writable."""
        folder = self.path.parent
        try:
            if os.statvfs(folder).f_flag & os.ST_RDONLY:
                return ": it is on a read-only file system"
        except OSError:
            return f": its folder {folder} is missing"
        if not os.access(folder, os.W_OK):
            return f": its folder {folder} is read-only for this user"
        return ""


#: Forks this process is removed from its first ancestor (counted in each child): `Database._check_process`.
class _WriterMutex:
    """The writer connection's turn: one batch or transaction at a time in this process and,
    once `share`d, across the processes that share it too (an exclusive `flock` of a lock file,
    taken after the thread lock, for as long as it). Why: SQLite makes a writer that finds the
    file locked retry (`Database._retrying`: pauses of up to 5 ms), so two processes that write
    all the time lose much of their time in those pauses; a waiter on a flock sleeps in the
    kernel and wakes when the holder lets go. SQLite's own locking stays what makes writes safe."""

    __slots__ = ("_lock", "_fd")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None

    def share(self, path: str) -> None:
        """Take the lock file at `path` (created if absent) too. Raises OSError."""
        with self._lock:
            if self._fd is None:
                self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def __enter__(self) -> None:
        self._lock.acquire()
        if self._fd is not None:
            import fcntl  # (only once shared: Linux and macOS)

            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            except BaseException:
                self._lock.release()
                raise

    def __exit__(self, *exc: object) -> None:
        try:
            if self._fd is not None:
                import fcntl

                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._lock.release()


_forks = [0]


def _forked() -> None:
    _forks[0] += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def _busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text or "database table is locked" in text


def _reopened(path: str, durability: str, busy_timeout: float) -> Database:
    """A `Database` unpickled in another process: the same file, opened there."""
    return Database(path, durability=durability, busy_timeout=busy_timeout)
