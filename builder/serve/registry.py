"""What the Step Functions API creates beside the workflows, in one SQLite file (`serve`'s
state folder, `registry.db`): state machines, their published versions and aliases, activities,
tags, and the index of executions (which workflow each is, on which compiled folder, started
when, with which input).

An execution's status is never decided here: the store decides it (unum_entry.outcome, the first
ending wins). The index only caches an ending once the store has it (`remember_end`), so a list
of many ended executions reads no store, and forgets it when a redrive runs the execution again.

Every write is one SQLite transaction (`BEGIN IMMEDIATE`), so two servers or two threads racing
to create the same name see one winner: `add_execution` is create-if-absent, as AWS's
StartExecution is idempotent for the same name and input.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.serve.sqlite_file import SqliteFile, row_as

SCHEMA = """
CREATE TABLE IF NOT EXISTS machines (
  name TEXT PRIMARY KEY, definition TEXT NOT NULL, role_arn TEXT NOT NULL, type TEXT NOT NULL,
  created REAL NOT NULL, updated REAL NOT NULL, revision TEXT NOT NULL, description TEXT,
  logging TEXT, tracing TEXT, next_version INTEGER NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS versions (
  machine TEXT NOT NULL, version INTEGER NOT NULL, definition TEXT NOT NULL, role_arn TEXT NOT NULL,
  description TEXT, created REAL NOT NULL, revision TEXT NOT NULL, PRIMARY KEY (machine, version));
CREATE TABLE IF NOT EXISTS aliases (
  machine TEXT NOT NULL, name TEXT NOT NULL, description TEXT, routing TEXT NOT NULL,
  created REAL NOT NULL, updated REAL NOT NULL, PRIMARY KEY (machine, name));
CREATE TABLE IF NOT EXISTS tags (arn TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (arn, key));
CREATE TABLE IF NOT EXISTS activities (name TEXT PRIMARY KEY, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS executions (
  workflow TEXT PRIMARY KEY, machine TEXT NOT NULL, name TEXT NOT NULL, machine_arn TEXT NOT NULL,
  version INTEGER, alias TEXT, revision TEXT NOT NULL, folder TEXT NOT NULL, started REAL NOT NULL,
  input TEXT NOT NULL, express INTEGER NOT NULL DEFAULT 0, status TEXT, stopped REAL, error TEXT, cause TEXT,
  output TEXT, redrives INTEGER NOT NULL DEFAULT 0, redriven REAL, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS executions_by_machine ON executions (machine, seq);
"""


@dataclass
class Machine:
    name: str
    definition: str
    role_arn: str
    type: str
    created: float
    updated: float
    revision: str
    description: str | None = None
    logging: dict[str, Any] | None = None
    tracing: dict[str, Any] | None = None
    next_version: int = 1


@dataclass
class Version:
    machine: str
    version: int
    definition: str
    role_arn: str
    description: str | None
    created: float
    revision: str


@dataclass
class Alias:
    machine: str
    name: str
    description: str | None
    routing: list[dict[str, Any]]  # [{"stateMachineVersionArn", "weight"}]
    created: float
    updated: float


@dataclass
class Execution:
    """One execution as the index holds it (`status` None: not known to have ended)."""

    workflow: str
    machine: str
    name: str
    machine_arn: str       # the ARN it was started with (a version's or alias's, qualified)
    version: int | None
    alias: str | None
    revision: str          # the definition's revision it runs
    folder: str            # the compiled workflow folder it runs on (builder.serve.engine)
    started: float
    input: str
    express: bool = False
    status: str | None = None
    stopped: float | None = None
    error: str | None = None
    cause: str | None = None
    output: str | None = None
    redrives: int = 0
    redriven: float | None = None


class Registry(SqliteFile):
    """The registry file (module docstring). Thread-safe; a context manager."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path, SCHEMA)

    # ---- state machines ----------------------------------------------------------------

    def add_machine(self, machine: Machine) -> Machine | None:
        """Create `machine` unless one of its name exists; returns the existing one then."""
        with self._write() as db:
            found = db.execute("SELECT * FROM machines WHERE name = ?", (machine.name,)).fetchone()
            if found is not None:
                return _machine(found)
            db.execute("INSERT INTO machines VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                       (machine.name, machine.definition, machine.role_arn, machine.type, machine.created,
                        machine.updated, machine.revision, machine.description, _dump(machine.logging),
                        _dump(machine.tracing), machine.next_version))
        return None

    def machine(self, name: str) -> Machine | None:
        rows = self._rows("SELECT * FROM machines WHERE name = ?", name)
        return _machine(rows[0]) if rows else None

    def machines(self) -> list[Machine]:
        return [_machine(row) for row in self._rows("SELECT * FROM machines ORDER BY created, name")]

    def update_machine(self, machine: Machine) -> None:
        with self._write() as db:
            db.execute("UPDATE machines SET definition=?, role_arn=?, updated=?, revision=?, description=?, logging=?, "
                       "tracing=?, next_version=? WHERE name=?",
                       (machine.definition, machine.role_arn, machine.updated, machine.revision, machine.description,
                        _dump(machine.logging), _dump(machine.tracing), machine.next_version, machine.name))

    def delete_machine(self, name: str) -> bool:
        with self._write() as db:
            gone = db.execute("DELETE FROM machines WHERE name = ?", (name,)).rowcount
            db.execute("DELETE FROM versions WHERE machine = ?", (name,))
            db.execute("DELETE FROM aliases WHERE machine = ?", (name,))
        return bool(gone)

    # ---- versions and aliases -----------------------------------------------------------

    def publish(self, name: str, description: str | None, revision_wanted: str | None,
                now: float) -> tuple[Version | None, str]:
        """Publish the machine's current definition as its next version, or return the latest
        version when it already holds this revision (AWS: publishing an unchanged definition
        returns the latest version). ("missing", "conflict" as the second item on refusal.)"""
        with self._write() as db:
            row = db.execute("SELECT * FROM machines WHERE name = ?", (name,)).fetchone()
            if row is None:
                return None, "missing"
            machine = _machine(row)
            if revision_wanted is not None and revision_wanted != machine.revision:
                return None, "conflict"
            latest = db.execute("SELECT * FROM versions WHERE machine = ? ORDER BY version DESC LIMIT 1",
                                (name,)).fetchone()
            if latest is not None and latest["revision"] == machine.revision:
                return _version(latest), "existing"
            number = machine.next_version
            db.execute("INSERT INTO versions VALUES (?,?,?,?,?,?,?)",
                       (name, number, machine.definition, machine.role_arn, description, now, machine.revision))
            db.execute("UPDATE machines SET next_version = ? WHERE name = ?", (number + 1, name))
        return Version(name, number, machine.definition, machine.role_arn, description, now, machine.revision), "new"

    def version(self, machine: str, number: int) -> Version | None:
        rows = self._rows("SELECT * FROM versions WHERE machine = ? AND version = ?", machine, number)
        return _version(rows[0]) if rows else None

    def versions(self, machine: str) -> list[Version]:
        return [_version(r) for r in self._rows("SELECT * FROM versions WHERE machine = ? ORDER BY version DESC", machine)]

    def delete_version(self, machine: str, number: int) -> bool:
        with self._write() as db:
            return bool(db.execute("DELETE FROM versions WHERE machine = ? AND version = ?", (machine, number)).rowcount)

    def put_alias(self, alias: Alias, *, create: bool) -> Alias | None:
        """Create (`create`) or replace an alias; on create, returns the existing one if any."""
        with self._write() as db:
            found = db.execute("SELECT * FROM aliases WHERE machine = ? AND name = ?", (alias.machine, alias.name)).fetchone()
            if create and found is not None:
                return _alias(found)
            db.execute("INSERT OR REPLACE INTO aliases VALUES (?,?,?,?,?,?)",
                       (alias.machine, alias.name, alias.description, json.dumps(alias.routing), alias.created,
                        alias.updated))
        return None

    def alias(self, machine: str, name: str) -> Alias | None:
        rows = self._rows("SELECT * FROM aliases WHERE machine = ? AND name = ?", machine, name)
        return _alias(rows[0]) if rows else None

    def aliases(self, machine: str) -> list[Alias]:
        return [_alias(r) for r in self._rows("SELECT * FROM aliases WHERE machine = ? ORDER BY created, name", machine)]

    def delete_alias(self, machine: str, name: str) -> bool:
        with self._write() as db:
            return bool(db.execute("DELETE FROM aliases WHERE machine = ? AND name = ?", (machine, name)).rowcount)

    # ---- tags and activities -----------------------------------------------------------

    def tag(self, arn: str, tags: dict[str, str]) -> None:
        with self._write() as db:
            db.executemany("INSERT OR REPLACE INTO tags VALUES (?,?,?)", [(arn, k, v) for k, v in tags.items()])

    def untag(self, arn: str, keys: list[str]) -> None:
        with self._write() as db:
            db.executemany("DELETE FROM tags WHERE arn = ? AND key = ?", [(arn, k) for k in keys])

    def tags(self, arn: str) -> dict[str, str]:
        return {r["key"]: r["value"] for r in self._rows("SELECT key, value FROM tags WHERE arn = ? ORDER BY key", arn)}

    def add_activity(self, name: str, now: float) -> float:
        """Create the activity unless it exists (AWS: CreateActivity is idempotent); its creation time."""
        with self._write() as db:
            db.execute("INSERT OR IGNORE INTO activities VALUES (?, ?)", (name, now))
            return float(db.execute("SELECT created FROM activities WHERE name = ?", (name,)).fetchone()[0])

    def activity(self, name: str) -> float | None:
        rows = self._rows("SELECT created FROM activities WHERE name = ?", name)
        return float(rows[0][0]) if rows else None

    def activities(self) -> list[tuple[str, float]]:
        return [(r["name"], r["created"]) for r in self._rows("SELECT * FROM activities ORDER BY created, name")]

    def delete_activity(self, name: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM activities WHERE name = ?", (name,))

    # ---- executions ----------------------------------------------------------------------

    def add_execution(self, execution: Execution) -> tuple[Execution, bool]:
        """Index `execution` unless its workflow is indexed: (the indexed one, created?)."""
        with self._write() as db:
            found = db.execute("SELECT * FROM executions WHERE workflow = ?", (execution.workflow,)).fetchone()
            if found is not None:
                return _execution(found), False
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM executions").fetchone()[0]
            db.execute("INSERT INTO executions (workflow, machine, name, machine_arn, version, alias, revision, folder, "
                       "started, input, express, seq) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                       (execution.workflow, execution.machine, execution.name, execution.machine_arn, execution.version,
                        execution.alias, execution.revision, execution.folder, execution.started, execution.input,
                        int(execution.express), seq))
        return execution, True

    def execution(self, workflow: str) -> Execution | None:
        rows = self._rows("SELECT * FROM executions WHERE workflow = ?", workflow)
        return _execution(rows[0]) if rows else None

    def executions(self, machine: str | None = None, *, unended: bool = False) -> list[Execution]:
        """Newest first (AWS lists executions by start, newest first)."""
        where, args = [], []
        if machine is not None:
            where.append("machine = ?")
            args.append(machine)
        if unended:
            where.append("status IS NULL")
        sql = "SELECT * FROM executions" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY seq DESC"
        return [_execution(r) for r in self._rows(sql, *args)]

    def remember_end(self, workflow: str, status: str, stopped: float, *, error: str | None, cause: str | None,
                     output: str | None) -> None:
        """Cache an ending the store decided (module docstring)."""
        with self._write() as db:
            db.execute("UPDATE executions SET status=?, stopped=?, error=?, cause=?, output=? WHERE workflow=? "
                       "AND status IS NULL", (status, stopped, error, cause, output, workflow))

    def forget_end(self, workflow: str, *, redriven: float) -> None:
        """A redrive runs the execution again: its cached ending no longer holds."""
        with self._write() as db:
            db.execute("UPDATE executions SET status=NULL, stopped=NULL, error=NULL, cause=NULL, output=NULL, "
                       "redrives = redrives + 1, redriven = ? WHERE workflow = ?", (redriven, workflow))


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _machine(row: sqlite3.Row) -> Machine:
    return row_as(Machine, row, logging=_load(row["logging"]), tracing=_load(row["tracing"]))


def _version(row: sqlite3.Row) -> Version:
    return row_as(Version, row)


def _alias(row: sqlite3.Row) -> Alias:
    return row_as(Alias, row, routing=json.loads(row["routing"]))


def _execution(row: sqlite3.Row) -> Execution:
    return row_as(Execution, row, express=bool(row["express"]))  # (its `seq` column orders the list only)
