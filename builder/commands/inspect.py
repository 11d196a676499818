"""`python -m builder inspect` (one workflow's status, results, failure, retention) and
`python -m builder gc` (delete expired objects).

Both read an existing store only: a store folder that does not exist (or is not a unum store)
is an error, never created. `inspect` of an id the store knows nothing of is an error (exit 2);
of a failed workflow it prints the report and exits 1. The report is built by `report()`;
options that add to it (e.g. a graph) register with `register` and extend the dict.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unum_entry.errors import StoreError, UnumError

from builder.commands.console import Console
from builder.commands.io import command_line, to_json, utc
from builder.commands.options import DEFAULT_STORE, add_store_option

if TYPE_CHECKING:
    from collections.abc import Sequence

    from unum_entry.callbacks import Waiting
    from unum_entry.outcome import RunResult
    from unum_entry.stores.base import Store


class UnknownWorkflow(UnumError):
    """`inspect` of a workflow id the store retains nothing for."""


def open_existing_store(url: str) -> Store:
    """`open_store(url)`, refusing a file store folder that is missing or not a unum store (the
    file store would create it)."""
    from unum_entry.stores import open_store

    if "://" not in url or url.startswith("file://"):
        folder = Path(url.removeprefix("file://"))
        if not folder.is_dir():
            raise StoreError(f"--store {url}: no such folder (run writes its store there; default {DEFAULT_STORE})")
        if not (folder / "objects").is_dir():
            raise StoreError(f"--store {url}: not a unum store (no objects/ folder in it)")
    return open_store(url)


def report(outcome: RunResult, store_url: str, folder: str | None = None,
           waiting: Sequence[Waiting] = ()) -> dict[str, Any]:
    """What `inspect` prints: status, results, failure record (with the user's `Trace` when
    their code raised), retained objects and until when, and for a running workflow how to
    resume it (the store cannot tell whether a process still runs it; `folder`: the workflow
    folder its run recorded). A running workflow with `waiting` Tasks (unum_entry.callbacks.
    waiting) is "waiting": each Task's state, function and token, and how to complete it."""
    from unum_entry.outcome import WorkflowStatus

    until = outcome.retained_until
    status = outcome.status
    if status is WorkflowStatus.RUNNING and waiting:
        status = WorkflowStatus.WAITING
    shown: dict[str, Any] = {"workflow": outcome.workflow_id, "status": str(status),
                             "results": outcome.results, "failure": outcome.failure,
                             "retained_objects": outcome.pending,
                             "retained_until": None if until is None else utc(until)}
    if status is WorkflowStatus.WAITING:
        shown["waiting"] = [{"state": w.state, "function": w.function, "token": w.token} for w in waiting]
        shown["complete"] = callback_hint(store_url, folder)
    elif status is WorkflowStatus.RUNNING:
        store = [] if store_url == DEFAULT_STORE else ["--store", store_url]
        shown["resume"] = command_line("run", folder or "WORKFLOW_FOLDER", "--workflow-id", outcome.workflow_id,
                                       "--resume", *store)
    return shown


def callback_hint(store_url: str, folder: str | None) -> str:
    """How to complete a waiting Task: `task-success TOKEN --output JSON …` (or task-failure)."""
    store = [] if store_url == DEFAULT_STORE else ["--store", store_url]
    where = ["--workflow", folder] if folder else ["--workflow", "STATEMACHINE"]
    success = command_line("task-success", "TOKEN", "--output", "JSON", *store, *where)
    return f"{success}   (or: task-failure TOKEN --error E --cause C)"


def cmd_inspect(args: argparse.Namespace) -> int:
    from unum_entry.callbacks import waiting
    from unum_entry.outcome import WorkflowStatus, read_outcome

    from builder.commands import start_record

    store = open_existing_store(args.store)
    try:
        outcome = read_outcome(store, args.workflow_id)
        tasks = waiting(store, args.workflow_id) if outcome.status is WorkflowStatus.RUNNING else []
        if outcome.status is WorkflowStatus.UNKNOWN:
            raise UnknownWorkflow(f"no workflow {args.workflow_id!r} in store {args.store} (mistyped, another "
                                  f"--store, or expired and collected)")
        start = start_record.read(store, args.workflow_id) if outcome.status is WorkflowStatus.RUNNING else None
        if args.graph is not None:  # builder/commands/graph.py draws it instead of the report
            from builder.commands.graph import write_inspect_graph
            recorded = start_record.read(store, args.workflow_id)
            write_inspect_graph(args, store, recorded.folder if recorded else None)
            return 0
    finally:
        store.close()
    print(to_json(report(outcome, args.store, start.folder if start else None, tasks), compact=False))
    return 1 if outcome.status is WorkflowStatus.FAILED else 0


def cmd_gc(args: argparse.Namespace) -> int:
    """Delete every expired object (the file store's stand-in for DynamoDB's and Firestore's
    own TTL deletion; on those it deletes what their sweeper has not reached yet)."""
    store = open_existing_store(args.store)
    try:
        swept = store.sweep()
    finally:
        store.close()
    Console().message(f"swept {swept} expired object(s) from {args.store}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    inspect = sub.add_parser("inspect", help="show a workflow's status, results, failure and what the store retains until when")
    inspect.add_argument("workflow_id", help="the workflow id (printed by run)")
    add_store_option(inspect)
    from builder.commands.graph import add_inspect_options
    add_inspect_options(inspect)
    inspect.set_defaults(func=cmd_inspect)

    gc = sub.add_parser("gc", help="delete expired objects (checkpoints, sets, results past their TTL) from a store")
    add_store_option(gc)
    gc.set_defaults(func=cmd_gc)
