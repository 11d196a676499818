"""Command line: parse arguments, call one command, turn every expected failure into one line.

Contract of `main` (exit codes): 0 success; 1 a workflow that ran and failed (its failure record
is printed); 2 a usage or operational error (bad option, bad input, unreachable store, a path
that cannot be written: one line `error: …`, never a traceback); 130 interrupted (Ctrl-C); 141
stdout closed by the reader (`… | head`), silently, as `cat` would. Results go to stdout,
everything else to stderr. Each command lives in its own module under `builder/commands/`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from unum_entry.errors import UnumError, WorkflowFailed

from builder.commands.console import Console, route_logs
from builder.commands.interrupts import raised
from builder.commands.io import program_name

WORKFLOW_FILE = "unum-workflow.json"
EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_PIPE = 1, 2, 130, 141


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `PROG: error: … (see PROG --help)`, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version("unum")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    from builder.commands import (callbacks, compile, deploy, durable_callbacks, graph, images, inspect, local_aws,
                                  ramp, redrive, run, serve, stop, ui, versions, workflows)

    parser = Parser(prog=prog or program_name(),
                    description="unum: serverless workflows without an orchestrator",
                    epilog="Environment: UNUM_STORE, UNUM_DURABILITY, UNUM_WORKERS, UNUM_TIMEOUT stand in for --store, "
                           "--durability, --workers, --timeout. Exit codes: 0 ok, 1 the workflow failed, 2 usage or operational error, "
                           "130 interrupted.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log the runtime's info messages and tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (run, inspect, compile, deploy, images, local_aws, graph, workflows, ui, callbacks, durable_callbacks,
                    stop, redrive, serve, versions, ramp):
        command.register(sub)
    return parser


def _workflow_file_instead_of_folder(args: argparse.Namespace) -> str | None:
    """A command given `…/unum-workflow.json` where it wants the folder: say which folder."""
    for name in ("workflow", "folder", "statemachine"):
        value = getattr(args, name, None)
        if isinstance(value, str) and Path(value).name == WORKFLOW_FILE and Path(value).is_file():
            folder = Path(value).parent
            return (f"{value} is the workflow's definition file: pass its folder instead "
                    f"({folder.as_posix() if str(folder) != '.' else '.'})")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    console = Console()
    route_logs(console, verbose=args.verbose)
    problem = _workflow_file_instead_of_folder(args)
    if problem is not None:
        console.message(f"error: {problem}")
        return EXIT_USAGE
    try:
        with raised():  # Ctrl-C as builder.commands.interrupts.Interrupted: the exit code stays 130
            code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows up here, not at exit
        return code
    except WorkflowFailed as exc:
        console.message(f"error: {exc}")
        return EXIT_FAILED
    except UnumError as exc:
        console.message(f"error: {exc}")
        return EXIT_USAGE
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE
    except OSError as exc:  # a path that cannot be read or written, wherever a command met it
        console.message(f"error: {_describe(exc)}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        console.message("interrupted")
        return EXIT_INTERRUPTED


def _describe(exc: OSError) -> str:
    where = exc.filename if exc.filename is not None else None
    what = exc.strerror or str(exc)
    return f"{where}: {what}" if where is not None else what


def _silence_stdout() -> None:
    """The reader closed stdout: point it at /dev/null so the interpreter's last flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
