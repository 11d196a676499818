"""`python -m builder stop WF [--error E] [--cause C]`: end a running workflow as `stopped`
(Step Functions' ABORTED).

The stop is one create-if-absent of the workflow's failure record, marked stopped
(unum_entry.outcome.stop_workflow): the first ending wins, so a workflow that has already
ended is not changed (exit 2, saying how it ended), and two stops at once stop it once. What
in-flight invocations do afterwards is documented in docs/history.md ("Stop").
"""

from __future__ import annotations

import argparse

from unum_entry.errors import UnumError

from builder.commands.console import Console
from builder.commands.options import add_store_option


def cmd_stop(args: argparse.Namespace) -> int:
    from unum_entry.outcome import WorkflowStatus, read_outcome, stop_workflow

    from builder.commands.inspect import UnknownWorkflow, open_existing_store

    store = open_existing_store(args.store)
    try:
        outcome = read_outcome(store, args.workflow_id)
        if outcome.status is WorkflowStatus.UNKNOWN:
            raise UnknownWorkflow(f"no workflow {args.workflow_id!r} in store {args.store} (mistyped, another "
                                  f"--store, or expired and collected)")
        # STOPPED here may be a stop that died between its two writes: stop_workflow completes it
        if outcome.status not in (WorkflowStatus.RUNNING, WorkflowStatus.STOPPED) or not stop_workflow(
                store, args.workflow_id, error=args.error, cause=args.cause):
            ended = read_outcome(store, args.workflow_id).status
            raise UnumError(f"workflow {args.workflow_id} has already ended ({ended}): nothing to stop")
    finally:
        store.close()
    Console().message(f"stopped workflow {args.workflow_id}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    stop = sub.add_parser("stop", help="stop a running workflow: it ends 'stopped' and records no result afterwards")
    stop.add_argument("workflow_id", help="the workflow id (printed by run)")
    stop.add_argument("--error", help="the error recorded for the stop (default Unum.Stopped)")
    stop.add_argument("--cause", help="the cause recorded for the stop (default 'stopped by request')")
    add_store_option(stop)
    stop.set_defaults(func=cmd_stop)
