"""`python -m builder callback-success|callback-failure|callback-heartbeat CALLBACK_ID`: complete a
Lambda durable function's callback (`create_callback` / `wait_for_callback`) or tell it that its
worker is alive, like Lambda's SendDurableExecutionCallbackSuccess / Failure / Heartbeat.

The first completion wins (unum_entry/durable_functions/callbacks.py); a second one, an unknown id and one
after the callback timed out are refused with one line (exit 2). Where the waiting execution
resumes, as for `task-success`:
- `--workflow FOLDER` (with `--store`): on the embedded local platform, with `run`'s delivery
  queue (builder.commands.callback_commands.complete_locally); the command waits until the
  workflow stops again and prints its result (exit 0), its failure (exit 1), or what it waits
  for now, as `run` does (builder.commands.waiting): each callback with the command that
  completes it, its next timer with the `run --resume` that delivers it (exit 0);
- otherwise through `--invoker URL` (`$UNUM_INVOKER`): the deployed functions' own invoker.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from builder.commands.callback_commands import (Completions, Submit, complete_locally, deployed_invoker,
                                                 register_completions)
from builder.commands.io import parse_input


def cmd_complete(args: argparse.Namespace) -> int:
    from unum_entry.durable_functions import callbacks

    from builder.commands.options import open_existing_store

    store = open_existing_store(args.store)
    if args.command == "callback-success":
        outcome: dict[str, Any] = {"result": json.dumps(parse_input(args.result, "--result"))}
    else:
        outcome = {"error": {"ErrorType": args.error or "CallbackFailure", "ErrorMessage": args.cause or ""}}
    if args.workflow is None:
        invoker = deployed_invoker(args, store, local_hint="--workflow FOLDER (resume locally)")
        done = callbacks.complete(args.callback_id, store=store, invoker=invoker, **outcome)
        print(json.dumps({"workflow": done.workflow, "resumed": done.function}))
        return 0
    def complete(invoker: Submit) -> str:
        return callbacks.complete(args.callback_id, store=store, invoker=invoker, **outcome).workflow

    return complete_locally(args, store, args.workflow, complete, refusal=callbacks.DurableCallbackError)


def cmd_heartbeat(args: argparse.Namespace) -> int:
    """SendDurableExecutionCallbackHeartbeat: the waiting callback is alive (its heartbeat
    timeout starts again). Refused with one line (exit 2) once it completed or timed out."""
    from unum_entry.durable_functions import callbacks

    from builder.commands.options import open_existing_store

    done = callbacks.heartbeat(args.callback_id, store=open_existing_store(args.store))
    print(json.dumps({"workflow": done.workflow, "function": done.function, "heartbeat": True}))
    return 0


DURABLE_COMPLETIONS = Completions(
    prefix="callback", id_dest="callback_id", id_help="the callback id",
    id_help_complete="the callback id (create_callback / wait_for_callback's submitter got it)",
    helps=("tell a durable function's waiting callback that it is alive",
           "complete a durable function's callback with a result",
           "fail a durable function's callback with an error"),
    success_option="--result", success_help="the callback's result: JSON text or @file.json",
    error_help="error type (default CallbackFailure)", cause_help="error message",
    workflow_help="workflow folder: resume on the embedded local platform", functions=False)


def register(sub: argparse._SubParsersAction) -> None:
    register_completions(sub, DURABLE_COMPLETIONS, complete=cmd_complete, heartbeat=cmd_heartbeat)
