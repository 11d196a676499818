"""One page of a store's runs for the web UI, newest first, filtered and paginated on the server.

`index_runs` lists the store's runs newest first in two passes whatever its size: one
`Store.workflows` pass and one batch read of the start records `run` wrote (start time, folder:
the workflow's name). `query_runs` filters and pages such a list (the UI server keeps one between
requests: builder.ui.run_index) and reads the result and failure records of the runs it must give
a status (every filtered run when filtering by status, else the page's). A run without an outcome
costs one more scan of its own objects (`listing.status_of`: waiting / interrupted / running). Its duration: from its entry's handler
start (the entry checkpoint's history stamp, unum_entry.history) or the recorded start second,
to its latest result or failure stamp.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from unum_entry.codec import decode
from unum_entry.outcome import ENDED, STOP_FIELD, WorkflowStatus, covers_every_position, failed_status, yields_to_results
from unum_entry.retention import DEFAULT_TTL_SECONDS
from unum_entry.stores.base import Store, WorkflowEntry

from builder.ui.listing import human_age, status_of, utc

PER_PAGE = 50


@dataclass(frozen=True)
class RunFilter:
    """What the list shows: runs whose status is `status`, whose workflow name is `name`, whose
    id contains `search`, started at or after `since` (epoch s); page `page` (from 1)."""

    status: str | None = None
    name: str | None = None
    search: str | None = None
    since: int | None = None
    page: int = 1
    per_page: int = PER_PAGE


@dataclass(frozen=True)
class RunPage:
    rows: list[dict[str, Any]]
    total: int        # runs that pass the filter
    page: int
    pages: int
    names: list[str]  # every workflow name in the store (the name filter's choices)


@dataclass
class _Run:
    entry: WorkflowEntry
    started: float          # epoch s (ms precision when the entry's stamp is known)
    name: str
    entry_key: str | None   # the entry invocation's checkpoint (its stamp has the handler start)
    status: WorkflowStatus | None = None
    ended_ms: int | None = None
    version: str | None = None  # the version it started on (its start record); `_give_versions`: now
    upgrades: list[dict[str, Any]] | None = None  # each upgrade (`_give_versions`)


def index_runs(store: Store, *, ttl_seconds: int = DEFAULT_TTL_SECONDS,
               starts: dict[str, dict[str, Any]] | None = None) -> list[_Run]:
    """Every run of `store` with its start and name, newest first. `starts`: a cache of the start
    records read so far (they never change once written), kept by the caller between calls, so
    a later call reads only new runs' records."""
    runs = _with_starts(store, store.workflows(), ttl_seconds, {} if starts is None else starts)
    runs.sort(key=lambda r: (-r.started, r.entry.workflow))
    return runs


def query_runs(store: Store, flt: RunFilter, *, ttl_seconds: int = DEFAULT_TTL_SECONDS,
               now: float | None = None, starts: dict[str, dict[str, Any]] | None = None,
               runs: Sequence[_Run] | None = None) -> RunPage:
    """One page of runs as `flt` asks. `runs`: an `index_runs` list to page through (it is not
    changed) instead of listing the store again; `starts`: as for `index_runs`."""
    clock = time.time() if now is None else now
    listed = index_runs(store, ttl_seconds=ttl_seconds, starts=starts) if runs is None else runs
    names = sorted({r.name for r in listed if r.name})
    selected = list(listed)  # newest first: the filters keep the order
    if flt.search:
        selected = [r for r in selected if flt.search.strip().lower() in r.entry.workflow.lower()]
    if flt.name:
        selected = [r for r in selected if r.name == flt.name]
    if flt.since is not None:
        selected = [r for r in selected if r.started >= flt.since]
    if flt.status:
        selected = [replace(r) for r in selected]  # given a status below: copies, the list stays as it is
        _give_status(store, selected)
        selected = [r for r in selected if r.status is not None and r.status.value == flt.status]
    pages = max(1, -(-len(selected) // flt.per_page))
    page = min(max(1, flt.page), pages)
    shown = [r if flt.status else replace(r) for r in selected[(page - 1) * flt.per_page: page * flt.per_page]]
    _give_status(store, [r for r in shown if r.status is None])
    _give_entry_start(store, shown)
    _give_versions(store, shown)
    return RunPage(rows=[_row(r, clock) for r in shown], total=len(selected), page=page, pages=pages, names=names)


def _with_starts(store: Store, entries: Sequence[WorkflowEntry], ttl_seconds: int,
                 recorded: dict[str, dict[str, Any]]) -> list[_Run]:
    """Each run with the start and folder `run` recorded (one batch read of those not in
    `recorded` yet, which it adds to), else start = deadline - TTL."""
    from builder.runs.start_record import start_key
    from unum_entry import naming
    from unum_entry.envelope import ROOT

    keys = {start_key(e.workflow): e for e in entries if e.workflow not in recorded}
    for key, raw in (store.get_many(keys).items() if keys else ()):
        try:
            found = decode(raw)
        except Exception:  # noqa: BLE001 - not a start record: the estimate stands
            continue
        if isinstance(found, dict):
            recorded[keys[key].workflow] = found
    runs = []
    for entry in entries:
        record = recorded.get(entry.workflow, {})
        started = record.get("started")
        name, entry_function = _workflow_of(str(record.get("folder") or ""))
        version = record.get("version")
        runs.append(_Run(entry=entry, started=float(started) if isinstance(started, int) and started > 0
                         else float(entry.first_expiry - ttl_seconds), name=name,
                         entry_key=naming.checkpoint_key(entry.workflow, entry_function, ROOT) if entry_function else None,
                         version=version if isinstance(version, str) else None))
    return runs


def workflow_name(start_record: dict[str, Any]) -> str:
    """The workflow name of a decoded start record (the folder `run` recorded)."""
    return _workflow_of(str(start_record.get("folder") or ""))[0]


@lru_cache(maxsize=256)
def _workflow_of(folder: str) -> tuple[str, str | None]:
    """(workflow name, entry function) of the folder (or state machine file) a run recorded."""
    if not folder:
        return "", None
    path = Path(folder)
    if path.is_file():  # a state machine run compiled on the fly: named like its folder
        return path.parent.name, None
    try:
        manifest = json.loads((path / "unum-workflow.json").read_text())
        return str(manifest.get("name") or path.name), str(manifest["entry"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return path.name, None


def _give_status(store: Store, runs: Sequence[_Run]) -> None:
    """Status (and end) of each run from its result and failure records, read in one batch; a
    run without an outcome asks `listing.status_of` (one scan of its objects)."""
    from unum_entry.history import split

    keys = [k for r in runs for k in (*r.entry.results, *([r.entry.failure] if r.entry.failure else []))]
    found = store.get_many(keys) if keys else {}
    for run in runs:
        ends: list[int] = []
        results = []
        for key in run.entry.results:
            raw = found.get(key)
            if raw is None:
                continue
            own, meta = split(raw)
            results.append(decode(own))
            if meta is not None and "c" in meta:
                ends.append(int(meta["c"]))
        complete = covers_every_position(results)
        failure = None
        if run.entry.failure and run.entry.failure in found:
            own, meta = split(found[run.entry.failure])
            failure = decode(own)
            if meta is not None and "c" in meta:
                ends.append(int(meta["c"]))
        if isinstance(failure, dict) and failure.get(STOP_FIELD) is True:
            run.status = WorkflowStatus.STOPPED
        elif isinstance(failure, dict) and not yields_to_results(failure, complete):
            run.status = failed_status(failure)
        elif complete:
            run.status = WorkflowStatus.SUCCEEDED
        else:
            run.status = status_of(store, run.entry)
        if run.status in ENDED and ends:
            run.ended_ms = max(ends)


def _give_entry_start(store: Store, runs: Sequence[_Run]) -> None:
    """The entry's handler start (ms) from its checkpoint's stamp, where the entry is known."""
    from unum_entry.history import split

    keys = [r.entry_key for r in runs if r.entry_key]
    found = store.get_many(keys) if keys else {}
    for run in runs:
        raw = found.get(run.entry_key) if run.entry_key else None
        meta = split(raw)[1] if raw is not None else None
        if meta is not None and isinstance(meta.get("s"), int):
            run.started = meta["s"] / 1000


def _give_versions(store: Store, runs: Sequence[_Run]) -> None:
    """Each run's upgrades and the version it runs now, its last upgrade's (one batch read per
    upgrade number: builder.runs.start_record.upgrade_history)."""
    from builder.runs.start_record import upgrade_history

    moved = upgrade_history(store, [r.entry.workflow for r in runs if r.version is not None])
    for run in runs:
        upgrades = moved.get(run.entry.workflow, [])
        run.upgrades = [_upgrade_json(u.as_json()) for u in upgrades]
        if upgrades:
            run.version = upgrades[-1].target


def _upgrade_json(upgrade: dict[str, Any]) -> dict[str, Any]:
    """An upgrade as the UI's JSON gives it: its time as UTC text (null when not recorded)."""
    return {**upgrade, "at": utc(upgrade["at"]) if upgrade.get("at") else None}


def workflow_versions(store: Store, workflow_id: str) -> dict[str, Any]:
    """What the workflow page shows of a workflow's version: `version` (the one it runs now,
    None when its start record names none) and `upgrades` (upgrade n: from, to, when)."""
    from builder.runs import start_record

    recorded = start_record.read(store, workflow_id)
    if recorded is None or recorded.version is None:
        return {"version": None, "upgrades": []}
    from builder.runs.start_record import upgrade_history

    upgrades = upgrade_history(store, [workflow_id])[workflow_id]
    return {"version": recorded.version, "upgrades": [_upgrade_json(u.as_json()) for u in upgrades]}


def versions_fragment(shown: dict[str, Any]) -> str:
    """The workflow page's version line and its upgrades table ('' when it records no version)."""
    import html

    if not shown.get("version"):
        return ""
    parts = [f"<p id='version'>Version <code>{html.escape(str(shown['version']))}</code>"
             + (f" (upgraded {len(shown['upgrades'])} time(s))" if shown.get("upgrades") else "") + "</p>"]
    if shown.get("upgrades"):
        parts.append("<table id='upgrades'><tr><th>upgrade</th><th>from</th><th>to</th><th>when</th></tr>")
        for u in shown["upgrades"]:
            parts.append(f"<tr><td>{int(u['number'])}</td><td><code>{html.escape(str(u['from'] or '-'))}</code></td>"
                         f"<td><code>{html.escape(str(u['to']))}</code></td><td>{html.escape(str(u['at'] or '-'))}</td></tr>")
        parts.append("</table>")
    return "".join(parts)


def _row(run: _Run, now: float) -> dict[str, Any]:
    duration_ms = None if run.ended_ms is None else max(0, run.ended_ms - int(run.started * 1000))
    return {"workflow": run.entry.workflow, "name": run.name, "status": run.status.value if run.status else "",
            "started": utc(int(run.started)), "age": human_age(max(0, int(now - run.started))),
            "duration_ms": duration_ms, "objects": sum(run.entry.objects.values()),
            "retained_until": utc(run.entry.last_expiry), "version": run.version, "upgrades": run.upgrades or []}
