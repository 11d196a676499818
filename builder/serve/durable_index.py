"""The index of the durable executions `serve` started (Lambda's Invoke of a durable function),
in one SQLite file of `serve`'s state folder (`durable.db`), as builder.serve.registry indexes
Step Functions executions: which unum workflow each is, on which workflow folder, started when,
with which input.

A status is never decided here: the store decides it (unum_entry.outcome, the first ending
wins); the index caches an ending once the store has it (`remember_end`), so listing many ended
executions reads no store. Every write is one SQLite transaction (`BEGIN IMMEDIATE`):
`add` is create-if-absent on (function, name), so two Invokes racing with one execution name
see one winner.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from builder.serve.sqlite_file import SqliteFile, row_as

SCHEMA = """
CREATE TABLE IF NOT EXISTS durable_executions (
  id TEXT PRIMARY KEY, function TEXT NOT NULL, name TEXT NOT NULL, workflow TEXT NOT NULL, folder TEXT NOT NULL,
  started REAL NOT NULL, input TEXT NOT NULL, status TEXT, ended REAL, result TEXT, error TEXT,
  seq INTEGER NOT NULL, UNIQUE (function, name));
CREATE INDEX IF NOT EXISTS durable_by_function ON durable_executions (function, seq);
"""


@dataclass
class DurableExecution:
    """One execution as the index holds it (`status` None: not known to have ended)."""

    id: str
    function: str
    name: str
    workflow: str      # the unum workflow running it
    folder: str        # the workflow folder it runs on (builder.serve.durable_code)
    started: float
    input: str         # the Invoke's payload, as sent
    status: str | None = None
    ended: float | None = None
    result: str | None = None
    error: str | None = None  # the ErrorObject as JSON text


class DurableIndex(SqliteFile):
    """The index file (module docstring). Thread-safe."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path, SCHEMA)

    def add(self, execution: DurableExecution) -> tuple[DurableExecution, bool]:
        """Index `execution` unless one of its function and name exists: (the indexed one, created)."""
        with self._write() as db:
            found = db.execute("SELECT * FROM durable_executions WHERE function = ? AND name = ?",
                               (execution.function, execution.name)).fetchone()
            if found is not None:
                return _execution(found), False
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM durable_executions").fetchone()[0]
            db.execute("INSERT INTO durable_executions VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                       (execution.id, execution.function, execution.name, execution.workflow, execution.folder,
                        execution.started, execution.input, None, None, None, None, seq))
        return execution, True

    def get(self, execution_id: str) -> DurableExecution | None:
        rows = self._rows("SELECT * FROM durable_executions WHERE id = ?", execution_id)
        return _execution(rows[0]) if rows else None

    def by_workflow(self, workflow: str) -> DurableExecution | None:
        rows = self._rows("SELECT * FROM durable_executions WHERE workflow = ?", workflow)
        return _execution(rows[0]) if rows else None

    def of_function(self, function: str) -> list[DurableExecution]:
        """The function's executions, newest first."""
        return [_execution(row) for row in
                self._rows("SELECT * FROM durable_executions WHERE function = ? ORDER BY seq DESC", function)]

    def unended(self) -> list[DurableExecution]:
        return [_execution(row) for row in self._rows("SELECT * FROM durable_executions WHERE status IS NULL")]

    def remember_end(self, execution_id: str, status: str, ended: float, *, result: str | None,
                     error: str | None) -> None:
        with self._write() as db:
            db.execute("UPDATE durable_executions SET status=?, ended=?, result=?, error=? WHERE id=? "
                       "AND status IS NULL", (status, ended, result, error, execution_id))

    def delete(self, execution_id: str) -> bool:
        with self._write() as db:
            return bool(db.execute("DELETE FROM durable_executions WHERE id = ?", (execution_id,)).rowcount)


def _execution(row: sqlite3.Row) -> DurableExecution:
    return row_as(DurableExecution, row)
