"""A `Graph` as Graphviz DOT, and DOT rendered to SVG or PNG by Graphviz's `dot` program.

Functions hosting state-machine states become clusters (`compound=true`: edges between
functions end at the cluster's border). `render` needs `dot` on PATH (Debian: graphviz);
without it, GraphvizMissing says so in one line.
"""

from __future__ import annotations

import enum
import shutil
import subprocess

from builder.graphing.model import END, FAIL, Graph, NodeState
from builder.graphing.style import BOLD, DASHED, FILL, STROKE
from unum_entry.errors import UnumError

RENDER_TIMEOUT = 60  # seconds for one `dot` run
NODE_AND_EDGE_DEFAULTS = (  # every DOT graph's (this one's and builder.graphing.states')
    '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", color="#888888", fontname=Helvetica, fontsize=11];',
    '  edge [fontname=Helvetica, fontsize=9, color="#444444"];')


class GraphError(UnumError):
    """A graph could not be written or rendered."""


class GraphvizMissing(GraphError):
    """Graphviz's `dot` program is not installed."""


class ImageFormat(str, enum.Enum):
    """What `render` produces."""

    SVG = "svg"
    PNG = "png"


def to_dot(graph: Graph) -> str:
    ids = {name: f"n{i}" for i, name in enumerate(graph.nodes)}
    anchor = {name: (f"{ids[name]}_s0" if node.states else ids[name]) for name, node in graph.nodes.items()}
    lines = [f"digraph {quoted(graph.name)} {{",
             "  graph [rankdir=TB, compound=true, fontname=Helvetica, fontsize=11];", *NODE_AND_EDGE_DEFAULTS]
    for name, node in graph.nodes.items():
        state = graph.states.get(name)
        label = name + (f"\n{node.detail}" if node.detail else "")
        colours = "" if state is None else f', fillcolor="{FILL[state]}", color="{STROKE[state]}", penwidth=2'
        if name in (END, FAIL):
            lines.append(f"  {ids[name]} [label={quoted(name)}, shape=circle, fontsize=9];")
        elif not node.states:
            lines.append(f"  {ids[name]} [label={quoted(label)}{colours}];")
        else:
            fill = FILL[state] if state is not None else "#f5f5f5"
            lines.append(f"  subgraph cluster_{ids[name]} {{")
            lines.append(f'    label={quoted(label)}; style="rounded,filled"; fillcolor="{fill}"; '
                         f'color="{STROKE.get(state, "#888888") if state else "#888888"}";')
            index = {s: j for j, s in enumerate(node.states)}
            for j, s in enumerate(node.states):
                lines.append(f'    {ids[name]}_s{j} [label={quoted(s)}, shape=box, style="filled", fillcolor="#ffffff", fontsize=10];')
            for a, b in node.state_edges:
                lines.append(f"    {ids[name]}_s{index[a]} -> {ids[name]}_s{index[b]} [color=\"#999999\", arrowsize=0.6];")
            lines.append("  }")
    for edge in graph.edges:
        attrs = []
        if edge.label:
            attrs.append(f"label={quoted(edge.label)}")
        if edge.loop or edge.kind in DASHED:
            attrs.append("style=dashed")
        elif edge.kind in BOLD:
            attrs.append("style=bold")
        if edge.source != edge.target:
            if graph.nodes[edge.source].states:
                attrs.append(f"ltail=cluster_{ids[edge.source]}")
            if graph.nodes[edge.target].states:
                attrs.append(f"lhead=cluster_{ids[edge.target]}")
        lines.append(f"  {anchor[edge.source]} -> {anchor[edge.target]} [{', '.join(attrs)}];")
    if graph.states:
        lines.extend(_legend(set(graph.states.values())))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _legend(shown: set[NodeState]) -> list[str]:
    items = [s for s in NodeState if s in shown]
    lines = ['  subgraph cluster_legend { label="legend"; fontsize=9; color="#cccccc";']
    for i, state in enumerate(items):
        lines.append(f'    legend{i} [label={quoted(state.value)}, fillcolor="{FILL[state]}", color="{STROKE[state]}", fontsize=9];')
    lines.extend(f"    legend{i} -> legend{i + 1} [style=invis];" for i in range(len(items) - 1))
    lines.append("  }")
    return lines


def render(dot_text: str, fmt: ImageFormat) -> bytes:
    """Run Graphviz's `dot` over `dot_text`. Raises GraphvizMissing / GraphError (one line)."""
    program = shutil.which("dot")
    if program is None:
        raise GraphvizMissing(f"--format {fmt.value} needs Graphviz's `dot`, which is not installed "
                              "(apt-get install graphviz, or localstack/setup.d/40-browser.sh); "
                              "--format mermaid or dot work without it")
    try:
        done = subprocess.run([program, f"-T{fmt.value}"], input=dot_text.encode(), capture_output=True,
                              timeout=RENDER_TIMEOUT, check=False)
    except subprocess.TimeoutExpired as exc:
        raise GraphError(f"graphviz `dot` did not finish within {RENDER_TIMEOUT} s") from exc
    if done.returncode != 0:
        first = (done.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[0]
        raise GraphError(f"graphviz `dot` failed (exit {done.returncode}): {first}")
    return done.stdout


def quoted(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
