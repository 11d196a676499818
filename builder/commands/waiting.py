"""What a workflow without an outcome waits for, said on stderr with the command that ends each
wait: task-token callbacks (`.waitForTaskToken`), a durable function's callbacks
(`create_callback` / `wait_for_callback`), and its next timer (a Wait, a callback's timeout).

Shared by the commands that drive a workflow on the embedded engine until it stops: `run` and
the local form of `callback-success|callback-failure` and `task-success|task-failure`
(`--workflow`: builder.commands.callback_commands.complete_locally). `args` is the
command's namespace: `args.store` (the store as given) and `args.workflow` (the folder as given)
go into the printed commands, so they can be pasted as they are.
"""

from __future__ import annotations

import argparse
from typing import Any

from builder.commands.console import Console
from builder.commands.io import command_line
from builder.commands.options import DEFAULT_STORE

WAITING_SHOWN = 5  # tokens printed by run; inspect lists every waiting Task


def _store_args(args: argparse.Namespace) -> list[str]:
    return [] if args.store == DEFAULT_STORE else ["--store", args.store]


def _compile_args(args: argparse.Namespace) -> list[str]:
    """The options that compile a state machine as this command did (`run`: --functions,
    --handler, --substitution; task-success: --functions), so a printed command runs the same code."""
    given = [("--functions", getattr(args, "functions", None)), ("--handler", getattr(args, "handler", None))]
    given += [("--substitution", s) for s in getattr(args, "substitution", None) or []]
    return [arg for option, value in given if value is not None for arg in (option, value)]


def resume_command(args: argparse.Namespace, workflow_id: str) -> str:
    """`python -m builder run FOLDER --workflow-id ID --resume [--store S] [--functions F …]`:
    drives the workflow's pending deliveries and timers again."""
    return command_line("run", args.workflow, "--workflow-id", workflow_id, "--resume", *_store_args(args),
                        *_compile_args(args))


def report_waiting(store: Any, workflow_id: str, args: argparse.Namespace, console: Console, *,
                   next_timer: float | None, timers_kept: bool) -> bool:
    """When the workflow waits for callbacks or for a timer (`next_timer`: when its first is due,
    epoch seconds, or None), say which on stderr, each with the command that ends the wait, and
    return True; False when it waits for neither. `timers_kept`: the timers are in a queue
    database (a later `run --resume` delivers them), else they end with this process."""
    from builder.commands.run_queue import utc

    if report_callbacks(store, workflow_id, args, console):  # a callback's timeout is a timer too
        if next_timer is not None:
            console.message(f"its next timer is due at {utc(next_timer)} (a timeout or a wait); until then "
                            f"nothing else runs; to drive it: {resume_command(args, workflow_id)}")
        return True
    if next_timer is None:
        return False
    kept = "" if timers_kept else " (this store keeps no delivery queue: the timer ends with this run)"
    console.message(f"workflow {workflow_id} is waiting until {utc(next_timer)} for a timer{kept}; "
                    f"nothing runs until then; resume with: {resume_command(args, workflow_id)}")
    return True


def report_callbacks(store: Any, workflow_id: str, args: argparse.Namespace, console: Console) -> bool:
    """When the workflow waits for callbacks — task tokens of `.waitForTaskToken` Tasks, or a
    durable function's `create_callback` / `wait_for_callback` — say which, with the command
    that completes each, on stderr, and return True."""
    from unum_entry.asl.callbacks import waiting

    tasks = waiting(store, workflow_id)
    if tasks:
        _task_tokens(workflow_id, tasks, args, console)
        return True
    from unum_entry.durable_functions.callbacks import waiting_in

    callbacks = waiting_in(store, workflow_id)
    if not callbacks:
        return False
    store_args = _store_args(args)
    console.message(f"workflow {workflow_id} is waiting for {len(callbacks)} durable function callback(s) "
                    "(create_callback / wait_for_callback); complete each with:")
    for callback in callbacks[:WAITING_SHOWN]:
        console.message(f"  {callback.function} {callback.name!r}: " + command_line(
            "callback-success", callback.callback_id, "--result", "JSON", *store_args, "--workflow", args.workflow))
    if len(callbacks) > WAITING_SHOWN:
        console.message(f"  … and {len(callbacks) - WAITING_SHOWN} more: "
                        f"{command_line('inspect', workflow_id, *store_args, '--history')}")
    console.message("  (or callback-failure CALLBACK_ID --error E --cause C; callback-heartbeat CALLBACK_ID)")
    return True


def _task_tokens(workflow_id: str, tasks: list[Any], args: argparse.Namespace, console: Console) -> None:
    from builder.program import callback_hint

    states = sorted({t.state for t in tasks})
    console.message(f"workflow {workflow_id} is waiting for {len(tasks)} task-token callback(s) at "
                    f"{', '.join(repr(s) for s in states)} (.waitForTaskToken); nothing runs until then")
    for task in tasks[:WAITING_SHOWN]:
        console.message(f"  {task.state}: {task.token}")
    if len(tasks) > WAITING_SHOWN:
        console.message(f"  … and {len(tasks) - WAITING_SHOWN} more: "
                        f"{command_line('inspect', workflow_id, *_store_args(args))}")
    hint = callback_hint(args.store, args.workflow, getattr(args, "functions", None))
    console.message(f"complete one with: {hint}")


__all__ = ["WAITING_SHOWN", "report_callbacks", "report_waiting", "resume_command"]
