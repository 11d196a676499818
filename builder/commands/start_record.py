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
"""

from __future__ import annotations

import enum
import json
import time
from dataclasses import dataclass
from typing import Any

from unum_entry import naming
from unum_entry.codec import decode, encode
from unum_entry.errors import UnumError
from unum_entry.retention import Ledger, store_retention
from unum_entry.stores.base import Kind, Store


class InputMismatch(UnumError):
    """A reused workflow id with an input other than the one it was started with."""


class NothingToResume(UnumError):
    """`--resume` of a workflow id the store has no record of."""


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


def start_key(workflow_id: str) -> str:
    """The record's key (unum_entry.naming.start_key)."""
    return naming.start_key(workflow_id)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def claim(store: Store, workflow_id: str, input_value: Any, *, folder: str, resume: bool) -> StartRecord:
    """Record the start of `workflow_id` unless recorded; say how the id was found (see the
    module docstring). Raises InputMismatch, NothingToResume, or StoreError from the store."""
    if resume:
        recorded = read(store, workflow_id)
        if recorded is None:
            raise NothingToResume(f"--resume: no workflow {workflow_id!r} in this store (nothing was started "
                                  f"with that id, or it expired); drop --resume to start it")
        same = _canonical(recorded.input) == _canonical(input_value)
        return StartRecord(StartKind.SAME if same else StartKind.RESUMED, recorded.input, recorded.folder,
                           recorded.started)
    now = int(time.time())
    ledger = Ledger.bounded(workflow_id, 0, store_retention(store))
    stored, created = ledger.create(store, ledger.start(),
                                    encode({"input": input_value, "folder": folder, "started": now}, what="--input"),
                                    Kind.MARKER)
    if created:
        return StartRecord(StartKind.NEW, input_value, folder, now)
    found = _parse(stored)
    if _canonical(found["input"]) != _canonical(input_value):
        raise InputMismatch(f"workflow {workflow_id!r} was started with a different input; pass --resume to "
                            f"continue it with its recorded input, or choose another --workflow-id")
    return StartRecord(StartKind.SAME, found["input"], str(found.get("folder", "")), int(found.get("started", 0)))


def read(store: Store, workflow_id: str) -> StartRecord | None:
    """The recorded start of `workflow_id` (kind SAME), or None."""
    raw = store.get(start_key(workflow_id))
    if raw is None:
        return None
    found = _parse(raw)
    return StartRecord(StartKind.SAME, found["input"], str(found.get("folder", "")), int(found.get("started", 0)))


def _parse(raw: bytes) -> dict[str, Any]:
    try:
        found = decode(raw)
    except Exception as exc:
        raise UnumError(f"the start record of this workflow is not readable ({type(exc).__name__}: {exc})") from exc
    if not isinstance(found, dict) or "input" not in found:
        raise UnumError("the start record of this workflow is not a start record (another tool wrote that key?)")
    return found
