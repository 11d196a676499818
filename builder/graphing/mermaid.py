"""A `Graph` as Mermaid flowchart text (`flowchart TD`), the format GitHub and most Markdown
viewers draw. Functions hosting state-machine states become subgraphs; node states (when the
graph was coloured from a store) become `style` lines."""

from __future__ import annotations

from builder.graphing.model import END, FAIL, EdgeKind, Graph, Node
from builder.graphing.style import BOLD, DASHED, FILL, STROKE


def to_mermaid(graph: Graph) -> str:
    ids = {name: f"n{i}" for i, name in enumerate(graph.nodes)}
    lines = ["flowchart TD", f"  %% {graph.name}: entry {graph.entry}"]
    for name, node in graph.nodes.items():
        lines.extend(_node(ids[name], node))
    for edge in graph.edges:
        arrow = "-.->" if edge.loop or edge.kind in DASHED else ("==>" if edge.kind in BOLD else "-->")
        label = f'|"{_text(edge.label)}"|' if edge.label else ""
        lines.append(f"  {ids[edge.source]} {arrow}{label} {ids[edge.target]}")
    for name, state in graph.states.items():
        if name in ids:
            lines.append(f"  style {ids[name]} fill:{FILL[state]},stroke:{STROKE[state]}")
    return "\n".join(lines) + "\n"


def _node(node_id: str, node: Node) -> list[str]:
    label = _text(node.name + (f" ({node.detail})" if node.detail else ""))
    if node.name in (END, FAIL):
        return [f'  {node_id}(("{label}"))']
    if not node.states:
        return [f'  {node_id}["{label}"]']
    lines = [f'  subgraph {node_id}["{label}"]']
    for j, state in enumerate(node.states):
        lines.append(f'    {node_id}_s{j}("{_text(state)}")')
    index = {state: j for j, state in enumerate(node.states)}
    lines.extend(f"    {node_id}_s{index[a]} --> {node_id}_s{index[b]}" for a, b in node.state_edges)
    lines.append("  end")
    return lines


def _text(value: str) -> str:
    """Mermaid label text: quotes and angle brackets as entities (labels are quoted)."""
    return value.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


__all__ = ["EdgeKind", "to_mermaid"]
