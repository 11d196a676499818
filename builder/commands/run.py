"""`python -m builder run`: a workflow on the embedded local platform, its result on stdout."""

from __future__ import annotations

import argparse
import sys

from unum_entry.errors import UnumError, WorkflowFailed

from builder.commands.io import parse_input, to_json

DEFAULT_STORE = ".unum/store"


def cmd_run(args: argparse.Namespace) -> int:
    from unum_entry.local.platform import local_platform
    from unum_entry.stores import open_store
    from unum_entry.workflow import load_workflow

    from builder.commands.compile import runnable_workflow
    workflow = load_workflow(runnable_workflow(args.workflow, getattr(args, "functions", None), getattr(args, "handler", None)))
    input_value = parse_input(args.input)
    store = open_store(args.store)
    with local_platform(workflow, store, workers=args.workers) as platform:
        outcome = platform.run(input_value, workflow_id=args.workflow_id, timeout=args.timeout)
    if platform.dead_letters:
        for message in platform.dead_letters:
            print(f"warning: dropped delivery: {message}", file=sys.stderr)
    if outcome.failure is not None:
        f = outcome.failure
        raise WorkflowFailed(f"workflow {outcome.workflow_id} failed in function {f['Function']!r} "
                             f"after {f['Attempts']} attempt(s): {f['Error']}: {f['Cause']}")
    if not outcome.results:
        raise UnumError(f"workflow {outcome.workflow_id} finished without a result (see warnings above)")
    print(to_json(outcome.result, args.compact), flush=True)
    print(f"workflow {outcome.workflow_id}: {platform.stats['committed']} invocations, "
          f"{platform.stats['invokes']} invokes", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="run a workflow on the embedded local platform and print its result")
    run.add_argument("workflow", help="workflow folder (unum-workflow.json + one folder per function)")
    run.add_argument("--input", default="null", help="workflow input: JSON text or @file.json (default: null)")
    run.add_argument("--store", default=DEFAULT_STORE, help=f"store URL or folder (default: {DEFAULT_STORE}; e.g. dynamodb://TABLE?endpoint=http://127.0.0.1:5000)")
    run.add_argument("--workers", type=int, default=8, help="concurrent executions (default: 8)")
    run.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the workflow (default: 300)")
    run.add_argument("--workflow-id", default=None, help="workflow id (default: a new one)")
    run.add_argument("--compact", action="store_true", help="print the result on one line")
    run.set_defaults(func=cmd_run)
