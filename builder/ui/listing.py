"""The workflows a store holds, with status and age, and removing them.

A workflow's start is what `run` recorded (builder.runs.start_record); for workflows started
otherwise (a deployed entry function) it is derived from its *deadline* (start + TTL, the expiry
of its earliest objects: unum_entry.retention): `started = first expiry - TTL`, exact for the
TTL the workflow ran with (`--ttl`, default the runtime's 7 days). Status is `read_outcome`'s rule:
failed when a failure record exists, succeeded when its results cover every fan-out position,
else running (also a run that stopped half-way: its objects stay until they expire).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from unum_entry.codec import decode
from unum_entry.errors import UnumError
from unum_entry.outcome import ENDED, STOP_FIELD, WorkflowStatus, covers_every_position, failed_status, yields_to_results
from unum_entry.retention import DEFAULT_REDELIVERY_SECONDS, DEFAULT_TTL_SECONDS
from unum_entry.outcome import Ending, is_claim
from unum_entry.stores.base import Kind, Store, WorkflowEntry

FINISHED = ENDED
_DURATION = re.compile(r"^(\d+)([smhdw]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class WorkflowRow:
    """One line of `python -m builder list`."""

    workflow: str
    status: WorkflowStatus
    started: int          # epoch seconds (first expiry - TTL)
    age_seconds: int
    objects: int          # live objects of any kind
    retained_until: int   # when its last object expires

    def as_json(self) -> dict[str, Any]:
        return {"workflow": self.workflow, "status": self.status.value, "started": utc(self.started),
                "age_seconds": self.age_seconds, "objects": self.objects, "retained_until": utc(self.retained_until)}


def list_workflows(store: Store, *, ttl_seconds: int = DEFAULT_TTL_SECONDS, now: float | None = None) -> list[WorkflowRow]:
    """Every workflow with live objects, newest first."""
    clock = time.time() if now is None else now
    entries = store.workflows()
    recorded = _recorded_starts(store, [e.workflow for e in entries])
    rows = [_row(store, entry, recorded.get(entry.workflow, entry.first_expiry - ttl_seconds), clock)
            for entry in entries]
    return sorted(rows, key=lambda r: (-r.started, r.workflow))


def _recorded_starts(store: Store, workflows: list[str]) -> dict[str, int]:
    """Start times that `run` recorded (builder.runs.start_record), one batch read."""
    from builder.runs.start_record import start_key

    keys = {start_key(w): w for w in workflows}
    found: dict[str, int] = {}
    for key, raw in store.get_many(keys).items():
        try:
            started = decode(raw).get("started")
        except Exception:  # noqa: BLE001 - not a start record: fall back to the estimate
            continue
        if isinstance(started, int) and started > 0:
            found[keys[key]] = started
    return found


def _row(store: Store, entry: WorkflowEntry, started: int, now: float) -> WorkflowRow:
    return WorkflowRow(workflow=entry.workflow, status=status_of(store, entry), started=started,
                       age_seconds=max(0, int(now) - started), objects=sum(entry.objects.values()),
                       retained_until=entry.last_expiry)


def status_of(store: Store, entry: WorkflowEntry) -> WorkflowStatus:
    """The status `read_outcome` would report, reading only the result records."""
    complete = False
    if entry.results:
        results = [decode(value) for value in store.get_many(entry.results).values()]
        complete = covers_every_position(results)
    if entry.failure is not None:
        raw = store.get(entry.failure)  # the watchdog's failure yields to results; a stop's is marked
        failure = decode(raw) if raw is not None else None
        if isinstance(failure, dict) and failure.get(STOP_FIELD) is True:
            return WorkflowStatus.STOPPED
        if isinstance(failure, dict) and not yields_to_results(failure, complete):
            return failed_status(failure)
    if complete:
        return WorkflowStatus.SUCCEEDED
    if entry.failure is None and entry.objects.get(Kind.MARKER):  # a stop / timeout that died half-way?
        raw = store.get(Ending.of(entry.workflow).result)
        claim = decode(raw) if raw is not None else None
        if isinstance(claim, dict) and is_claim(claim):
            return failed_status(claim)
    return _running_or_waiting(store, entry.workflow)


def _running_or_waiting(store: Store, workflow: str) -> WorkflowStatus:
    """WAITING when a Task of the unfinished `workflow` waits for a task-token callback (one
    scan of its objects, as `inspect` does), else RUNNING - or what the embedded engine's
    delivery queue says of it (`unfinished_status`)."""
    from unum_entry.asl.callbacks import waiting

    if waiting(store, workflow):
        return WorkflowStatus.WAITING
    return unfinished_status(store, workflow)


def unfinished_status(store: Store, workflow: str) -> WorkflowStatus:
    """A workflow without an outcome, as the embedded engine's delivery queue sees it
    (unum_entry.local.runs): INTERRUPTED when work is pending (or its `run` was killed) and no
    live `run` drives it, WAITING when only timers are pending, else RUNNING (also for stores
    that keep no queue: nothing tells whether a process still drives it)."""
    from unum_entry.local.runs import run_state

    state = run_state(store, workflow)
    if state is None:
        return WorkflowStatus.RUNNING
    if state.interrupted:
        return WorkflowStatus.INTERRUPTED
    return WorkflowStatus.WAITING if state.timer_only else WorkflowStatus.RUNNING


def remove_workflow(store: Store, workflow: str) -> int:
    """Delete every object of `workflow` now (before its TTL); returns how many."""
    from unum_entry.local.runs import forget_workflows

    keys = [record.key for record in store.records(workflow)]
    store.delete(keys)
    forget_workflows(store, [workflow])  # its queued deliveries and timers would run it again
    return len(keys)


def check_removable(row: WorkflowRow, *, force: bool) -> None:
    """Raise unless `row` may be removed: a running workflow, or one younger than the platform's
    redelivery window (a late duplicate would find no checkpoint and run again), only with force."""
    if force:
        return
    if row.status not in FINISHED:
        raise UnumError(f"workflow {row.workflow} is {row.status.value}: removing it now would break it "
                        "(pass --force to remove it anyway)")
    if row.age_seconds < DEFAULT_REDELIVERY_SECONDS:
        raise UnumError(f"workflow {row.workflow} started {human_age(row.age_seconds)} ago, within the "
                        f"{human_age(DEFAULT_REDELIVERY_SECONDS)} redelivery window: a late duplicate would find "
                        "no checkpoint and run again (pass --force, or wait; `gc` removes it at its TTL)")


def parse_duration(text: str) -> int:
    """'90', '90s', '15m', '6h', '2d', '1w' -> seconds. Raises UnumError."""
    match = _DURATION.match(text.strip().lower())
    if match is None:
        raise UnumError(f"{text!r} is not a duration (expected a number with s, m, h, d or w: 90s, 15m, 6h, 2d)")
    return int(match.group(1)) * _UNIT[match.group(2)]


def human_age(seconds: int) -> str:
    """A short age: 42s, 5m, 3h12m, 2d4h."""
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600}h"


def utc(epoch: int) -> str:
    from datetime import UTC, datetime
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
