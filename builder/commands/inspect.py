"""`python -m builder inspect` (one workflow's status, results, failure, retention) and
`python -m builder gc` (delete expired objects)."""

from __future__ import annotations

import argparse
import sys

from builder.commands.io import to_json, utc
from builder.commands.run import DEFAULT_STORE


def cmd_inspect(args: argparse.Namespace) -> int:
    from unum_entry.outcome import read_outcome
    from unum_entry.stores import open_store

    outcome = read_outcome(open_store(args.store), args.workflow_id)
    until = outcome.retained_until
    report = {"workflow": outcome.workflow_id, "status": outcome.status, "results": outcome.results,
              "failure": outcome.failure, "retained_objects": outcome.pending,
              "retained_until": None if until is None else utc(until)}
    print(to_json(report, compact=False))
    return 1 if outcome.status == "failed" else 0


def cmd_gc(args: argparse.Namespace) -> int:
    """Delete every expired object (the file store's stand-in for DynamoDB's and Firestore's
    own TTL deletion; on those it deletes what their sweeper has not reached yet)."""
    from unum_entry.stores import open_store

    store = open_store(args.store)
    try:
        swept = store.sweep()
    finally:
        store.close()
    print(f"swept {swept} expired object(s) from {args.store}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    inspect = sub.add_parser("inspect", help="show a workflow's status, results, failure and what the store retains until when")
    inspect.add_argument("workflow_id", help="the workflow id (printed by run)")
    inspect.add_argument("--store", default=DEFAULT_STORE, help=f"store URL or folder (default: {DEFAULT_STORE})")
    inspect.set_defaults(func=cmd_inspect)

    gc = sub.add_parser("gc", help="delete expired objects (checkpoints, sets, results past their TTL) from a store")
    gc.add_argument("--store", default=DEFAULT_STORE, help=f"store URL or folder (default: {DEFAULT_STORE})")
    gc.set_defaults(func=cmd_gc)
