"""`python -m builder stop WF [--error E] [--cause C]`: end a running workflow as `stopped`
(Step Functions' ABORTED).

The stop is decided by the store (unum_entry.outcome.stop_workflow: a create-if-absent claim of
the workflow's root result record, which every result write yields to, then its failure record
marked stopped): the first ending wins, so a workflow that has already ended is not changed
(exit 2, saying how it ended) whatever instant its last result lands at, and two stops at once
stop it once. The web console's Stop goes through `stop` here too. What in-flight invocations
do afterwards is documented in docs/history.md ("Stop").
"""

from __future__ import annotations

import argparse

from builder.commands.console import Console
from builder.commands.options import add_store_option
from builder.runs.stop import stop


def cmd_stop(args: argparse.Namespace) -> int:
    from builder.commands.options import open_existing_store

    store = open_existing_store(args.store)
    try:
        stop(store, args.workflow_id, error=args.error, cause=args.cause, where=f"store {args.store}")
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
