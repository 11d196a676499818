"""`python -m builder task-success|task-failure|task-heartbeat TOKEN`: the callbacks of a
`.waitForTaskToken` Task.

Resumes the waiting workflow exactly once (unum_entry/asl/callbacks.py): a second callback for the
same token, an unknown token and an expired one are refused with one line (exit 2). Where the
continuation runs:
- `--workflow FOLDER|statemachine.json` (with `--store`): on the embedded local platform, with
  `run`'s delivery queue (builder.commands.callback_commands.complete_locally); the command waits
  until the workflow stops again and prints its result (exit 0), its failure (exit 1), or what it
  waits for now, as `run` does: each task token with the command that completes it, its next
  timer (a Wait, a Retry back-off, a timeout) with the `run --resume` that delivers it (exit 0);
- otherwise through `--invoker URL` (`$UNUM_INVOKER`, e.g. `lambda://?prefix=STACK-`): the deployed
  functions' own invoker; the command prints which function it resumed.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from builder.commands.callback_commands import (Completions, Submit, complete_locally, deployed_invoker,
                                                 register_completions)
from builder.commands.io import parse_input


def cmd_callback(args: argparse.Namespace) -> int:
    from unum_entry.asl import callbacks

    from builder.commands.options import open_existing_store

    store = open_existing_store(args.store)  # a mistyped folder is an error, not an empty store
    if args.command == "task-success":
        outcome: dict[str, Any] = {"output": parse_input(args.output, "--output")}
    else:
        outcome = {"error": args.error, "cause": args.cause}  # AWS: null when not given
    if args.workflow is None:
        invoker = deployed_invoker(args, store, local_hint="--workflow (run the continuation locally)")
        resumed = callbacks.complete(args.token, outcome, store=store, invoker=invoker)
        print(json.dumps({"workflow": resumed.workflow, "resumed": resumed.function}))
        return 0
    return _locally(args, store, outcome)


def _locally(args: argparse.Namespace, store: Any, outcome: dict[str, Any]) -> int:
    from unum_entry.asl import callbacks

    from builder.runs.folders import runnable_workflow

    def complete(invoker: Submit) -> str:
        return callbacks.complete(args.token, outcome, store=store, invoker=invoker).workflow

    return complete_locally(args, store, runnable_workflow(args.workflow, args.functions, None), complete,
                            refusal=callbacks.CallbackError)


def cmd_heartbeat(args: argparse.Namespace) -> int:
    """SendTaskHeartbeat: record that the waiting Task is alive (its HeartbeatSeconds start
    again); prints the workflow and the function. Refused with one line (exit 2) when the token
    is unknown, the task was completed or has timed out."""
    from unum_entry.asl import callbacks

    from builder.commands.options import open_existing_store

    store = open_existing_store(args.store)
    beat = callbacks.task_heartbeat(args.token, store=store)
    print(json.dumps({"workflow": beat.workflow, "function": beat.function, "heartbeat": beat.at}))
    return 0


TASK_COMPLETIONS = Completions(
    prefix="task", id_dest="token", id_help="the task token ($$.Task.Token the Task sent)",
    id_help_complete="the task token ($$.Task.Token the Task sent)",
    helps=("tell a waiting .waitForTaskToken Task it is alive (SendTaskHeartbeat)",
           "complete a .waitForTaskToken Task with an output (SendTaskSuccess)",
           "fail a .waitForTaskToken Task with an error (SendTaskFailure)"),
    success_option="--output", success_help="the Task's result: JSON text or @file.json",
    error_help="error name (default: none, null as on AWS)", cause_help="cause text",
    workflow_help="workflow folder or state machine: run the continuation on the embedded local platform",
    functions=True)


def register(sub: argparse._SubParsersAction) -> None:
    register_completions(sub, TASK_COMPLETIONS, complete=cmd_callback, heartbeat=cmd_heartbeat)
