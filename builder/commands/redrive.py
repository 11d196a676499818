"""`python -m builder redrive WF [--workflow FOLDER]`: re-run a failed workflow on the embedded
engine from the invocation that failed it, with its recorded input, keeping every committed
result (unum_entry.redrive); then print the outcome as `run` does (the result on stdout, exit 0;
a failure again, exit 1).

The code is the workflow's version (builder.versions): the copy of the folder it started with,
not what the folder holds now - pinned, as every later invocation of a workflow is. To redrive
on fixed code, move the workflow first: `upgrade WF --to FOLDER` (its replay check passes when
the failed function and the states it stands at exist in the fix). For a workflow that records
no version (started before versions existed) the folder is the one `run` recorded, or
`--workflow` (a folder or a state machine file). Refused in one line (exit 2) when the workflow did not fail, was stopped, is past
its retention, another redrive claimed it first, or another process drives it.

What a redrive sends is journaled on `run`'s durable queue (builder.commands.run_queue) and this
process drives the workflow while it waits: a redrive killed (even kill -9), interrupted or timed
out leaves the workflow `interrupted`, and `run FOLDER --workflow-id ID --resume` (printed on
Ctrl-C, SIGTERM and timeout) continues it from what the redrive sent.

`redrive WF --invoker URL` (`lambda://…`) redrives a deployed workflow through its functions
instead, on the build it started on (`_redrive_deployed`), and returns once the invoke is queued.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from unum_entry.errors import UnumError, WorkflowFailed

from builder.commands.console import Console
from builder.commands.io import to_json
from builder.commands.options import TIMEOUT_ENV, WORKERS_ENV, add_store_option, env_option, positive_int, positive_seconds


def cmd_redrive(args: argparse.Namespace) -> int:
    from unum_entry import load_workflow
    from unum_entry.local.heap import freeze_loaded
    from unum_entry.local.platform import LocalPlatform
    from unum_entry.errors import WorkflowTimeout
    from unum_entry.outcome import WorkflowStatus, finished, read_outcome
    from unum_entry.redrive import redrive
    from unum_entry.watchdog import Rearm

    from builder.commands.interrupts import raised
    from builder.commands.io import command_line
    from builder.commands.options import DEFAULT_STORE
    from builder.commands.run import wait_for_workflow
    from builder.commands.run_queue import RunQueue

    from builder.runs import start_record
    from builder.runs.folders import runnable_workflow
    from builder.commands.options import open_existing_store
    from builder.commands.versions import changed_since, pin

    if getattr(args, "invoker", None):
        return _redrive_deployed(args)
    console = Console()
    store = open_existing_store(args.store)
    try:
        recorded = start_record.read(store, args.workflow_id)
        folder = args.workflow or (recorded.folder if recorded else None)
        if not folder and (recorded is None or recorded.version is None):
            raise UnumError(f"redrive: the store has no record of where {args.workflow_id} was run from; pass its "
                            "workflow folder: --workflow FOLDER")
        live = runnable_workflow(folder) if folder and Path(folder).exists() else None
        pinned = pin(store, recorded, live, snapshot=False)
        if (now := changed_since(live, pinned.version)) is not None:
            console.message(f"note: redrive runs version {pinned.version}, the code workflow {args.workflow_id} "
                            f"started with; {folder} has changed since (version {now}): to redrive on it, first "
                            f"`upgrade {args.workflow_id} --to {folder}`")
        workflow = load_workflow(pinned.folder)
        # What the redrive sends is journaled on run's durable queue, as run's own deliveries are,
        # and this process is the workflow's driver while it runs: killed or timed out, the
        # workflow is `interrupted` and `run --workflow-id ID --resume` continues it.
        rq = RunQueue.for_store(store)
        platform = LocalPlatform(workflow, store, workers=args.workers, queue=rq.queue)
        freeze_loaded()  # (unum_entry.local.heap)
        resume = command_line("run", folder or pinned.folder, "--workflow-id", args.workflow_id, "--resume",
                              *([] if args.store == DEFAULT_STORE else ["--store", args.store]))
        try:
            with raised(sigterm=True):
                if rq.runs is not None and (owner := rq.runs.acquire(args.workflow_id)) is not None:
                    raise UnumError(f"workflow {args.workflow_id} is being run by process {owner.pid}: redrive it "
                                    "once that run has ended")
                # holding the driver lease: a claim left by a redrive killed before it cleared the
                # failure record is that dead redrive's, continued (unum_entry.redrive, adopt)
                sent = redrive(store, args.workflow_id, platform.invoker, adopt=rq.runs is not None,
                               rearm=Rearm.of(workflow))  # its TimeoutSeconds counts from here
                rq.queue.flush()  # on disk before anything is said: a kill from here on leaves it to --resume
                console.message(f"redrive {sent.number + 1} of workflow {args.workflow_id}: re-running {sent.function} "
                                f"(it failed with {sent.failure.get('Error')}: {sent.failure.get('Cause')})")
                wait_for_workflow(platform, args.timeout, args.workflow_id,
                                  ended=lambda: finished(store, args.workflow_id))
        except (KeyboardInterrupt, WorkflowTimeout) as stop:
            platform.cancel()
            what = "timed out" if isinstance(stop, WorkflowTimeout) else "interrupted"
            raise UnumError(f"redrive of workflow {args.workflow_id} {what}; what it sent is kept: continue it with "
                            f"{resume}") from None
        finally:
            platform.close()
            if rq.runs is not None:
                rq.runs.release(args.workflow_id)
            rq.close()
        outcome = read_outcome(store, args.workflow_id)
    finally:
        store.close()
    if outcome.status is WorkflowStatus.SUCCEEDED:
        print(to_json(outcome.result, compact=False), flush=True)
        return 0
    if outcome.failure is not None:
        f = outcome.failure
        raise WorkflowFailed(f"workflow {args.workflow_id} failed again in function {f.get('Function')!r} after "
                             f"{f.get('Attempts')} attempt(s): {f.get('Error')}: {f.get('Cause')}")
    console.message(f"workflow {args.workflow_id} is {outcome.status} (see: inspect {args.workflow_id})")
    return 0


def _redrive_deployed(args: argparse.Namespace) -> int:
    """`redrive WF --invoker URL`: redrive a workflow of deployed functions (module docstring of
    unum_entry.redrive) through their invoker, on the build the workflow started on (its build
    record, unum_entry.invokers.lambda_builds: `FUNCTION:<build>` on Lambda, not `$LATEST`; no
    record: as the URL says). Prints what it re-invoked as JSON and returns 0 at once: the
    deployed functions run the rest. `--workflow FOLDER` (the deployed folder) also re-arms its
    entry's timers (deadline watchdog, execution timeout) as a start does. Refused in one line
    (exit 2) as the local redrive is."""
    import json

    from unum_entry import load_workflow
    from unum_entry.invokers import open_invoker
    from unum_entry.invokers.lambda_builds import recorded_builds
    from unum_entry.redrive import redrive
    from unum_entry.watchdog import Rearm

    from builder.commands.options import open_existing_store
    from builder.runs.folders import runnable_workflow

    store = open_existing_store(args.store)
    try:
        rearm = Rearm.of(load_workflow(runnable_workflow(args.workflow))) if args.workflow else None
        invoker = recorded_builds(open_invoker(args.invoker, store=store), store)
        sent = redrive(store, args.workflow_id, invoker, rearm=rearm)
    finally:
        store.close()
    print(json.dumps({"workflow": args.workflow_id, "redrive": sent.number + 1, "resumed": sent.function,
                      "failed_with": sent.failure.get("Error")}), flush=True)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("redrive", help="re-run a failed workflow from its failed invocation, keeping what "
                                            "committed (Step Functions' redrive)")
    parser.add_argument("workflow_id", help="the workflow id (printed by run)")
    parser.add_argument("--workflow", metavar="FOLDER", help="its workflow folder or state machine (default: the "
                                                             "folder its run recorded)")
    add_store_option(parser)
    parser.add_argument("--invoker", default=None, metavar="URL",
                        help="redrive a deployed workflow through its functions' invoker (lambda://?prefix=STACK-…), "
                             "on the build it started on, instead of on the embedded engine")
    env_option(parser, "--workers", envvar=WORKERS_ENV, default=8, type=positive_int, help="concurrent executions")
    env_option(parser, "--timeout", envvar=TIMEOUT_ENV, default=300.0, type=positive_seconds,
               help="seconds to wait for the workflow")
    parser.set_defaults(func=cmd_redrive)
