"""Embedded SQLite store: the whole store contract in one database file (the default of
`python -m builder run`; docs/embedded-store.md).

Open with `open_store("sqlite:///abs/path/unum.db?durability=full")`, `open_store("path/unum.db")`
(a bare path ending in `.db`) or `SQLiteStore.open(path, durability=...)`.

Layout (the tables live in `unum_entry.stores.sqlite_database`, which also holds the connections,
durability and group commit): `unum_records` holds every record (key, kind, workflow, expiry,
value; a set's size and its members as msgpack `[slot, member, slot, member, …]` in the order the
adds were applied, so `ordered_sets`); `unum_app` holds the application items of transactional
steps.

Atomicity. Every write primitive is one function run by `Database.write` inside a write
transaction (`BEGIN IMMEDIATE`: SQLite's file lock makes it exclusive across threads *and*
processes on the machine), so "read, decide, write" (create-if-absent returning the winner,
add-to-set returning the set after the add, a step transaction with its guards and versions) is
atomic. A process killed mid-transaction leaves nothing: its uncommitted WAL frames are ignored
by every reader. Reads run on a per-thread read connection and see every committed write.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

import msgpack  # type: ignore[import-untyped]

from unum_entry.errors import GuardFailed, StoreError, TransactionConflict
from unum_entry.stores.base import MANIFEST_TAG, AppOp, Guard, Kind, Record, SetState, Store, Versioned
from unum_entry.stores.sqlite_database import (DEFAULT_BUSY_TIMEOUT, SCHEMA_VERSION, Database, Durability)

__all__ = ["SCHEMA_VERSION", "Database", "Durability", "SQLiteStore", "is_sqlite_location", "parse_url"]

_IN_BATCH = 500  # keys per `IN (...)` (well below SQLite's bound on host parameters)
_PAGE = 1000     # rows per page of a scan or a sweep
SCAN_MIN = 4096  # keys below which `scan_values` is not cheaper than point reads (`scans_cheaper`)
SCAN_SHARE = 4   # ... nor when the workflow has more than this many rows per key read
_KINDS = {kind.value: kind for kind in Kind}
_COLUMNS = "key, kind, workflow, expires_at, value, size, members"
#: `_PUT` writes a record over whatever was there (an upsert, in place); `_CREATE` only over a
#: record that has expired (create-if-absent). One constant text each: SQLite's statement cache
#: hits. Neither is an INSERT OR REPLACE, which deletes the old row and makes a new one with a
#: new rowid: a scan, in rowid order (`_paged`), could then meet the record twice.
_PUT = (f"INSERT INTO unum_records ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (key) DO UPDATE SET kind = excluded.kind, workflow = excluded.workflow, "
        "expires_at = excluded.expires_at, value = excluded.value, size = excluded.size, "
        "members = excluded.members")
_CREATE = _PUT + " WHERE unum_records.expires_at <= ?"
#: `_CREATE` of a value record (a checkpoint, a result): its size and members as literal NULLs.
_CREATE_VALUE = _CREATE.replace("VALUES (?, ?, ?, ?, ?, ?, ?)", "VALUES (?, ?, ?, ?, ?, NULL, NULL)")
_SELECT_ONE = f"SELECT {_COLUMNS} FROM unum_records WHERE key = ?"
_SELECT_SET = "SELECT kind, expires_at, size, members FROM unum_records WHERE key = ?"  # what an add reads
_SET = Kind.SET.value
_CHUNK = Kind.CHUNK.value
_RESULT, _FAILURE = Kind.RESULT.value, Kind.FAILURE.value
T = TypeVar("T")
#: Values up to this many bytes are bound as a bytearray (`_blob`).
_SMALL_BLOB = 4096


class SQLiteStore(Store):
    """The store contract over one SQLite database (module docstring)."""

    ordered_sets = True
    joins_in_create = True  # a create and a set add in one transaction (`_create_joining`)
    joins_in_batches = True  # many of them in one transaction (`_create_joining_many`)

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
        statement, row = _creation(record)

        def create(conn: sqlite3.Connection) -> Record | None:
            # Insert, or replace a record that has expired: one statement on the hot path.
            if conn.execute(statement, (*row, self._clock())).rowcount:
                return None
            return _fetch_one(conn, record.key)

        return self.database.write(create)

    def _get_many(self, keys: list[str]) -> dict[str, Record]:
        return dict(self.database.read(lambda conn: _in_batches(conn, keys, lambda batch: _fetch(conn, batch).items())))

    def _delete(self, keys: list[str]) -> None:
        def delete(conn: sqlite3.Connection) -> None:
            for i in range(0, len(keys), _IN_BATCH):
                batch = keys[i:i + _IN_BATCH]
                conn.execute(f"DELETE FROM unum_records WHERE key IN ({_marks(batch)})", batch)

        self.database.write(delete)

    def _create_joining(self, record: Record, set_record: Record, slot: int,
                        member: str) -> tuple[Record | None, SetState | None]:
        statement, row = _creation(record)

        def create_joining(conn: sqlite3.Connection) -> tuple[Record | None, SetState | None]:
            if conn.execute(statement, (*row, self._clock())).rowcount:
                return None, self._add_in(conn, set_record, slot, member)
            return _fetch_one(conn, record.key), None

        return self.database.write(create_joining)  # one transaction: both or neither

    def _create_joining_many(self, items: list[tuple[Record, Record, int, str]]
                             ) -> list[tuple[Record | None, SetState | None] | Exception]:
        creations = [(_creation(record), set_record, slot, member) for record, set_record, slot, member in items]

        by_set: dict[str, list[int]] = {}  # the items joining each set, in order
        for i, (_, set_record, _, _) in enumerate(creations):
            by_set.setdefault(set_record.key, []).append(i)

        def create_joining_many(conn: sqlite3.Connection) -> list[tuple[Record | None, SetState | None] | Exception]:
            now = self._clock()
            made: list[tuple[Record | None, SetState | None] | Exception | None] = [None] * len(creations)
            for items in by_set.values():  # a set's items in a savepoint: their creates and its adds, or none
                conn.execute("SAVEPOINT joining")
                adds: list[tuple[int, str]] = []
                added: list[int] = []
                for i in items:
                    (statement, row), _, slot, member = creations[i]
                    if conn.execute(statement, (*row, now)).rowcount:
                        adds.append((slot, member))
                        added.append(i)
                    else:
                        made[i] = (_fetch_one(conn, row[0]), None)
                try:
                    states = self._add_many_in(conn, creations[items[0]][1], adds) if adds else []
                except StoreError as exc:  # this set's own trouble (not a set): its items fail, not the others
                    conn.execute("ROLLBACK TO joining")
                    for i in items:
                        made[i] = exc
                else:
                    for i, state in zip(added, states, strict=True):
                        made[i] = (None, state)
                conn.execute("RELEASE joining")
            return made  # type: ignore[return-value]  # every item set above

        return self.database.write(create_joining_many)  # one transaction: all of them or none

    def _add_to_set(self, record: Record, slot: int, member: str) -> SetState:
        return self.database.write(lambda conn: self._add_in(conn, record, slot, member))

    def _add_to_set_many(self, items: list[tuple[Record, int, str]]) -> list[SetState | Exception]:
        by_set: dict[str, list[int]] = {}  # the adds to each set, in order
        for i, (record, _, _) in enumerate(items):
            by_set.setdefault(record.key, []).append(i)

        def add_many(conn: sqlite3.Connection) -> list[SetState | Exception]:
            made: list[SetState | Exception | None] = [None] * len(items)
            for indexes in by_set.values():
                states: list[SetState | Exception]
                try:  # (one statement reads and one writes the set: nothing to undo when it refuses)
                    states = list(self._add_many_in(conn, items[indexes[0]][0],
                                                    [(items[i][1], items[i][2]) for i in indexes]))
                except StoreError as exc:  # this set's own trouble (not a set): its adds fail, not the others
                    states = [exc] * len(indexes)
                for i, state in zip(indexes, states, strict=True):
                    made[i] = state
            return made  # type: ignore[return-value]  # every item set above

        return self.database.write(add_many)  # one transaction: all of them or none

    def _add_in(self, conn: sqlite3.Connection, record: Record, slot: int, member: str) -> SetState:
        """`_add_to_set` inside the caller's write transaction (`_add_many_in` of one add)."""
        return self._add_many_in(conn, record, ((slot, member),))[0]

    def _add_many_in(self, conn: sqlite3.Connection, record: Record,
                     adds: Sequence[tuple[int, str]]) -> list[SetState]:
        """`_add_to_set` of each of `adds` to the set `record`, in order, inside the caller's
        write transaction; the set's state right after each. Reads only the set's own columns
        and works on its members' flat `[slot, member, …]` form; reads and writes the set once."""
        row = conn.execute(_SELECT_SET, (record.key,)).fetchone()
        exists = row is not None and row[1] > self._clock()
        if exists:
            kind, _, size, packed = row
            if kind != _SET or size is None:
                raise StoreError(f"store key {record.key!r} holds a {kind}, not a set")
            flat = _unpack_flat(record.key, packed)
        else:
            size, flat = record.size or 0, []
        members = dict(zip(flat[::2], flat[1::2], strict=True))
        states: list[SetState] = []
        changed = False
        for slot, member in adds:
            if slot not in members:  # a slot keeps its first member
                members[slot] = member
                flat += (slot, member)
                changed = True
            states.append(SetState(size, members.copy()))
        if not exists:
            conn.execute(_PUT, (record.key, _SET, record.workflow, record.expires_at, None, size,
                                _blob(msgpack.packb(flat, use_bin_type=True))))
        elif changed:
            conn.execute("UPDATE unum_records SET members = ? WHERE key = ?",
                         (_blob(msgpack.packb(flat, use_bin_type=True)), record.key))
        return states

    def _get_values(self, keys: list[str], now: float) -> tuple[dict[str, bytes], dict[str, Record]]:
        """`_get_many` without a Record per key (a fan-in's gather reads every branch's value)."""
        def select(conn: sqlite3.Connection, batch: list[str]) -> sqlite3.Cursor:
            return conn.execute(f"SELECT {_COLUMNS} FROM unum_records WHERE key IN ({_marks(batch)}) AND "
                                "expires_at > ? AND value IS NOT NULL", (*batch, now))

        values: dict[str, bytes] = {}
        manifests: dict[str, Record] = {}
        for row in self.database.read(lambda conn: _in_batches(conn, keys, lambda batch: select(conn, batch))):
            value = row[4]
            if value[:1] == MANIFEST_TAG and row[1] != _CHUNK:
                manifests[row[0]] = _record(row)
            else:
                values[row[0]] = bytes(value)  # (a BLOB column reads as bytes; a TEXT one would not)
        return values, manifests

    def scans_cheaper(self, workflow: str, count: int) -> bool:
        """A point read searches the key index and then the table, each at a page far from the
        last one's (names are hashes); a scan by the workflow index reads the table in the order
        the rows were written. A million-branch join's gather: 11 s by point reads, 5 s by a
        scan (`python bench/engine.py` … `--map 1000000`'s Sum). So: a scan for SCAN_MIN keys or
        more that are at least 1 in SCAN_SHARE of the workflow's rows (counted by the index, at
        most SCAN_SHARE × `count` of them)."""
        if count < SCAN_MIN:
            return False
        limit = SCAN_SHARE * count
        rows = self.database.read(lambda conn: conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM unum_records WHERE workflow = ? LIMIT ?)",
            (workflow, limit + 1)).fetchone()[0])
        return int(rows) <= limit

    def expect_bulk_writes(self) -> None:
        self.database.expect_bulk_writes()

    def scan_values(self, workflow: str) -> Iterator[tuple[str, bytes | None]]:
        """In the order the rows were written (rowid), by the workflow index, _PAGE rows a read."""
        now, after = self._clock(), 0
        while True:
            rows = self.database.read(lambda conn, after=after: conn.execute(  # type: ignore[misc]
                "SELECT rowid, key, value FROM unum_records WHERE workflow = ? AND rowid > ? AND "
                "expires_at > ? AND value IS NOT NULL AND kind != ? ORDER BY rowid LIMIT ?",
                (workflow, after, now, _CHUNK, _PAGE)).fetchall())
            for _, key, value in rows:
                yield key, None if value[:1] == MANIFEST_TAG else value
            if len(rows) < _PAGE:
                return
            after = rows[-1][0]

    def _tally(self, workflow: str, kinds: frozenset[Kind], keys: frozenset[str],
               now: float) -> tuple[list[Record], dict[Kind, int], int | None]:
        """Counted and filtered by SQLite in one snapshot: a million-branch map's outcome reads
        its result, not a million records into Python."""
        wanted = [kind.value for kind in kinds]
        names = list(keys)

        def tally(conn: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
            with _snapshot(conn):
                counted = conn.execute("SELECT kind, count(*), max(expires_at) FROM unum_records "
                                       "WHERE workflow = ? AND expires_at > ? GROUP BY kind", (workflow, now)).fetchall()
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM unum_records WHERE workflow = ? AND expires_at > ? AND "
                    f"(kind IN ({_marks(wanted)}) OR key IN ({_marks(names)})) ORDER BY rowid",
                    (workflow, now, *wanted, *names)).fetchall()
            return counted, rows

        counted, rows = self.database.read(tally)
        counts = {self._kind(kind, workflow): count for kind, count, _ in counted}
        latest = max((latest for _, _, latest in counted), default=None)
        return [_record(row) for row in rows], counts, latest

    def _workflow_counts(self, now: float) -> tuple[list[tuple[str, Kind, int, int, int]],
                                                    list[tuple[str, Kind, str]]]:
        """Counted by SQLite in one snapshot instead of a record per row in Python (`python -m
        builder list` over a million-branch map's store)."""
        def listing(conn: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
            with _snapshot(conn):
                counted = conn.execute("SELECT workflow, kind, count(*), min(expires_at), max(expires_at) "
                                       "FROM unum_records WHERE expires_at > ? GROUP BY workflow, kind",
                                       (now,)).fetchall()
                named = conn.execute("SELECT workflow, kind, key FROM unum_records WHERE expires_at > ? AND "
                                     "kind IN (?, ?) ORDER BY rowid", (now, _RESULT, _FAILURE)).fetchall()
            return counted, named

        counted, named = self.database.read(listing)
        return ([(workflow, self._kind(kind, workflow), count, first, last) for workflow, kind, count, first, last
                 in counted], [(workflow, _KINDS[kind], key) for workflow, kind, key in named])

    def _kind(self, kind: str, workflow: str) -> Kind:
        """The Kind a row's `kind` column names; StoreError naming the row's workflow if none."""
        try:
            return _KINDS[kind]
        except KeyError:
            raise StoreError(f"store {self.database.path}: a record of workflow {workflow!r} has an unknown "
                             f"kind {kind!r}") from None

    def _scan(self, workflow: str | None) -> Iterator[Record]:
        return self._paged(_COLUMNS, workflow)

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
            conn.execute(_PUT, _row(record))
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
        """Every record, a page at a time in the order they were made (rowid; each page its own
        short read: no read transaction stays open while the caller works). A record is met
        once: no write gives a record a new rowid (`_PUT`)."""
        where = "" if workflow is None else "workflow = ? AND "
        after = 0
        while True:
            params: tuple[Any, ...] = ((workflow,) if workflow is not None else ()) + (after, _PAGE)
            rows = self.database.read(lambda conn, params=params: conn.execute(  # type: ignore[misc]
                f"SELECT {columns}, rowid FROM unum_records WHERE {where}rowid > ? ORDER BY rowid LIMIT ?",
                params).fetchall())
            for row in rows:
                yield _record(row[:-1])
            if len(rows) < _PAGE:
                return
            after = rows[-1][-1]


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


@contextlib.contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """One read snapshot for the statements inside (a read connection is in autocommit)."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


def _in_batches(conn: sqlite3.Connection, keys: list[str],
                select: Callable[[list[str]], Iterable[T]]) -> list[T]:
    """What `select` returns for each batch of `keys` (at most _IN_BATCH per `IN (...)`), all
    batches read in one snapshot."""
    batches = [keys[i:i + _IN_BATCH] for i in range(0, len(keys), _IN_BATCH)]
    if len(batches) == 1:
        return list(select(batches[0]))
    with _snapshot(conn):
        return [item for batch in batches for item in select(batch)]


def _marks(keys: Sequence[object]) -> str:
    return ", ".join("?" * len(keys))


def _creation(record: Record) -> tuple[str, tuple[Any, ...]]:
    """The create statement for `record` and its parameters but the clock's `now`: a value
    record's without its NULL columns (`_CREATE_VALUE`). (`_value_`: an enum member's `value`
    is a Python-level property, two calls per read.)"""
    if record.kind is not Kind.SET and record.size is None and record.value is not None:
        return _CREATE_VALUE, (record.key, record.kind._value_, record.workflow, int(record.expires_at),
                               _blob(record.value))
    return _CREATE, _row(record)


def _blob(data: bytes) -> bytes | bytearray:
    """`data` as the sqlite3 module binds it fastest: a small value as a bytearray. It binds
    str, int, float and bytearray parameters directly, but looks every other type up in its
    adapter registry first - for bytes and None a failed attribute lookup that formats an
    AttributeError, about a tenth of a one-row insert (measured: docs/embedded-engine.md, round
    8); the copy costs less for a small value, more for a large one."""
    return bytearray(data) if len(data) <= _SMALL_BLOB else data


def _row(record: Record) -> tuple[Any, ...]:
    members = _pack_members(dict(record.members)) if record.kind is Kind.SET else None
    return (record.key, record.kind._value_, record.workflow, int(record.expires_at), record.value, record.size,
            members)


def _fetch(conn: sqlite3.Connection, keys: list[str]) -> dict[str, Record]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM unum_records WHERE key IN ({_marks(keys)})", keys)
    return {row[0]: _record(row) for row in rows}


def _fetch_one(conn: sqlite3.Connection, key: str) -> Record | None:
    row = conn.execute(_SELECT_ONE, (key,)).fetchone()
    return None if row is None else _record(row)


def _record(row: Sequence[Any]) -> Record:
    key, kind, workflow, expires_at, value, size, members = row
    try:
        return Record(key=key, kind=_KINDS[kind], workflow=workflow, expires_at=expires_at,
                      value=None if value is None else bytes(value), size=size,
                      members=_unpack_members(members) if members is not None else None)
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


def _unpack_flat(key: str, data: bytes | None) -> list[Any]:
    """A set's members as stored, `[slot, member, …]` (a list to extend); StoreError names the
    record when they are not (as `_record` does for every other read)."""
    try:
        flat = msgpack.unpackb(data, raw=False) if data is not None else []
        if type(flat) is not list or len(flat) % 2 or not all(type(slot) is int for slot in flat[::2]):
            raise ValueError("members are not [slot, member, ...]")
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise StoreError(f"store record {key!r} is not a unum record ({type(exc).__name__}: {exc})") from exc
    return flat
