"""`python -m builder graph`: a workflow folder or a Step Functions state machine as a picture
(Mermaid text by default; DOT; SVG/PNG via Graphviz)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from builder.graphing.output import GraphFormat

if TYPE_CHECKING:
    from builder.graphing.states import StateView


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

    if args.view == "states":
        write_state_view(load_state_view(args.workflow), args.graph_format, args.out)
        return 0
    write_graph(load_graph(args.workflow), args.graph_format, args.out)
    return 0


def load_state_view(source: str) -> StateView:
    """The state view of a state machine file (or a folder holding one); one line otherwise."""
    from pathlib import Path

    from builder.compiler.load import find_definition, load_definition
    from builder.compiler.validate import validate
    from builder.graphing.states import state_view
    from unum_entry.errors import UnumError

    path = Path(source)
    found = find_definition(path) if path.is_dir() else (path if path.is_file() else None)
    if found is None:  # an IR workflow folder (a compiled one keeps its statemachine.json: drawn)
        raise UnumError(f"--view states: {source} is not a state machine (a .json/.yaml definition, or a folder "
                        "holding one); an IR workflow has functions only (--view functions)")
    validate(load_definition(found), str(found))
    doc = load_definition(found)
    return state_view(doc, found.resolve().parent.name if found.stem.lower().startswith("statemachine")
                      else found.stem.split(".")[0])


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
    it entered green, the Task of an invocation that failed red (builder.commands.inspect_history)."""
    from builder.graphing.output import write_state_view

    view, ran, failed = run_path(store, args.workflow_id, source)
    write_state_view(view, args.graph_format, args.out, ran=ran, failed=failed)


def run_path(store: Any, workflow_id: str, source: str) -> tuple[StateView, set[str], set[str]]:
    """The state view of a run's state machine and the path it took, from its history: the
    states it entered, and (if it failed) the states of the invocation that failed it."""
    from builder.commands.inspect_history import history_document
    from unum_entry.outcome import read_outcome

    view = load_state_view(source)
    outcome = read_outcome(store, workflow_id)
    document = history_document(store, workflow_id, str(outcome.status), outcome.failure, source)
    ran = {e["state"] for e in document["events"] if "state" in e}
    failing = {(e.get("function"), e.get("index")) for e in document["events"] if e["type"] == "LambdaFunctionFailed"}
    failed = {e["state"] for e in document["events"] if outcome.failure is not None and "state" in e
              and e["type"].endswith("StateEntered") and (e.get("function"), e.get("index")) in failing}
    return view, ran - failed, failed
