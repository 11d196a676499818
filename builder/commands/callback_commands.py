"""The sub-commands that complete a waiting callback, shared by `task-success|task-failure|
task-heartbeat` (a `.waitForTaskToken` Task, builder.commands.callbacks) and `callback-success|
callback-failure|callback-heartbeat` (a durable function's callback, builder.commands.durable_callbacks):
one registration (`register_completions`), one choice of the invoker that resumes a deployed
workflow (`deployed_invoker`) and one local continuation (`complete_locally`: `--workflow`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from unum_entry.errors import UnumError, WorkflowFailed

from builder.commands.io import command_line, to_json
from builder.commands.options import DEFAULT_STORE, add_store_option, add_wait_options

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
    form of this command). On Lambda the continuation goes to the build the workflow started on
    (its build record, unum_entry.invokers.lambda_builds), not `$LATEST`; a workflow with no
    record is invoked as the URL says."""
    from unum_entry.invokers import open_invoker
    from unum_entry.invokers.lambda_builds import recorded_builds

    url = args.invoker or os.environ.get("UNUM_INVOKER")
    if not url:
        raise UnumError(f"{args.command}: give {local_hint} or --invoker URL "
                        "($UNUM_INVOKER: the deployed functions' invoker)")
    return recorded_builds(open_invoker(url, store=store), store)


class Submit:
    """The local platform as an Invoker."""

    def __init__(self, platform: Any) -> None:
        self.platform = platform

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.platform.submit(function, payload)


def complete_locally(args: argparse.Namespace, store: Any, folder: str, complete: Callable[[Submit], str], *,
                     refusal: type[UnumError]) -> int:
    """Complete a callback and run the continuation on the embedded engine with `run`'s delivery
    queue (builder.commands.run_queue), so the timers it arms outlive this command and `run
    --resume` delivers them. `complete(invoker)` completes the callback and returns the workflow id;
    a `refusal` it raises (already completed, timed out: the continuation may have been re-sent)
    is raised once the continuation has run. Waits until the workflow stops again (`args.timeout`;
    timers due later stay queued), then prints its result (0) or raises its failure (exit 1), or
    says what it waits for, as `run` does (builder.commands.waiting), and returns 0.

    The continuation runs the workflow's version (builder.versions: the copy of the code it
    started with, as `run --resume` does), not what `folder` holds now; `folder` is loaded only
    for a workflow that records no version."""
    from unum_entry.local.platform import local_platform
    from unum_entry.outcome import finished, read_outcome
    from unum_entry.workflow import load_workflow

    from builder.runs import start_record
    from builder.commands.console import Console
    from builder.commands.run import ENDED, wait_for_workflow
    from builder.commands.run_queue import RunQueue
    from builder.commands.versions import changed_since, pin
    from builder.commands.waiting import report_waiting

    named = _named_workflow(args)
    recorded = start_record.read(store, named) if named is not None else None
    pinned = pin(store, recorded, folder, snapshot=False)
    if (now := changed_since(folder, pinned.version)) is not None:
        Console().message(f"note: the continuation runs version {pinned.version}, the code workflow {named} started "
                          f"with; {args.workflow} is version {now} (to move the workflow: upgrade {named} --to "
                          f"{args.workflow})")
    workflow = load_workflow(pinned.folder)
    rq = RunQueue.for_store(store)
    refused: UnumError | None = None
    try:
        with local_platform(workflow, store, workers=args.workers, queue=rq.queue) as platform:
            try:
                workflow_id = complete(Submit(platform))
            except refusal as exc:  # a re-sent continuation may still be running: let it end
                refused = exc
            if refused is None:
                wait_for_workflow(platform, args.timeout, workflow_id,
                                  ended=lambda: finished(store, workflow_id))
            else:  # (no workflow id: the continuation a refusal may have re-sent just runs out)
                platform.wait_idle(args.timeout)
            next_timer = platform.next_timer()
        if refused is not None:
            raise refused
        ended = read_outcome(store, workflow_id)
        if rq.runs is not None and ended.status in ENDED:  # as `run`: its timers would change nothing
            rq.runs.drop_timers(workflow_id)
    finally:
        rq.close()
    if ended.failure is not None:
        f = ended.failure
        raise WorkflowFailed(f"workflow {ended.workflow_id} failed in function {f['Function']!r} "
                             f"after {f['Attempts']} attempt(s): {f['Error']}: {f['Cause']}")
    if not ended.results:
        console = Console()
        console.message(f"workflow {workflow_id}: resumed; no result yet")
        if not report_waiting(store, workflow_id, args, console, next_timer=next_timer,
                              timers_kept=rq.runs is not None):  # e.g. a `run` of the workflow drives the rest
            store_args = [] if args.store == DEFAULT_STORE else ["--store", args.store]
            console.message(f"workflow {workflow_id} waits for no callback and no timer of this command (another "
                            f"process may be running it): {command_line('inspect', workflow_id, *store_args)}")
        return 0
    print(to_json(ended.result, args.compact), flush=True)
    return 0


def _named_workflow(args: argparse.Namespace) -> str | None:
    """The workflow the task token / callback id of `args` names (None: not one; completing it
    says why)."""
    from unum_entry.asl.callbacks import InvalidToken, Token
    from unum_entry.durable_functions.callback_ids import CallbackRef, InvalidCallbackId

    try:
        if getattr(args, "token", None) is not None:
            return Token.parse(args.token).workflow
        if getattr(args, "callback_id", None) is not None:
            return CallbackRef.parse(args.callback_id).workflow
    except (InvalidToken, InvalidCallbackId):
        return None
    return None


__all__ = ["Completions", "Submit", "complete_locally", "deployed_invoker", "register_completions"]
