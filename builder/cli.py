"""Command line: parse arguments, call one command, turn unum errors into clear messages.

Every expected failure is an UnumError and prints one line naming what and where (exit 2);
a workflow that ran and failed prints its failure record (exit 1). Each command lives in its
own module under `builder/commands/`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from unum_entry.errors import UnumError, WorkflowFailed


def build_parser() -> argparse.ArgumentParser:
    from builder.commands import compile, deploy, images, inspect, local_aws, run

    parser = argparse.ArgumentParser(prog="python -m builder", description="unum: serverless workflows without an orchestrator")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (run, inspect, compile, deploy, images, local_aws):
        command.register(sub)
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
