"""The sub-commands that complete a waiting callback, shared by `task-success|task-failure|
task-heartbeat` (a `.waitForTaskToken` Task, builder.commands.callbacks) and `callback-success|
callback-failure|callback-heartbeat` (a durable function's callback, builder.commands.durable_callbacks):
one registration (`register_completions`) and one choice of the invoker that resumes a deployed
workflow (`deployed_invoker`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from unum_entry.errors import UnumError

from builder.commands.options import add_store_option, add_wait_options

Command = Callable[[argparse.Namespace], int]


@dataclass(frozen=True, slots=True)
class Completions:
    """One family of callback commands: `<prefix>-heartbeat`, `<prefix>-success`, `<prefix>-failure`."""

    prefix: str  # "task" or "callback"
    id_dest: str  # the positional argument's name
    id_help: str  # its help on heartbeat
    id_help_complete: str  # its help on success / failure
    helps: tuple[str, str, str]  # heartbeat, success, failure
    success_option: str  # "--output" / "--result"
    success_help: str
    error_help: str
    cause_help: str
    workflow_help: str
    functions: bool  # whether --functions is offered (a state machine's function code)


def register_completions(sub: argparse._SubParsersAction, spec: Completions, *, complete: Command,
                         heartbeat: Command) -> None:
    """Add the family's three sub-commands, `complete` serving success and failure."""
    p = sub.add_parser(f"{spec.prefix}-heartbeat", help=spec.helps[0])
    p.add_argument(spec.id_dest, help=spec.id_help)
    add_store_option(p)
    p.set_defaults(func=heartbeat)
    for name, help_text in ((f"{spec.prefix}-success", spec.helps[1]), (f"{spec.prefix}-failure", spec.helps[2])):
        p = sub.add_parser(name, help=help_text)
        p.add_argument(spec.id_dest, help=spec.id_help_complete)
        if name.endswith("-success"):
            p.add_argument(spec.success_option, required=True, help=spec.success_help)
        else:
            p.add_argument("--error", default=None, help=spec.error_help)
            p.add_argument("--cause", default=None, help=spec.cause_help)
        add_store_option(p)
        p.add_argument("--workflow", default=None, help=spec.workflow_help)
        if spec.functions:
            p.add_argument("--functions", default=None, help="the state machine's function code (as for run)")
        p.add_argument("--invoker", default=None, help="invoker URL of deployed functions (default $UNUM_INVOKER)")
        add_wait_options(p, workers=True, timeout_help="seconds to wait locally")
        p.set_defaults(func=complete)


def deployed_invoker(args: argparse.Namespace, store: Any, *, local_hint: str) -> Any:
    """The deployed functions' invoker that resumes the waiting workflow: `--invoker URL`, else
    `$UNUM_INVOKER`; without either, one line saying what to give (`local_hint`: the --workflow
    form of this command)."""
    from unum_entry.invokers import open_invoker

    url = args.invoker or os.environ.get("UNUM_INVOKER")
    if not url:
        raise UnumError(f"{args.command}: give {local_hint} or --invoker URL "
                        "($UNUM_INVOKER: the deployed functions' invoker)")
    return open_invoker(url, store=store)


__all__ = ["Completions", "deployed_invoker", "register_completions"]
