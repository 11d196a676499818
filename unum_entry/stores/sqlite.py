"""Embedded SQLite store: the whole store contract in one database file (the default of
`python -m builder run`).

Open with `open_store("sqlite:///abs/path/unum.db?durability=full")`, `open_store("path/unum.db")`
(a bare path ending in `.db`) or `SQLiteStore.open(path, durability=...)`.

Layout: one file (plus SQLite's `-wal` and `-shm` beside it) in WAL mode. `unum_records` holds
every record (key, kind, workflow, expiry, value; a set's size and its members as msgpack
`[slot, member, slot, member, …]` in the order the adds were applied, so `ordered_sets`);
`unum_app` holds the application items of transactional steps. `PRAGMA application_id` marks a
unum database and `PRAGMA user_version` its schema version (a newer one is refused).

Atomicity. Every write primitive is one function run inside a write transaction (`BEGIN
IMMEDIATE`: SQLite's file lock makes it exclusive across threads *and* processes on the machine),
so "read, decide, write" (create-if-absent returning the winner, add-to-set returning the set
after the add, a step transaction with its guards and versions) is atomic. A process killed
mid-transaction leaves nothing: its uncommitted WAL frames are ignored by every reader.

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

Group commit. An fsync costs ~0.4 ms here, so one commit per write would cap the store at a few
thousand writes per second. Writers of one process therefore share commits (leader/follower):
a writer queues its function; if no commit is in progress it becomes the leader, takes every
queued function, runs each in its own SAVEPOINT of one transaction (a function that raises rolls
back only its own changes and gets its exception), commits once (one fsync) and hands each
writer its result. Writers that queue meanwhile wait and form the next batch. A write returns
only after the commit that holds it is durable. Processes sharing the file serialise on SQLite's
lock; SQLITE_BUSY is retried (bounded by `busy_timeout`) and then raised as StoreError.

Sharing the database (the durable delivery queue in unum_entry/local keeps its tables in the
same file): `store.database` is the `Database`; `ensure_schema` adds tables, `write(fn)` runs
`fn(connection)` group-committed, `read(fn)` on a per-thread read connection, `transaction()`
is an exclusive transaction on the caller's thread. /work/notes/sqlite-api.md shows it in use.
"""

from __future__ import annotations

import contextlib
import enum
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

import msgpack  # type: ignore[import-untyped]

from unum_entry.errors import GuardFailed, StoreError, TransactionConflict
from unum_entry.stores.base import AppOp, Guard, Kind, Record, SetState, Store, Versioned

T = TypeVar("T")

SCHEMA_VERSION = 1
APPLICATION_ID = 0x756E756D  # "unum": marks a database this store made
DEFAULT_BUSY_TIMEOUT = 30.0  # seconds a writer waits for another process's lock before StoreError
_IN_BATCH = 500  # keys per `IN (...)` (well below SQLite's bound on host parameters)
_PAGE = 1000     # rows per page of a scan or a sweep
_KINDS = {kind.value: kind for kind in Kind}
_COLUMNS = "key, kind, workflow, expires_at, value, size, members"


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


_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS unum_records (
           key TEXT PRIMARY KEY NOT NULL,
           kind TEXT NOT NULL,
           workflow TEXT NOT NULL,
           expires_at INTEGER NOT NULL,
           value BLOB,
           size INTEGER,
           members BLOB)""",
    "CREATE INDEX IF NOT EXISTS unum_records_by_workflow ON unum_records (workflow)",
    """CREATE TABLE IF NOT EXISTS unum_app (
           tbl TEXT NOT NULL,
           key TEXT NOT NULL,
           value BLOB NOT NULL,
           version INTEGER NOT NULL,
           PRIMARY KEY (tbl, key))""",
]


class _Write:
    """One queued write: its function, then its result or error once its batch has committed."""

    __slots__ = ("fn", "done", "result", "error")

    def __init__(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        self.fn = fn
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None


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
        self._cond = threading.Condition(threading.Lock())
        self._pending: list[_Write] = []
        self._leading = False
        self._write_mutex = threading.Lock()  # the writer connection: one batch or transaction at a time
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._closed = False
        self._open()

    # ---- public API ----------------------------------------------------------------------

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` inside a write transaction shared with concurrent writers (group
        commit); returns its result once that transaction is committed (and synced, with
        durability full). If `fn` raises, its own changes are rolled back and the exception is
        raised here; the other writers of the batch are unaffected. `fn` may run on another
        thread (the batch's leader) and must not begin or commit transactions."""
        self._check_process()
        item = _Write(fn)
        with self._cond:
            self._pending.append(item)
            while self._leading and not item.done:
                self._cond.wait()
            if not item.done:
                self._leading = True
        if not item.done:
            try:
                while not item.done:  # our write is in the first batch we take: one round
                    with self._cond:
                        batch, self._pending = self._pending, []
                    self._commit_batch(batch)
            finally:
                with self._cond:
                    self._leading = False
                    self._cond.notify_all()
        if item.error is not None:
            raise item.error
        return item.result  # type: ignore[no-any-return]

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

    def close(self) -> None:
        """Close every connection (idempotent). The file stays."""
        self._closed = True
        with self._readers_lock:
            readers, self._readers = self._readers, []
        for conn in readers:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()
        with self._write_mutex:
            writer, self._writer = self._writer, None
            if writer is not None:
                with contextlib.suppress(sqlite3.Error):
                    writer.close()

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("a sqlite Database is per process: open the file again in the other process")

    # ---- connections ---------------------------------------------------------------------

    def _open(self) -> None:
        """Create the file (and its folder) if needed, check it is a unum database of a schema
        this version knows, and create the tables."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"store {self.path}: cannot create its folder ({exc.strerror}): use a writable "
                             "--store path") from exc
        conn = self._writer_connection()
        with self._mapped("open"):
            with self._write_mutex:
                self._begin(conn)
                try:
                    version = conn.execute("PRAGMA user_version").fetchone()[0]
                    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
                    tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                    if app_id not in (0, APPLICATION_ID) or (app_id == 0 and tables):
                        raise StoreError(f"store {self.path}: an SQLite database, but not a unum store (it has "
                                         "tables of its own): use another --store path")
                    if version > SCHEMA_VERSION:
                        raise StoreError(f"store {self.path} was written by a newer unum (schema {version}, this "
                                         f"version knows up to {SCHEMA_VERSION}): upgrade unum to use it")
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    if version < SCHEMA_VERSION:
                        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
                self._commit(conn)

    def _connect(self) -> sqlite3.Connection:
        with self._mapped("open"):
            # isolation_level=None: no implicit transactions; we BEGIN and COMMIT ourselves.
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None,
                                   check_same_thread=False)
            try:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"store {self.path}: SQLite refused WAL mode (journal_mode={mode}); the "
                                     "store needs a local file system")
                conn.execute(f"PRAGMA synchronous={self.durability.value.upper()}")
            except BaseException:
                conn.close()
                raise
        return conn

    def _writer_connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        if self._writer is None:
            self._writer = self._connect()
        return self._writer

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreError(f"store {self.path} is closed")
            conn = self._connect()
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def _check_process(self) -> None:
        """After a fork the parent's connections must not be used (SQLite's rule): start afresh.
        The inherited ones are left unclosed on purpose (closing could disturb the parent)."""
        if os.getpid() != self._pid:
            self._orphans = (self._writer, self._readers)
            self._writer, self._readers, self._local = None, [], threading.local()
            self._cond, self._pending, self._leading = threading.Condition(threading.Lock()), [], False
            self._write_mutex, self._readers_lock = threading.Lock(), threading.Lock()
            self._pid = os.getpid()

    # ---- group commit --------------------------------------------------------------------

    def _commit_batch(self, batch: list[_Write]) -> None:
        """Run `batch` in one transaction, one SAVEPOINT per write, and commit; then mark each
        write done with its result or error (every write gets the error if the commit fails)."""
        results: list[tuple[_Write, Any, BaseException | None]] = []
        try:
            with self._write_mutex:
                conn = self._writer_connection()
                with self._mapped("write"):
                    self._begin(conn)
                    try:
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
                        self._commit(conn)
                    except BaseException:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                        raise
        except BaseException as exc:
            for item in batch:
                item.error, item.done = exc, True
            if not isinstance(exc, Exception):
                raise
            return
        for item, value, error in results:
            item.result, item.error, item.done = value, error, True

    def _begin(self, conn: sqlite3.Connection) -> None:
        """BEGIN IMMEDIATE (take the write lock now: no deadlock upgrading a read), retrying
        SQLITE_BUSY beyond the connection's own busy timeout until `busy_timeout` has passed."""
        self._retrying(lambda: conn.execute("BEGIN IMMEDIATE"))

    def _commit(self, conn: sqlite3.Connection) -> None:
        self._retrying(lambda: conn.execute("COMMIT"))

    def _retrying(self, step: Callable[[], object]) -> None:
        deadline = time.monotonic() + self.busy_timeout
        pause = 0.001
        while True:
            try:
                step()
                return
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    # ---- errors --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _mapped(self, operation: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise self._as_store_error(exc, operation) from exc

    def _as_store_error(self, exc: BaseException, operation: str) -> BaseException:
        """A sqlite3 error as the one-line StoreError that says what to do; others unchanged."""
        if not isinstance(exc, sqlite3.Error):
            return exc
        text = str(exc)
        lowered = text.lower()
        where = f"store {self.path}"
        if _busy(exc):
            message = (f"{where}: the database stayed locked by another process for over {self.busy_timeout:g} s "
                       f"({operation}): retry when it is done, or use another --store")
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
        error = StoreError(message)
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


def _busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text or "database table is locked" in text


class SQLiteStore(Store):
    """The store contract over one SQLite database (module docstring)."""

    ordered_sets = True

    def __init__(self, database: Database, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.database = database
        self._owns_database = False

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, durability: Durability | str = Durability.FULL,
             busy_timeout: float = DEFAULT_BUSY_TIMEOUT, **kwargs: Any) -> SQLiteStore:
        """The store in the database file `path` (created with its folder if absent); `close()`
        closes the database."""
        store = cls(Database(path, durability=durability, busy_timeout=busy_timeout), **kwargs)
        store._owns_database = True
        return store

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> SQLiteStore:
        """`sqlite:///abs/path.db?durability=full|normal|off&busy_timeout=SECONDS`,
        `sqlite://relative/path.db`, or a bare path; a `durability` keyword wins over the URL's."""
        path, options = parse_url(url)
        durability = kwargs.pop("durability", None) or options.get("durability") or Durability.FULL
        busy = options.get("busy_timeout")
        try:
            busy_timeout = float(busy) if busy is not None else kwargs.pop("busy_timeout", DEFAULT_BUSY_TIMEOUT)
        except ValueError:
            raise StoreError(f"store URL {url!r}: busy_timeout must be seconds, found {busy!r}") from None
        return cls.open(path, durability=Durability.parse(durability, f"store URL {url!r}"),
                        busy_timeout=busy_timeout, **kwargs)

    @property
    def path(self) -> Path:
        return self.database.path

    def close(self) -> None:
        """Close the database if this store opened it (`open`, `from_url`). Idempotent."""
        if self._owns_database:
            self.database.close()

    def reopen(self, **kwargs: Any) -> SQLiteStore:
        """Another store over the same database (e.g. with another clock); shares its connections."""
        return SQLiteStore(self.database, **{"ttl_seconds": self.ttl_seconds, **kwargs})

    # ---- primitives ----------------------------------------------------------------------

    def _create(self, record: Record) -> Record | None:
        row = _row(record)

        def create(conn: sqlite3.Connection) -> Record | None:
            now = self._clock()
            # Insert, or replace a record that has expired: one statement on the hot path.
            cursor = conn.execute(
                f"INSERT INTO unum_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET kind = excluded.kind, workflow = excluded.workflow, "
                "expires_at = excluded.expires_at, value = excluded.value, size = excluded.size, "
                "members = excluded.members WHERE unum_records.expires_at <= ?", (*row, now))
            if cursor.rowcount:
                return None
            return _fetch_one(conn, record.key)

        return self.database.write(create)

    def _get_many(self, keys: list[str]) -> dict[str, Record]:
        def get(conn: sqlite3.Connection) -> dict[str, Record]:
            batches = [keys[i:i + _IN_BATCH] for i in range(0, len(keys), _IN_BATCH)]
            if len(batches) == 1:
                return _fetch(conn, batches[0])
            conn.execute("BEGIN")  # one snapshot for every batch
            try:
                found: dict[str, Record] = {}
                for batch in batches:
                    found.update(_fetch(conn, batch))
                return found
            finally:
                conn.execute("COMMIT")

        return self.database.read(get)

    def _delete(self, keys: list[str]) -> None:
        def delete(conn: sqlite3.Connection) -> None:
            for i in range(0, len(keys), _IN_BATCH):
                batch = keys[i:i + _IN_BATCH]
                conn.execute(f"DELETE FROM unum_records WHERE key IN ({_marks(batch)})", batch)

        self.database.write(delete)

    def _add_to_set(self, record: Record, slot: int, member: str) -> SetState:
        size = record.size or 0

        def add(conn: sqlite3.Connection) -> SetState:
            current = _fetch_one(conn, record.key)
            if current is not None and current.expires_at > self._clock():
                if current.kind is not Kind.SET or current.size is None:
                    raise StoreError(f"store key {record.key!r} holds a {current.kind.value}, not a set")
                members = dict(current.members)
                if slot not in members:  # a slot keeps its first member
                    members[slot] = member
                    conn.execute("UPDATE unum_records SET members = ? WHERE key = ?",
                                 (_pack_members(members), record.key))
                return SetState(size=current.size, members=members)
            fresh = {slot: member}
            conn.execute(f"INSERT OR REPLACE INTO unum_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (record.key, Kind.SET.value, record.workflow, record.expires_at, None, size,
                          _pack_members(fresh)))
            return SetState(size=size, members=fresh)

        return self.database.write(add)

    def _scan(self, workflow: str | None) -> Iterator[Record]:
        return self._paged(_COLUMNS, workflow)

    def _scan_keys(self) -> Iterator[Record]:
        return self._paged("key, kind, workflow, expires_at, NULL, size, NULL", None)

    def _sweep(self, now: float) -> int:
        def sweep_page(conn: sqlite3.Connection) -> int:
            # Decided inside the write transaction: a record replaced by a live one is not expired.
            return conn.execute("DELETE FROM unum_records WHERE key IN (SELECT key FROM unum_records "
                                "WHERE expires_at <= ? LIMIT ?)", (now, _PAGE * 10)).rowcount

        deleted = 0
        while page := self.database.write(sweep_page):  # pages: other writers get the lock between them
            deleted += page
        return deleted

    def _app_read(self, table: str, keys: list[str]) -> dict[str, Versioned]:
        def read(conn: sqlite3.Connection) -> dict[str, Versioned]:
            found: dict[str, Versioned] = {}
            for i in range(0, len(keys), _IN_BATCH):
                batch = keys[i:i + _IN_BATCH]
                rows = conn.execute(f"SELECT key, value, version FROM unum_app WHERE tbl = ? AND key IN "
                                    f"({_marks(batch)})", (table, *batch))
                found.update({key: Versioned(bytes(value), version) for key, value, version in rows})
            return found

        return self.database.read(read)

    def _transact(self, record: Record, ops: list[AppOp], guards: list[Guard]) -> Record | None:
        def transact(conn: sqlite3.Connection) -> Record | None:
            now = self._clock()
            existing = _fetch_one(conn, record.key)
            if existing is not None and existing.expires_at > now:
                return existing
            for guard in guards:
                found = _fetch_one(conn, guard.key)
                if found is not None and found.expires_at <= now:
                    found = None
                if guard.slot is not None:
                    holds = found is not None and found.kind is Kind.SET and guard.slot not in found.members
                else:
                    holds = (found is not None) == guard.present
                if not holds:
                    raise GuardFailed(f"step {record.key!r}: guard on {guard.key!r} does not hold")
            for op in ops:
                row = conn.execute("SELECT version FROM unum_app WHERE tbl = ? AND key = ?",
                                   (op.table, op.key)).fetchone()
                if (row[0] if row else 0) != op.expected:
                    raise TransactionConflict(f"application item {op.table}/{op.key} changed since it was read")
            conn.execute(f"INSERT OR REPLACE INTO unum_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         _row(record))
            for op in ops:
                if not op.write:
                    continue
                if op.value is None:
                    conn.execute("DELETE FROM unum_app WHERE tbl = ? AND key = ?", (op.table, op.key))
                else:
                    conn.execute("INSERT OR REPLACE INTO unum_app (tbl, key, value, version) VALUES (?, ?, ?, ?)",
                                 (op.table, op.key, op.value, op.expected + 1))
            return None

        return self.database.write(transact)

    # ---- helpers -------------------------------------------------------------------------

    def _paged(self, columns: str, workflow: str | None) -> Iterator[Record]:
        """Every record, a page at a time in key order (each page its own short read: no read
        transaction stays open while the caller works)."""
        where = "" if workflow is None else "workflow = ? AND "
        after = ""
        while True:
            params: tuple[Any, ...] = ((workflow,) if workflow is not None else ()) + (after, _PAGE)
            rows = self.database.read(lambda conn, params=params: conn.execute(  # type: ignore[misc]
                f"SELECT {columns} FROM unum_records WHERE {where}key > ? ORDER BY key LIMIT ?", params).fetchall())
            for row in rows:
                yield _record(row)
            if len(rows) < _PAGE:
                return
            after = rows[-1][0]


def parse_url(url: str) -> tuple[Path, dict[str, str]]:
    """(database path, query options) of `sqlite:///abs/path.db?…`, `sqlite://rel/path.db?…` or
    a bare path."""
    if not url.startswith("sqlite://"):
        return Path(url), {}
    parts = urlsplit(url)
    path = unquote(parts.netloc + parts.path)
    if not path:
        raise StoreError(f"store URL {url!r} names no database file: use sqlite:///path/to/unum.db")
    options = {name: values[-1] for name, values in parse_qs(parts.query).items()}
    unknown = sorted(set(options) - {"durability", "busy_timeout"})
    if unknown:
        raise StoreError(f"store URL {url!r}: unknown option(s) {', '.join(unknown)} (known: durability, busy_timeout)")
    return Path(path), options


def is_sqlite_location(url: str) -> bool:
    """Does `url` name a SQLite store (`sqlite://…`, or a path ending in `.db`, `.sqlite`, `.sqlite3`)?"""
    return url.startswith("sqlite://") or ("://" not in url and url.endswith((".db", ".sqlite", ".sqlite3")))


def _marks(keys: Sequence[object]) -> str:
    return ", ".join("?" * len(keys))


def _row(record: Record) -> tuple[Any, ...]:
    members = _pack_members(dict(record.members)) if record.kind is Kind.SET else None
    return (record.key, record.kind.value, record.workflow, int(record.expires_at), record.value, record.size,
            members)


def _fetch(conn: sqlite3.Connection, keys: list[str]) -> dict[str, Record]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM unum_records WHERE key IN ({_marks(keys)})", keys)
    return {row[0]: _record(row) for row in rows}


def _fetch_one(conn: sqlite3.Connection, key: str) -> Record | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM unum_records WHERE key = ?", (key,)).fetchone()
    return None if row is None else _record(row)


def _record(row: Sequence[Any]) -> Record:
    key, kind, workflow, expires_at, value, size, members = row
    try:
        return Record(key=key, kind=_KINDS[kind], workflow=workflow, expires_at=expires_at,
                      value=None if value is None else bytes(value), size=size,
                      members=_unpack_members(members) if members is not None else {})
    except (KeyError, ValueError, TypeError, msgpack.UnpackException) as exc:
        raise StoreError(f"store record {key!r} is not a unum record ({type(exc).__name__}: {exc})") from exc


def _pack_members(members: dict[int, str]) -> bytes:
    """A set's members as msgpack `[slot, member, …]`, in insertion (= apply) order."""
    flat: list[Any] = []
    for slot, member in members.items():
        flat += (slot, member)
    return msgpack.packb(flat, use_bin_type=True)  # type: ignore[no-any-return]


def _unpack_members(data: bytes) -> dict[int, str]:
    flat = msgpack.unpackb(data, raw=False)
    return {int(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
