"""`python -m builder graph`: a workflow folder or a Step Functions state machine as a picture
(Mermaid text by default; DOT; SVG/PNG via Graphviz)."""

from __future__ import annotations

import argparse
from typing import Any

from builder.graphing.output import GraphFormat


def add_format_options(parser: argparse.ArgumentParser, *, format_flag: str = "--format") -> None:
    """The `--format` and `--out` options of every command that writes a graph."""
    parser.add_argument(format_flag, dest="graph_format", type=_graph_format, choices=list(GraphFormat),
                        default=None, metavar="{" + ",".join(f.value for f in GraphFormat) + "}",
                        help="mermaid (text for Markdown), dot, or svg/png (need Graphviz's dot); default: "
                             "from --out's extension (.svg, .png, .dot, .mmd), else mermaid")
    parser.add_argument("--out", default=None, help="write to this file (default: stdout)")
    parser.add_argument("--view", choices=("functions", "states"), default="functions",
                        help="functions (default: what unum deploys, the states each hosts) or states (a state "
                             "machine as the Step Functions console draws it: definition order, Map/Parallel "
                             "boxes, Choice and Catch labels)")


def _graph_format(value: str) -> GraphFormat:
    try:
        return GraphFormat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(f.value for f in GraphFormat)}, "
                                         f"found {value!r}") from None


def cmd_graph(args: argparse.Namespace) -> int:
    from builder.graphing.build import load_graph
    from builder.graphing.output import write_graph, write_state_view
    from builder.runs.path import load_state_view

    if args.view == "states":
        write_state_view(load_state_view(args.workflow), args.graph_format, args.out)
        return 0
    write_graph(load_graph(args.workflow), args.graph_format, args.out)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("graph", help="draw a workflow or state machine: functions, invoke/map/fan-out/fan-in/branch/loop edges")
    parser.add_argument("workflow", help="workflow folder, or a state machine file (.json, .asl.json, .yaml) or a folder holding one")
    add_format_options(parser)
    parser.set_defaults(func=cmd_graph)


def add_inspect_options(parser: argparse.ArgumentParser) -> None:
    """`inspect --graph [WORKFLOW] [--format …] [--out FILE]`."""
    parser.add_argument("--graph", nargs="?", const="", default=None, metavar="WORKFLOW",
                        help="draw the workflow coloured by what the store holds (committed, running, failed, "
                             "retained) instead of the JSON report; WORKFLOW: its folder or state machine "
                             "(default: the folder its run recorded)")
    add_format_options(parser)


def write_inspect_graph(args: argparse.Namespace, store: object, folder: str | None) -> None:
    """The graph of `args.workflow_id`'s workflow, coloured by the replay of its run."""
    from builder.graphing.build import load_graph
    from builder.graphing.output import write_graph
    from builder.graphing.status import colour, replay
    from unum_entry.errors import UnumError

    source = args.graph or folder
    if not source:
        raise UnumError(f"inspect --graph: the store has no record of where {args.workflow_id} was run from; "
                        "pass its workflow folder: --graph FOLDER")
    if args.view == "states":
        write_run_states(args, store, source)
        return
    graph = load_graph(source)
    write_graph(colour(graph, replay(graph, store, args.workflow_id)), args.graph_format, args.out)  # type: ignore[arg-type]


def write_run_states(args: argparse.Namespace, store: Any, source: str) -> None:
    """The state view of the run's state machine, its path coloured from its history: the states
    it entered green, the Task of an invocation that failed red (builder.runs.path)."""
    from builder.graphing.output import write_state_view
    from builder.runs.path import run_path

    view, ran, failed = run_path(store, args.workflow_id, source)
    write_state_view(view, args.graph_format, args.out, ran=ran, failed=failed)
