"""What `run` records when it starts a workflow, so a reused `--workflow-id` is recognised.

`run` writes one record per workflow id, create-if-absent, before it invokes anything: the
workflow's input, the folder it was run from and when. The first run of an id creates it; a
later run with the same id finds it and
- with the same input (compared as canonical JSON), continues the workflow (a resume: every
  committed invocation answers from its checkpoint) or, if it has ended, reports its outcome;
- with a different input, is refused (`InputMismatch`, exit 2), unless `--resume` asks to
  continue the workflow as it was started (with its recorded input).

The record (kind MARKER, key `naming.start_key`: never a checkpoint name) is stamped by the
workflow's ledger like every object (unum_entry.retention; the workflow has not started yet, so
its deadline's bound, now + TTL) and its write is the run's first store request: an unreachable or misconfigured store fails here,
in one line, before any thread starts.

The record also names the workflow's version (builder.versions: the content hash of the folder
it started with, whose copy every later `--resume`, `redrive` and callback continuation loads).
`python -m builder upgrade` moves a workflow to another version without rewriting the record
(records are create-if-absent): upgrade n is a record of its own (`upgrade_key(workflow, n)`,
n = 0, 1, …, each create-if-absent, so two upgrades at once cannot both take number n), and
the workflow's version is the one its last upgrade names, else the start record's. A record
written before versions existed names none: such a workflow runs from its folder as before.
"""

from __future__ import annotations

import enum
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from unum_entry import naming
from unum_entry.codec import decode, encode
from unum_entry.packing import pack
from unum_entry.errors import UnumError
from unum_entry.retention import Ledger, store_retention
from unum_entry.stores.base import Kind, Store


class InputMismatch(UnumError):
    """A reused workflow id with an input other than the one it was started with."""


class NothingToResume(UnumError):
    """`--resume` of a workflow id the store has no record of."""


class UnknownWorkflow(UnumError):
    """A workflow id the store holds nothing of (no start record, no outcome)."""


class StartKind(enum.Enum):
    """How `claim` found the workflow id."""

    NEW = "new"            # first run of this id: the record was written now
    SAME = "same"          # run before with the same input
    RESUMED = "resumed"    # run before with another input; `--resume` continues the recorded one


@dataclass(frozen=True)
class StartRecord:
    """The recorded start of a workflow (`input` is the one the workflow runs with)."""

    kind: StartKind
    input: Any
    folder: str
    started: int  # epoch seconds of the first run
    version: str | None = None  # the version it runs (builder.versions), its last upgrade's if any; None: none recorded
    upgrades: int = 0  # how many times `upgrade` moved it


def start_key(workflow_id: str) -> str:
    """The record's key (unum_entry.naming.start_key)."""
    return naming.start_key(workflow_id)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


MAX_UPGRADES = 1000


def upgrade_key(workflow_id: str, number: int) -> str:
    """The record of upgrade `number` (0, 1, …) of a workflow: a marker like the start record."""
    return "i-" + hashlib.blake2b(pack(["run-upgrade", workflow_id, number]), digest_size=16).hexdigest()


def claim(store: Store, workflow_id: str, input_value: Any, *, folder: str, resume: bool,
          version: str | None = None) -> StartRecord:
    """Record the start of `workflow_id` unless recorded, on `version` (the version id its run
    snapshotted, builder.versions); say how the id was found (see the module docstring): a
    workflow started before keeps its recorded version. Raises InputMismatch, NothingToResume,
    or StoreError from the store."""
    if resume:
        recorded = read(store, workflow_id)
        if recorded is None:
            raise NothingToResume(f"--resume: no workflow {workflow_id!r} in this store (nothing was started "
                                  f"with that id, or it expired); drop --resume to start it")
        same = _canonical(recorded.input) == _canonical(input_value)
        return StartRecord(StartKind.SAME if same else StartKind.RESUMED, recorded.input, recorded.folder,
                           recorded.started, recorded.version, recorded.upgrades)
    now = int(time.time())
    ledger = Ledger.bounded(workflow_id, 0, store_retention(store))
    record: dict[str, Any] = {"input": input_value, "folder": folder, "started": now}
    if version is not None:
        record["version"] = version
    stored, created = ledger.create(store, ledger.start(), encode(record, what="--input"), Kind.MARKER)
    if created:
        return StartRecord(StartKind.NEW, input_value, folder, now, version)
    found = _parse(stored)
    if _canonical(found["input"]) != _canonical(input_value):
        raise InputMismatch(f"workflow {workflow_id!r} was started with a different input; pass --resume to "
                            f"continue it with its recorded input, or choose another --workflow-id")
    return _upgraded(store, workflow_id, _record(StartKind.SAME, found))


def read(store: Store, workflow_id: str) -> StartRecord | None:
    """The recorded start of `workflow_id` (kind SAME) with the version it runs now (its last
    upgrade's), or None."""
    raw = store.get(start_key(workflow_id))
    if raw is None:
        return None
    return _upgraded(store, workflow_id, _record(StartKind.SAME, _parse(raw)))


def versions_of(store: Store, workflow_ids: list[str]) -> dict[str, str]:
    """The version each of `workflow_ids` runs now (those whose start record names one), in
    batch reads: the start records, then upgrade 0, 1, … of those that have one."""
    keys = {start_key(w): w for w in workflow_ids}
    found: dict[str, str] = {}
    for key, raw in store.get_many(list(keys)).items():
        try:
            version = decode(raw).get("version")
        except Exception:  # noqa: BLE001 - not a start record: no version
            continue
        if isinstance(version, str):
            found[keys[key]] = version
    number, candidates = 0, list(found)
    while candidates and number < MAX_UPGRADES:
        upgrades = {upgrade_key(w, number): w for w in candidates}
        moved = store.get_many(list(upgrades))
        candidates = []
        for key, raw in moved.items():
            version = _upgrade_version(raw)
            if version is not None:
                found[upgrades[key]] = version
                candidates.append(upgrades[key])
        number += 1
    return found


def record_upgrade(store: Store, workflow_id: str, recorded: StartRecord, version: str) -> StartRecord:
    """Move `workflow_id` (recorded as `recorded`, read just before) to `version`: upgrade
    number `recorded.upgrades`, create-if-absent. Raises UnumError when another upgrade took
    that number meanwhile (nothing changed by this one)."""
    ledger = Ledger.bounded(workflow_id, 0, store_retention(store))
    value = encode({"version": version, "from": recorded.version, "at": int(time.time())})
    _, created = ledger.create(store, upgrade_key(workflow_id, recorded.upgrades), value, Kind.MARKER)
    if not created:
        raise UnumError(f"workflow {workflow_id} was upgraded by another process meanwhile; nothing changed "
                        f"(see: inspect {workflow_id})")
    return StartRecord(recorded.kind, recorded.input, recorded.folder, recorded.started, version,
                       recorded.upgrades + 1)


def _record(kind: StartKind, found: dict[str, Any]) -> StartRecord:
    version = found.get("version")
    return StartRecord(kind, found["input"], str(found.get("folder", "")), int(found.get("started", 0)),
                       version if isinstance(version, str) else None)


def _upgraded(store: Store, workflow_id: str, record: StartRecord) -> StartRecord:
    """`record` with the version its last upgrade names (one read per upgrade, and one more)."""
    if record.version is None:
        return record
    version, number = record.version, 0
    while number < MAX_UPGRADES:
        raw = store.get(upgrade_key(workflow_id, number))
        moved = _upgrade_version(raw) if raw is not None else None
        if moved is None:
            break
        version, number = moved, number + 1
    return StartRecord(record.kind, record.input, record.folder, record.started, version, number)


def _upgrade_version(raw: bytes) -> str | None:
    try:
        version = decode(raw).get("version")
    except Exception:  # noqa: BLE001 - not an upgrade record
        return None
    return version if isinstance(version, str) else None


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        found = decode(raw)
    except Exception as exc:
        raise UnumError(f"the start record of this workflow is not readable ({type(exc).__name__}: {exc})") from exc
    if not isinstance(found, dict) or "input" not in found:
        raise UnumError("the start record of this workflow is not a start record (another tool wrote that key?)")
    return found


@dataclass(frozen=True, slots=True)
class Upgrade:
    """Upgrade `number` (1, 2, …) of a workflow: from version `source` to `target`, at `at`
    (epoch seconds; 0 when not recorded)."""

    number: int
    source: str | None
    target: str
    at: int

    def as_json(self) -> dict[str, Any]:
        return {"number": self.number, "from": self.source, "to": self.target, "at": self.at}


def upgrade_history(store: Store, workflow_ids: list[str]) -> dict[str, list[Upgrade]]:
    """Every recorded upgrade of each of `workflow_ids` (upgrade_key:
    upgrade n is a record of its own), oldest first; a workflow never moved maps to []. One
    batch read per upgrade number, of the workflows that have the one before."""
    found: dict[str, list[Upgrade]] = {w: [] for w in workflow_ids}
    number, candidates = 0, list(workflow_ids)
    while candidates and number < MAX_UPGRADES:
        keys = {upgrade_key(w, number): w for w in candidates}
        candidates = []
        for key, raw in store.get_many(list(keys)).items():
            try:
                record = decode(raw)
            except Exception:  # noqa: BLE001 - not an upgrade record
                continue
            if not isinstance(record, dict) or not isinstance(record.get("version"), str):
                continue
            source, at = record.get("from"), record.get("at")
            found[keys[key]].append(Upgrade(number + 1, source if isinstance(source, str) else None,
                                            record["version"], at if isinstance(at, int) else 0))
            candidates.append(keys[key])
        number += 1
    return found
