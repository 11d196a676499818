"""`python -m builder inspect` (one workflow's status, results, failure, retention) and
`python -m builder gc` (delete expired objects).

Both read an existing store only: a store folder that does not exist (or is not a unum store)
is an error, never created. `inspect` of an id the store knows nothing of is an error (exit 2);
of a failed workflow it prints the report and exits 1. The report is built by `report()`;
options that add to it (e.g. a graph) register with `register` and extend the dict.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from unum_entry.errors import StoreError, UnumError
from unum_entry.retention import GC_SKEW_SECONDS

from builder.commands.console import Console
from builder.commands.io import command_line, to_json, utc
from builder.commands.options import add_store_option, non_negative_seconds, open_existing_store
from builder.program import DEFAULT_STORE, callback_hint
from builder.runs.start_record import UnknownWorkflow

if TYPE_CHECKING:
    from collections.abc import Sequence

    from unum_entry.outcome import WorkflowStatus

    from unum_entry.asl.callbacks import Waiting
    from unum_entry.local.runs import RunState
    from unum_entry.outcome import RunResult
    from unum_entry.stores.base import Store


def report(outcome: RunResult, store_url: str, folder: str | None = None,
           waiting: Sequence[Waiting] = (), queued: RunState | None = None) -> dict[str, Any]:
    """What `inspect` prints: status, results, failure record (with the user's `Trace` when
    their code raised), retained objects and until when, and for a running workflow how to
    resume it (the store cannot tell whether a process still runs it; `folder`: the workflow
    folder its run recorded). A running workflow with `waiting` Tasks (unum_entry.asl.callbacks.
    waiting) is "waiting": each Task's state, function and token, and how to complete it. With
    `queued` (the embedded engine's delivery queue, unum_entry.local.runs) a running workflow
    that no live `run` drives is "interrupted" (pending deliveries, or its run was killed) or
    "waiting" for its next timer (only timers pending)."""
    from unum_entry.outcome import WorkflowStatus

    until = outcome.retained_until
    status = outcome.status
    if status is WorkflowStatus.RUNNING and waiting:
        status = WorkflowStatus.WAITING
    elif status is WorkflowStatus.RUNNING and queued is not None and queued.interrupted:
        status = WorkflowStatus.INTERRUPTED
    elif status is WorkflowStatus.RUNNING and queued is not None and queued.timer_only:
        status = WorkflowStatus.WAITING  # for its next timer: `run --resume` delivers it when due
    shown: dict[str, Any] = {"workflow": outcome.workflow_id, "status": str(status),
                             "results": outcome.results, "failure": outcome.failure,
                             "retained_objects": outcome.pending,
                             "retained_until": None if until is None else utc(until)}
    if status is WorkflowStatus.WAITING and waiting:
        shown["waiting"] = [{"state": w.state, "function": w.function, "token": w.token} for w in waiting]
        shown["complete"] = callback_hint(store_url, folder)
    elif status in (WorkflowStatus.RUNNING, WorkflowStatus.INTERRUPTED, WorkflowStatus.WAITING):
        store = [] if store_url == DEFAULT_STORE else ["--store", store_url]
        if queued is not None:
            shown["pending_deliveries"] = queued.deliveries
            if queued.next_timer is not None:
                shown["next_timer"] = utc(int(queued.next_timer))
            if queued.driven and queued.owner is not None:
                shown["driven_by"] = f"process {queued.owner.pid} since {utc(int(queued.owner.since))}"
        shown["resume"] = command_line("run", folder or "WORKFLOW_FOLDER", "--workflow-id", outcome.workflow_id,
                                       "--resume", *store)
    return shown


def cmd_inspect(args: argparse.Namespace) -> int:
    from unum_entry.asl.callbacks import waiting
    from unum_entry.local.runs import run_state
    from unum_entry.outcome import WorkflowStatus, read_outcome

    from builder.runs import start_record
    from builder.versions import directory

    store = open_existing_store(args.store)
    try:
        outcome = read_outcome(store, args.workflow_id)
        tasks = waiting(store, args.workflow_id) if outcome.status is WorkflowStatus.RUNNING else []
        queued = run_state(store, args.workflow_id) if outcome.status is WorkflowStatus.RUNNING and not tasks else None
        if outcome.status is WorkflowStatus.UNKNOWN:
            raise UnknownWorkflow(f"no workflow {args.workflow_id!r} in store {args.store} (mistyped, another "
                                  f"--store, or expired and collected)")
        start = start_record.read(store, args.workflow_id)  # its folder (a running one's resume hint), its version
        versions_dir = directory(store)
        if args.value is not None:  # builder/commands/inspect_history.py: one value shown by reference
            from builder.commands.inspect_history import print_value
            print_value(store, args.workflow_id, args.value)
            return 0
        if args.history:
            from builder.commands.inspect_history import print_history
            recorded = start_record.read(store, args.workflow_id)
            from builder.ui.listing import _running_or_waiting
            status = (_running_or_waiting(store, args.workflow_id) if outcome.status is WorkflowStatus.RUNNING
                      else outcome.status)  # the words `list` uses: waiting, interrupted, running
            print_history(store, args.workflow_id, str(status), outcome.failure,
                          recorded.folder if recorded else None, as_json=args.json)
            return exit_code(outcome.status)
        if args.json:
            raise UnumError("inspect --json goes with --history (the report is JSON already)")
        if args.graph is not None:  # builder/commands/graph.py draws it instead of the report
            from builder.commands.graph import write_inspect_graph
            recorded = start_record.read(store, args.workflow_id)
            write_inspect_graph(args, store, recorded.folder if recorded else None)
            return 0
    finally:
        store.close()
    running = outcome.status is WorkflowStatus.RUNNING
    shown = report(outcome, args.store, start.folder if start and running else None, tasks, queued)
    if start is not None and start.version is not None:  # builder.versions: the code it runs
        from builder.commands.versions import shown_trace

        if isinstance(shown.get("failure"), dict) and "Trace" in shown["failure"]:
            shown["failure"] = {**shown["failure"], "Trace": shown_trace(versions_dir, start, shown["failure"]["Trace"])}
        shown["version"] = start.version
        if start.upgrades:
            shown["upgrades"] = start.upgrades
    print(to_json(shown, compact=False))
    return exit_code(outcome.status)


def exit_code(status: WorkflowStatus) -> int:
    """1 for a workflow that failed, timed out or was stopped (README's exit code table), else 0."""
    from unum_entry.outcome import WorkflowStatus

    return 1 if status in (WorkflowStatus.FAILED, WorkflowStatus.STOPPED, WorkflowStatus.TIMED_OUT) else 0


def cmd_gc(args: argparse.Namespace) -> int:
    """Delete every object that expired at least `--clock-skew` seconds ago by this host's
    clock (the file store's stand-in for DynamoDB's and Firestore's own TTL deletion; on those
    it deletes what their sweeper has not reached yet). The margin keeps a host whose clock
    runs fast from sweeping what a running workflow may still use (unum_entry.retention). Then
    remove the local copies of versions no retained workflow uses (builder.commands.versions.collect:
    after the sweep, so a version is kept exactly while a workflow started on it is retained)."""
    from unum_entry.local.runs import collect
    from unum_entry.retention import store_retention, sweep_horizon

    from builder.commands import versions

    store = open_existing_store(args.store)
    try:
        horizon = sweep_horizon(store_retention(store).clock(), int(args.clock_skew))
        swept = store.sweep(horizon)
        queued = collect(store, horizon)  # the queue rows of workflows whose records are all gone
        removed, kept = versions.collect(store)
    finally:
        store.close()
    console = Console()
    console.message(f"swept {swept} expired object(s) from {args.store} "
                    f"(expired {int(args.clock_skew)} s or more ago)"
                    + (f" and {queued} queued delivery/driver row(s) of workflows with no record left" if queued else ""))
    if removed or kept:
        console.message(f"removed {removed} version(s) no retained workflow uses; kept {kept} in use")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    inspect = sub.add_parser("inspect", help="show a workflow's status, results, failure and what the store retains until when")
    inspect.add_argument("workflow_id", help="the workflow id (printed by run)")
    add_store_option(inspect)
    from builder.commands.graph import add_inspect_options
    add_inspect_options(inspect)
    from builder.commands.inspect_history import add_history_options
    add_history_options(inspect)
    inspect.set_defaults(func=cmd_inspect)

    gc = sub.add_parser("gc", help="delete expired objects (checkpoints, sets, results past their TTL) from a store")
    add_store_option(gc)
    gc.add_argument("--clock-skew", type=non_negative_seconds, default=GC_SKEW_SECONDS, metavar="SECONDS",
                    help="sweep only what expired this long ago by this host's clock, so a fast clock cannot "
                         f"sweep what a running workflow still uses (default {GC_SKEW_SECONDS})")
    gc.set_defaults(func=cmd_gc)
