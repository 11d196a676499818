"""`python -m builder callback-success|callback-failure|callback-heartbeat CALLBACK_ID`: complete a
Lambda durable function's callback (`create_callback` / `wait_for_callback`) or tell it that its
worker is alive, like Lambda's SendDurableExecutionCallbackSuccess / Failure / Heartbeat.

The first completion wins (unum_entry/durable_functions/callbacks.py); a second one, an unknown id and one
after the callback timed out are refused with one line (exit 2). Where the waiting execution
resumes, as for `task-success`:
- `--workflow FOLDER` (with `--store`): on the embedded local platform; the command waits until
  the workflow stops again and prints its result (exit 0), its failure (exit 1), or that it waits;
- otherwise through `--invoker URL` (`$UNUM_INVOKER`): the deployed functions' own invoker.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from unum_entry.errors import UnumError, WorkflowFailed

from builder.commands.io import parse_input, to_json
from builder.commands.options import add_store_option, add_wait_options


def cmd_complete(args: argparse.Namespace) -> int:
    from unum_entry.durable_functions import callbacks

    from builder.commands.inspect import open_existing_store

    store = open_existing_store(args.store)
    if args.command == "callback-success":
        outcome: dict[str, Any] = {"result": json.dumps(parse_input(args.result, "--result"))}
    else:
        outcome = {"error": {"ErrorType": args.error or "CallbackFailure", "ErrorMessage": args.cause or ""}}
    if args.workflow is None:
        from unum_entry.invokers import open_invoker

        url = args.invoker or os.environ.get("UNUM_INVOKER")
        if not url:
            raise UnumError(f"{args.command}: give --workflow FOLDER (resume locally) or --invoker URL "
                            "($UNUM_INVOKER: the deployed functions' invoker)")
        done = callbacks.complete(args.callback_id, store=store, invoker=open_invoker(url, store=store), **outcome)
        print(json.dumps({"workflow": done.workflow, "resumed": done.function}))
        return 0
    from unum_entry.local.platform import local_platform
    from unum_entry.outcome import read_outcome
    from unum_entry.workflow import load_workflow

    from builder.commands.callbacks import _Submit

    workflow = load_workflow(args.workflow)
    with local_platform(workflow, store, workers=args.workers) as platform:
        done = callbacks.complete(args.callback_id, store=store, invoker=_Submit(platform), **outcome)
        platform.wait_idle(args.timeout)
    ended = read_outcome(store, done.workflow)
    if ended.failure is not None:
        f = ended.failure
        raise WorkflowFailed(f"workflow {ended.workflow_id} failed in function {f['Function']!r} "
                             f"after {f['Attempts']} attempt(s): {f['Error']}: {f['Cause']}")
    if not ended.results:
        print(f"workflow {done.workflow}: resumed; still waiting (no result yet)", file=sys.stderr)
        return 0
    print(to_json(ended.result, args.compact), flush=True)
    return 0


def cmd_heartbeat(args: argparse.Namespace) -> int:
    """SendDurableExecutionCallbackHeartbeat: the waiting callback is alive (its heartbeat
    timeout starts again). Refused with one line (exit 2) once it completed or timed out."""
    from unum_entry.durable_functions import callbacks

    from builder.commands.inspect import open_existing_store

    done = callbacks.heartbeat(args.callback_id, store=open_existing_store(args.store))
    print(json.dumps({"workflow": done.workflow, "function": done.function, "heartbeat": True}))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("callback-heartbeat", help="tell a durable function's waiting callback that it is alive")
    p.add_argument("callback_id", help="the callback id")
    add_store_option(p)
    p.set_defaults(func=cmd_heartbeat)
    for name, help_text in (("callback-success", "complete a durable function's callback with a result"),
                            ("callback-failure", "fail a durable function's callback with an error")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("callback_id", help="the callback id (create_callback / wait_for_callback's submitter got it)")
        if name == "callback-success":
            p.add_argument("--result", required=True, help="the callback's result: JSON text or @file.json")
        else:
            p.add_argument("--error", default=None, help="error type (default CallbackFailure)")
            p.add_argument("--cause", default=None, help="error message")
        add_store_option(p)
        p.add_argument("--workflow", default=None, help="workflow folder: resume on the embedded local platform")
        p.add_argument("--invoker", default=None, help="invoker URL of deployed functions (default $UNUM_INVOKER)")
        add_wait_options(p, workers=True, timeout_help="seconds to wait locally")
        p.set_defaults(func=cmd_complete)
