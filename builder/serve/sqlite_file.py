"""One small SQLite file of `serve`'s state folder (builder.serve.registry's `registry.db`,
builder.serve.durable_index's `durable.db`): its schema applied on open, in WAL mode; every write
one `BEGIN IMMEDIATE` transaction, so two servers or two threads racing to create the same name
see one winner; rows read back as the dataclasses whose fields name their columns."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any, Self, TypeVar

_T = TypeVar("_T")


class SqliteFile:
    """The file at `path` (its folder made), `schema` applied: one connection shared by the
    process's threads under a lock. Thread-safe; a context manager; `close()` ends it."""

    def __init__(self, path: str | Path, schema: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.row_factory = sqlite3.Row
        self._lock = threading.RLock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(schema)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (`BEGIN IMMEDIATE`): committed when the block ends, rolled back
        when it raises."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _rows(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._db.execute(sql, args))


def row_as(cls: type[_T], row: sqlite3.Row, **decoded: Any) -> _T:
    """The dataclass `cls` of `row`, whose columns are named as its fields (a column it has no
    field for is left out); `decoded` gives the fields a column stores in another form (JSON
    text, 0/1 for a bool)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return cls(**{**{key: row[key] for key in row.keys() if key in names}, **decoded})
