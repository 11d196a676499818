"""`python -m builder list` (the workflows in a store: status, age, objects, retained until) and
`python -m builder rm` (remove one workflow, or every finished one older than a duration)."""

from __future__ import annotations

import argparse
import json
import sys

from builder.commands.options import add_store_option
from unum_entry.errors import UnumError


def cmd_list(args: argparse.Namespace) -> int:
    from builder.commands.options import open_existing_store
    from builder.ui.listing import human_age, list_workflows, parse_duration, utc

    from builder.runs.start_record import versions_of
    from builder.versions import UnknownVersion, check_id, directory, find

    wanted = check_id(args.version) if args.version is not None else None
    store = open_existing_store(args.store)
    try:
        rows = list_workflows(store, ttl_seconds=parse_duration(args.ttl))
        on = versions_of(store, [r.workflow for r in rows]) if wanted is not None or args.json else {}
        if wanted is not None and wanted not in on.values() and find(directory(store), wanted) is None:
            raise UnknownVersion(f"list --version {wanted}: no such version in {args.store} (see `python -m builder "
                                 "versions`)")
    finally:
        store.close()
    if wanted is not None:
        rows = [r for r in rows if on.get(r.workflow) == wanted]
    if args.older_than is not None:
        least = parse_duration(args.older_than)
        rows = [r for r in rows if r.age_seconds >= least]
    if args.status is not None:
        rows = [r for r in rows if r.status.value == args.status]
    if args.json:
        print(json.dumps([{**r.as_json(), "version": on.get(r.workflow)} for r in rows], indent=2))
        return 0
    table = [("WORKFLOW", "STATUS", "AGE", "OBJECTS", "RETAINED UNTIL")]
    table += [(r.workflow, r.status.value, human_age(r.age_seconds), str(r.objects), utc(r.retained_until)) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    from builder.commands.options import open_existing_store
    from builder.ui.listing import FINISHED, check_removable, list_workflows, parse_duration, remove_workflow

    if bool(args.workflow_ids) == bool(args.finished):
        raise UnumError("rm: name workflow id(s), or pass --finished --older-than DURATION (not both)")
    if args.finished and args.older_than is None:
        raise UnumError("rm --finished needs --older-than DURATION (e.g. 2d)")
    store = open_existing_store(args.store)
    try:
        rows = {r.workflow: r for r in list_workflows(store, ttl_seconds=parse_duration(args.ttl))}
        if args.finished:
            least = parse_duration(args.older_than)
            chosen = [r for r in rows.values() if r.status in FINISHED and r.age_seconds >= least]
        else:
            missing = [w for w in args.workflow_ids if w not in rows]
            if missing:
                raise UnumError(f"rm: no workflow {missing[0]!r} in {args.store} (see `python -m builder list`)")
            chosen = [rows[w] for w in args.workflow_ids]
        for row in chosen:
            check_removable(row, force=args.force)
        for row in chosen:
            if args.dry_run:
                print(f"would remove {row.workflow} ({row.status.value}, {row.objects} objects)")
            else:
                print(f"removed {row.workflow} ({row.status.value}, {remove_workflow(store, row.workflow)} objects)")
    finally:
        store.close()
    if not chosen:
        print("nothing to remove", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    listing = sub.add_parser("list", help="list the workflows in a store: status, age, objects, retained until")
    _store_options(listing)
    listing.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    listing.add_argument("--status", choices=("succeeded", "failed", "stopped", "timed out", "running", "waiting", "interrupted"), help="only workflows with this status")
    listing.add_argument("--older-than", metavar="DURATION", help="only workflows started at least this long ago (90s, 15m, 6h, 2d)")
    listing.add_argument("--version", metavar="VERSION", help="only workflows running this version (see `versions`)")
    listing.set_defaults(func=cmd_list)

    rm = sub.add_parser("rm", help="remove a workflow's objects now (or every finished one older than a duration)")
    rm.add_argument("workflow_ids", nargs="*", metavar="WORKFLOW_ID", help="workflow id(s) to remove")
    _store_options(rm)
    rm.add_argument("--finished", action="store_true", help="remove every succeeded or failed workflow (with --older-than)")
    rm.add_argument("--older-than", metavar="DURATION", help="with --finished: started at least this long ago (e.g. 2d)")
    rm.add_argument("--force", action="store_true",
                    help="also remove running workflows and those younger than the redelivery window (6h15m)")
    rm.add_argument("--dry-run", action="store_true", help="only print what would be removed")
    rm.set_defaults(func=cmd_rm)


def _store_options(parser: argparse.ArgumentParser) -> None:
    add_store_option(parser)
    parser.add_argument("--ttl", default="7d", metavar="DURATION",
                        help="the TTL the workflows ran with (their start = deadline - TTL; default 7d)")
