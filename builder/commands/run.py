"""`python -m builder run`: a workflow on the embedded local platform, its result on stdout.

On stderr: the workflow id first (`workflow wf-…`), a progress line while it runs when stderr
is a terminal, then one summary line — or, when the workflow failed, the user's code frames the
error came through and one `error:` line (exit 1). Ctrl-C (exit 130) or SIGTERM (exit 143) stops
at once and a timeout stops the run (exit 2), each with one line saying how to resume
(`--workflow-id … --resume`) and inspect; the pending deliveries and timers stay in the store's
database (builder.commands.run_queue), so a resume - even after a kill -9 - re-drives them. A
workflow left with only future timers is reported as waiting until the first (exit 0). A reused
`--workflow-id` continues that workflow (see `start_record`); while another `run` drives it, this
one waits for its outcome. A workflow runs the version of its folder it started with
(builder.versions: a content-addressed copy beside the store), and so does every later run of
its id, whatever the folder holds now (a note says when it has changed). Every handler is imported before the workflow starts (a broken one is
one error line); what handlers print goes to stderr, so stdout holds the result only. With
`--log-format json` (or `-v`: its message alone) stderr also gets the line per delivery the
function images write (unum_entry.invocation_log); `UNUM_TRACING` traces the run (docs/tracing.md).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from unum_entry.errors import StoreError, StoreUnusable, UnumError, WorkflowFailed, WorkflowTimeout

from builder.commands.console import Console
from builder.commands.io import command_line, parse_input, to_json
from builder.commands.options import (DEFAULT_STORE, HELPERS_ENV, TIMEOUT_ENV, WORKERS_ENV, add_durability_option,
                                      add_store_option, env_option, non_negative_int, positive_int, positive_seconds,
                                      store_options)
from builder.commands.waiting import report_callbacks, report_waiting, resume_command

if TYPE_CHECKING:
    from unum_entry.invocation_log import InvocationLog
    from unum_entry.local.platform import LocalPlatform, Progress
    from unum_entry.outcome import RunResult

    from builder.commands.run_queue import RunQueue

__all__ = ["DEFAULT_STORE", "cmd_run", "register", "wait_for_workflow"]

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM
ENDED = ("succeeded", "failed", "stopped", "timed out")  # statuses (WorkflowStatus values) of a workflow with an outcome
TICK = 0.1  # seconds between progress redraws
ENDED_POLL_MAX = 5.0  # at most seconds between asking whether a quiet workflow has ended (`wait_for_workflow`)


def cmd_run(args: argparse.Namespace) -> int:
    results = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # a handler's print() is a message: stdout is the result's
        return _run(args, results)


def _run(args: argparse.Namespace, results: TextIO) -> int:
    from unum_entry.local.heap import freeze_loaded
    from unum_entry.local.platform import LocalPlatform
    from unum_entry.outcome import finished, read_outcome
    from unum_entry.redrive import continue_dead_redrive
    from unum_entry.watchdog import Rearm
    from unum_entry.runtime import new_workflow
    from unum_entry.stores import open_store
    from unum_entry.workflow import load_workflow

    from builder.runs import start_record
    from builder.runs.folders import runnable_workflow
    from builder.commands.interrupts import Terminated, raised
    from builder.commands.run_queue import RunQueue, follow
    from builder.commands.versions import changed_since, pin
    from builder.versions import source_path

    if args.resume and not args.workflow_id:
        raise UnumError("--resume needs --workflow-id: the id of the workflow to continue")
    console = Console()
    folder = runnable_workflow(args.workflow, getattr(args, "functions", None), getattr(args, "handler", None),
                               getattr(args, "substitution", None))
    input_value = parse_input(args.input if args.input is not None else "null")
    store = open_store(args.store, **store_options(args.store, args.durability))
    workflow_id = new_workflow(None, args.workflow_id).workflow
    # The version the workflow runs (builder.versions): a workflow started before keeps the one
    # it recorded, whatever its folder holds now; a new one runs the folder's, snapshotted now.
    recorded = start_record.read(store, workflow_id) if args.workflow_id else None
    try:
        pinned = pin(store, recorded, folder, source=os.path.abspath(args.workflow),
                     snapshot=not (args.resume and recorded is None))  # (nothing to resume: claim says so)
    except UnumError as exc:  # a store folder that is full or read-only: the line names the store
        raise UnumError(f"--store {args.store}: {exc}") from None
    # Imports every handler before anything is stored: a syntax error or a missing handler is one
    # error line, not a workflow left "running".
    try:
        workflow = load_workflow(pinned.folder)
    except UnumError as exc:  # a broken definition is named by the user's own path, not the copy's
        if pinned.folder == folder:
            raise
        raise UnumError(str(exc).replace(pinned.folder, os.path.abspath(folder))) from None

    def files(path: str) -> str:  # a frame's file in the version's copy -> the user's own, while unchanged
        return source_path(path, pinned.folder, folder) if pinned.folder != folder else path
    rq = RunQueue.for_store(store)  # deliveries and timers kept in the store's database: a killed run resumes
    platform = LocalPlatform(workflow, store, workers=args.workers, queue=rq.queue, helpers=args.helpers,
                             invocation_log=_invocation_log(args, console, pinned.version))
    freeze_loaded()  # what the workflow loaded stays out of the cycle collector's passes (unum_entry.local.heap)
    try:
        start = start_record.claim(store, workflow_id, input_value, folder=os.path.abspath(args.workflow),
                                   resume=args.resume, version=pinned.version)
        if start.version != pinned.version:  # another run started this id meanwhile, on another version
            raise UnumError(f"workflow {workflow_id} was started meanwhile by another run, on version "
                            f"{start.version}: run the same command again to follow it")
    except BaseException:
        platform.close()
        rq.close()
        raise
    console.message(f"workflow {workflow_id}")  # (its version: inspect, list --json, versions)
    if recorded is not None and (now := changed_since(folder, pinned.version)) is not None:
        console.message(f"note: workflow {workflow_id} runs version {pinned.version}, the code it started with; "
                        f"{args.workflow} has changed since (version {now}): a new --workflow-id runs that, "
                        f"`upgrade {workflow_id} --to {args.workflow}` moves this one")
    if start.kind is start_record.StartKind.RESUMED and args.input is not None:
        console.message(f"note: resuming {workflow_id} with the input it was started with; --input ignored")
    if start.kind is not start_record.StartKind.NEW:
        ended = read_outcome(store, workflow_id)
        if ended.status in ENDED:
            console.message(f"workflow {workflow_id} has already ended; its recorded outcome follows")
            if rq.runs is not None and rq.runs.acquire(workflow_id) is None:
                # no live driver: what a killed one left queued is stale (an ended workflow runs
                # nothing more), and so is its driver record
                rq.runs.forget([workflow_id])
                rq.runs.release(workflow_id)
            platform.close()
            rq.close()
            with contextlib.redirect_stdout(results):
                return _report(ended, args, console, summary=None, store=store, files=files)
    hint = _hint(args, workflow_id)
    began = time.monotonic()
    try:
        with raised(sigterm=True):
            if rq.runs is not None and (owner := rq.runs.acquire(workflow_id)) is not None:
                if follow(rq.runs, workflow_id, owner, timeout=args.timeout, message=console.message,
                          ended=lambda: finished(store, workflow_id)):
                    platform.close()
                    rq.close()
                    with contextlib.redirect_stdout(results):
                        return _report(read_outcome(store, workflow_id), args, console, summary=None, store=store,
                                       files=files)
            recovered = platform.recover(workflow_id)
            if recovered:
                console.message(f"resuming: {recovered} deliveries and timers a previous run left pending")
            elif args.resume and rq.runs is not None and (redriven := continue_dead_redrive(
                    store, workflow_id, platform.invoker, rearm=Rearm.of(workflow))) is not None:
                rq.queue.flush()  # (on disk before anything is said, as redrive's own)
                console.message(f"resuming: redrive {redriven.number + 1}, killed before it journaled what it "
                                f"sends: re-running {redriven.function}")
            else:  # nothing journaled (a new workflow, or a store without a queue): from the entry's checkpoint
                platform.start(start.input, workflow_id)
            _wait(platform, args.timeout, console, began, workflow_id,
                  ended=lambda: finished(store, workflow_id))
            next_timer = platform.next_timer()
    except KeyboardInterrupt as stop:
        _abandon(platform, console)
        _release(rq, workflow_id)
        what = "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"
        console.message(f"{what}: workflow {workflow_id} stopped after {time.monotonic() - began:.1f} s; {hint}")
        return EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
    except StoreUnusable:  # a full disk, a read-only file: the platform stopped; its queue keeps what is pending
        with contextlib.suppress(StoreError):  # (the journal and the run record are in the same unusable file)
            _abandon(platform, console)
        with contextlib.suppress(StoreError):
            _release(rq, workflow_id)
        raise
    except WorkflowTimeout:
        in_flight = platform.progress().in_flight
        _abandon(platform, console)
        _release(rq, workflow_id)
        raise UnumError(f"workflow {workflow_id} still running after {args.timeout:g} s ({in_flight} deliveries in "
                        f"flight): stopped; {hint}") from None
    except BaseException:
        platform.close()
        _release(rq, workflow_id)
        raise
    console.clear_status()
    platform.close()
    outcome = platform.outcome(workflow_id)
    if rq.runs is not None and outcome.status in ENDED:
        rq.runs.drop_timers(workflow_id)
    _release(rq, workflow_id)
    if next_timer is not None and outcome.status not in ENDED:
        report_waiting(store, workflow_id, args, console, next_timer=next_timer, timers_kept=rq.runs is not None)
        return 0
    for message in platform.dead_letters:
        console.message(f"warning: dropped delivery: {message}")
    stats = platform.stats
    with contextlib.redirect_stdout(results):
        return _report(outcome, args, console,
                       summary=f"{stats['committed']} invocations, {stats['invokes']} invokes, "
                               f"{time.monotonic() - began:.1f} s", store=store, files=files)


def _wait(platform: LocalPlatform, timeout: float, console: Console, began: float, workflow_id: str,
          ended: Callable[[], bool]) -> None:
    """`wait_for_workflow`, redrawing the progress line on a terminal every TICK."""
    from builder.commands.progress import Meter, render

    meter = Meter()  # commit rates for the line's rate and ETA

    def redraw(progress: Progress) -> None:
        now = time.monotonic()
        meter.update(now, progress)
        console.status(render(progress, now - began, meter=meter, width=console.columns))

    wait_for_workflow(platform, timeout, workflow_id, ended, began=began,
                      tick=redraw if console.is_terminal else None)


def wait_for_workflow(platform: LocalPlatform, timeout: float, workflow_id: str, ended: Callable[[], bool], *,
                      began: float | None = None, tick: Callable[[Progress], None] | None = None) -> None:
    """Until nothing is in flight but timers due after the run's end (raises WorkflowTimeout
    `timeout` s after `began`, default now), or nothing but timers of `workflow_id` once
    `ended()` says it has its outcome: a timer left then (a Task's timeout after the Task ended)
    changes nothing when it fires, and a run must not sit until it does. Another workflow's
    timer (a child execution's Wait, started by this one and still running) is waited for as
    before. `tick(progress)` every TICK.

    `ended()` scans the workflow's records, so it is asked only while nothing but timers is
    queued: at once when the platform goes quiet, then at doubling intervals up to
    ENDED_POLL_MAX (another process - `task-success` - may end the workflow meanwhile)."""
    began = time.monotonic() if began is None else began
    deadline = began + timeout
    timers_until = time.time() + (deadline - time.monotonic())  # timers due before the run's end are waited for
    interval, next_check = TICK, 0.0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WorkflowTimeout(f"still running after {timeout:g} s")
        try:
            platform.wait_idle(min(TICK, remaining), until=timers_until)
            return
        except WorkflowTimeout:
            progress = platform.progress()
            if progress.in_flight:
                interval, next_check = TICK, 0.0  # busy: ask as soon as it is quiet again
            elif (now := time.monotonic()) >= next_check:
                if platform.timer_workflows() <= {workflow_id} and ended():
                    return
                interval = min(interval * 2, ENDED_POLL_MAX)
                next_check = now + interval
            if tick is not None:
                tick(progress)


def _invocation_log(args: argparse.Namespace, console: Console, version: str | None) -> InvocationLog | None:
    """The function images' line per delivery on stderr: as JSON (`--log-format json`, each with
    the workflow's pinned `version`), or its message alone with `-v`; none by default."""
    from unum_entry.invocation_log import InvocationLog

    from builder.commands.console import ConsoleLines

    if getattr(args, "log_format", "text") == "json":
        return InvocationLog(stream=ConsoleLines(console), version=version)  # type: ignore[arg-type]  # a write/flush stream
    if getattr(args, "verbose", False):
        return InvocationLog(stream=ConsoleLines(console), text=True)  # type: ignore[arg-type]
    return None


def _release(rq: RunQueue, workflow_id: str) -> None:
    """This process no longer drives `workflow_id` (its queue is flushed by then)."""
    if rq.runs is not None:
        rq.runs.release(workflow_id)
    rq.close()


def _abandon(platform: LocalPlatform, console: Console) -> None:
    """Stop now: executions still running are abandoned (as a crash) and what they log is
    no longer shown."""
    platform.cancel()
    logging.getLogger("unum").setLevel(logging.CRITICAL + 1)
    console.clear_status()


def _hint(args: argparse.Namespace, workflow_id: str) -> str:
    store = [] if args.store == DEFAULT_STORE else ["--store", args.store]
    return f"resume: {resume_command(args, workflow_id)}; inspect: {command_line('inspect', workflow_id, *store)}"


def _report(outcome: RunResult, args: argparse.Namespace, console: Console, summary: str | None,
            store: Any = None, files: Callable[[str], str] | None = None) -> int:
    """The result on stdout (exit 0), or the failure: user frames, then one error line (exit 1),
    or a workflow waiting for task-token callbacks: which Tasks, their tokens and how to complete
    them, on stderr (exit 0: waiting is not an error)."""
    if outcome.failure is not None:
        f = outcome.failure
        if f.get("Stopped") is True:  # `python -m builder stop` (docs/history.md)
            raise WorkflowFailed(f"workflow {outcome.workflow_id} was stopped: {f['Error']}: {f['Cause']}")
        if f.get("Watchdog") is True or f.get("TimedOut") is True:  # deadline watchdog, execution timeout: `timed out`
            raise WorkflowFailed(f"workflow {outcome.workflow_id} timed out: {f['Error']}: {f['Cause']}")
        for line in trace_lines(f.get("Trace") or [], files=files):
            console.message(line)
        raise WorkflowFailed(f"workflow {outcome.workflow_id} failed in function {f['Function']!r} "
                             f"after {f['Attempts']} attempt(s): {f['Error']}: {f['Cause']}")
    if (not outcome.results or not outcome.complete) and store is not None:
        if report_callbacks(store, outcome.workflow_id, args, console):
            return 0
    if not outcome.results:
        raise UnumError(f"workflow {outcome.workflow_id} finished without a result (see warnings above)")
    print(to_json(outcome.result, args.compact), flush=True)
    if summary is not None:
        console.message(f"workflow {outcome.workflow_id}: {summary}")
    return 0


def trace_lines(trace: list[dict[str, Any]], *, files: Callable[[str], str] | None = None) -> list[str]:
    """A failure record's `Trace` (the user's frames, innermost last) as Python prints frames,
    so editors and terminals link `File "…", line N` (`files`: where each frame's file is shown,
    e.g. the user's file for a version's copy: builder.versions.source_path)."""
    if not trace:
        return []
    lines = ["the handler's error came through (innermost last):"]
    for frame in trace:
        shown = frame.get("File")
        if files is not None and isinstance(shown, str):
            shown = files(shown)
        lines.append(f'  File "{shown}", line {frame.get("Line")}, in {frame.get("Function")}')
        if frame.get("Code"):
            lines.append(f"    {frame['Code']}")
    return lines


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run a workflow on the embedded local platform and print its result")
    run.add_argument("workflow", help="workflow folder (unum-workflow.json + one folder per function)")
    run.add_argument("--input", default=None, help="workflow input: JSON text or @file.json (default: null)")
    add_store_option(run, help="store URL, database file or folder, e.g. .unum/unum.db, "
                               "dynamodb://TABLE?endpoint=http://127.0.0.1:5001")
    add_durability_option(run)
    env_option(run, "--workers", envvar=WORKERS_ENV, default=8, type=positive_int, help="concurrent executions")
    env_option(run, "--helpers", envvar=HELPERS_ENV, default=None, type=non_negative_int,
               help="helper processes that run a wide fan-out's calls on the other CPUs, with the SQLite store "
                    "(docs/embedded-engine.md; 0: none)", default_text="one per CPU but one")
    env_option(run, "--timeout", envvar=TIMEOUT_ENV, default=300.0, type=positive_seconds,
               help="seconds to wait for the workflow")
    run.add_argument("--workflow-id", default=None,
                     help="workflow id (default: a new one). Reusing one continues that workflow (or prints its "
                          "outcome); with a different --input it is an error unless --resume is given")
    run.add_argument("--resume", action="store_true",
                     help="continue the workflow --workflow-id with the input it was started with")
    run.add_argument("--compact", action="store_true", help="print the result on one line")
    run.add_argument("--log-format", choices=("text", "json"), default="text",
                     help="json: on stderr, the JSON line per delivery the function images write to CloudWatch / "
                          "Cloud Logging (docs/tracing.md); text (default): none, or each line's message with -v")
    run.set_defaults(func=cmd_run)
