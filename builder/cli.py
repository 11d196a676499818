"""Command line: parse arguments, call one command, turn unum errors into clear messages.

Every expected failure is an UnumError and prints one line naming what and where (exit 2);
a workflow that ran and failed prints its failure record (exit 1).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from unum_entry.errors import UnumError, WorkflowFailed

DEFAULT_STORE = ".unum/store"


def _parse_input(raw: str) -> Any:
    """`--input` is JSON text, or @file holding JSON."""
    if raw.startswith("@"):
        path = Path(raw[1:])
        try:
            raw = path.read_text()
        except OSError as exc:
            raise UnumError(f"--input {path}: cannot read: {exc.strerror or exc}") from exc
        source = str(path)
    else:
        source = "--input"
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise UnumError(f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    except ValueError as exc:
        raise UnumError(f"{source}: {exc}") from exc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _to_json(value: Any, compact: bool) -> str:
    """Results as strict JSON. Bytes print as {"$bytes": base64}; NaN/Infinity are refused."""
    def default(obj: Any) -> Any:
        if isinstance(obj, (bytes, bytearray)):
            return {"$bytes": base64.b64encode(obj).decode()}
        raise TypeError(f"{type(obj).__name__} is not JSON")

    try:
        return json.dumps(value, indent=None if compact else 2, allow_nan=False, default=default)
    except ValueError as exc:
        raise UnumError(f"the workflow result cannot be printed as JSON: {exc}") from exc


def cmd_run(args: argparse.Namespace) -> int:
    from unum_entry.local.platform import local_platform
    from unum_entry.stores import open_store
    from unum_entry.workflow import load_workflow

    from builder.compile_cmd import runnable_workflow
    workflow = load_workflow(runnable_workflow(args.workflow, getattr(args, "functions", None), getattr(args, "handler", None)))
    input_value = _parse_input(args.input)
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
    print(_to_json(outcome.result, args.compact), flush=True)
    print(f"workflow {outcome.workflow_id}: {platform.stats['committed']} invocations, "
          f"{platform.stats['invokes']} invokes", file=sys.stderr)
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    from unum_entry.outcome import read_outcome
    from unum_entry.stores import open_store

    outcome = read_outcome(open_store(args.store), args.workflow_id)
    until = outcome.retained_until
    report = {"workflow": outcome.workflow_id, "status": outcome.status, "results": outcome.results,
              "failure": outcome.failure, "retained_objects": outcome.pending,
              "retained_until": None if until is None else _utc(until)}
    print(_to_json(report, compact=False))
    return 1 if outcome.status == "failed" else 0


def cmd_gc(args: argparse.Namespace) -> int:
    """Delete every expired object (the file store's stand-in for DynamoDB's and Firestore's
    own TTL deletion; on those it deletes what their sweeper has not reached yet)."""
    from unum_entry.stores import open_store

    store = open_store(args.store)
    try:
        swept = store.sweep()
    finally:
        store.close()
    print(f"swept {swept} expired object(s) from {args.store}", file=sys.stderr)
    return 0


def _utc(epoch: int) -> str:
    from datetime import UTC, datetime
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m builder", description="unum: serverless workflows without an orchestrator")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a workflow on the embedded local platform and print its result")
    run.add_argument("workflow", help="workflow folder (unum-workflow.json + one folder per function)")
    run.add_argument("--input", default="null", help="workflow input: JSON text or @file.json (default: null)")
    run.add_argument("--store", default=DEFAULT_STORE, help=f"store URL or folder (default: {DEFAULT_STORE}; e.g. dynamodb://TABLE?endpoint=http://127.0.0.1:5000)")
    run.add_argument("--workers", type=int, default=8, help="concurrent executions (default: 8)")
    run.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the workflow (default: 300)")
    run.add_argument("--workflow-id", default=None, help="workflow id (default: a new one)")
    run.add_argument("--compact", action="store_true", help="print the result on one line")
    run.set_defaults(func=cmd_run)

    inspect = sub.add_parser("inspect", help="show a workflow's status, results, failure and what the store retains until when")
    inspect.add_argument("workflow_id", help="the workflow id (printed by run)")
    inspect.add_argument("--store", default=DEFAULT_STORE, help=f"store URL or folder (default: {DEFAULT_STORE})")
    inspect.set_defaults(func=cmd_inspect)

    gc = sub.add_parser("gc", help="delete expired objects (checkpoints, sets, results past their TTL) from a store")
    gc.add_argument("--store", default=DEFAULT_STORE, help=f"store URL or folder (default: {DEFAULT_STORE})")
    gc.set_defaults(func=cmd_gc)
    from builder import compile_cmd
    compile_cmd.register(sub)
    from builder import deploy_cmd
    deploy_cmd.register(sub)
    from builder import image_cmds; image_cmds.register(sub)  # noqa: E702 (one line per command module)
    from builder import local_aws_cmd; local_aws_cmd.register(sub)  # noqa: E702
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except WorkflowFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except UnumError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
