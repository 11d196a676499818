"""`python -m builder task-success|task-failure|task-heartbeat TOKEN`: the callbacks of a
`.waitForTaskToken` Task.

Resumes the waiting workflow exactly once (unum_entry/asl/callbacks.py): a second callback for the
same token, an unknown token and an expired one are refused with one line (exit 2). Where the
continuation runs:
- `--workflow FOLDER|statemachine.json` (with `--store`): on the embedded local platform, like
  `run`; the command waits until the workflow stops again and prints its result (exit 0), its
  failure (exit 1), or that it is waiting for another callback;
- otherwise through `--invoker URL` (`$UNUM_INVOKER`, e.g. `lambda://?prefix=STACK-`): the deployed
  functions' own invoker; the command prints which function it resumed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from unum_entry.errors import WorkflowFailed

from builder.commands.callback_commands import Completions, deployed_invoker, register_completions
from builder.commands.io import parse_input, to_json


def cmd_callback(args: argparse.Namespace) -> int:
    from unum_entry.asl import callbacks

    from builder.commands.inspect import open_existing_store

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


class _Submit:
    """The local platform as an Invoker."""

    def __init__(self, platform: Any) -> None:
        self.platform = platform

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.platform.submit(function, payload)


def _locally(args: argparse.Namespace, store: Any, outcome: dict[str, Any]) -> int:
    from unum_entry.asl import callbacks
    from unum_entry.local.platform import local_platform
    from unum_entry.outcome import read_outcome
    from unum_entry.workflow import load_workflow

    from builder.commands.compile import runnable_workflow

    workflow = load_workflow(runnable_workflow(args.workflow, args.functions, None))
    resumed: callbacks.Resumed | callbacks.CallbackError
    with local_platform(workflow, store, workers=args.workers) as platform:
        try:
            resumed = callbacks.complete(args.token, outcome, store=store, invoker=_Submit(platform))
        except callbacks.CallbackError as exc:  # a re-sent continuation may still be running: let it end
            resumed = exc
        platform.wait_idle(args.timeout)
    if isinstance(resumed, callbacks.CallbackError):
        raise resumed
    ended = read_outcome(store, resumed.workflow)
    if ended.failure is not None:
        f = ended.failure
        raise WorkflowFailed(f"workflow {ended.workflow_id} failed in function {f['Function']!r} "
                             f"after {f['Attempts']} attempt(s): {f['Error']}: {f['Cause']}")
    if not ended.results:
        tasks = callbacks.waiting(store, resumed.workflow)
        if tasks:
            states = ", ".join(repr(s) for s in sorted({t.state for t in tasks}))
            print(f"workflow {resumed.workflow}: resumed; it is waiting again for {len(tasks)} task-token "
                  f"callback(s) at {states} (python -m builder inspect {resumed.workflow} lists the tokens)",
                  file=sys.stderr)
        else:
            print(f"workflow {resumed.workflow}: resumed; still running (no result yet)", file=sys.stderr)
        return 0
    print(to_json(ended.result, args.compact), flush=True)
    return 0


def cmd_heartbeat(args: argparse.Namespace) -> int:
    """SendTaskHeartbeat: record that the waiting Task is alive (its HeartbeatSeconds start
    again); prints the workflow and the function. Refused with one line (exit 2) when the token
    is unknown, the task was completed or has timed out."""
    from unum_entry.asl import callbacks

    from builder.commands.inspect import open_existing_store

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
