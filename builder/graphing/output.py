"""Write a `Graph` in the format the user asked for, to a file or stdout (shared by `graph`,
`inspect --graph` and the web page)."""

from __future__ import annotations

import enum
import sys
from pathlib import Path

from builder.graphing.dot import ImageFormat, render, to_dot
from builder.graphing.mermaid import to_mermaid
from builder.graphing.model import Graph
from unum_entry.errors import UnumError


class GraphFormat(str, enum.Enum):
    MERMAID = "mermaid"
    DOT = "dot"
    SVG = "svg"
    PNG = "png"


def encode_graph(graph: Graph, fmt: GraphFormat) -> bytes:
    """The graph as the bytes of `fmt` (SVG/PNG through Graphviz's `dot`)."""
    if fmt is GraphFormat.MERMAID:
        return to_mermaid(graph).encode()
    if fmt is GraphFormat.DOT:
        return to_dot(graph).encode()
    return render(to_dot(graph), ImageFormat(fmt.value))


def write_graph(graph: Graph, fmt: GraphFormat, out: str | None) -> None:
    """Write to `out` (a file path) or stdout. PNG to a terminal is refused (binary)."""
    if out is None and fmt is GraphFormat.PNG and sys.stdout.isatty():
        raise UnumError("--format png writes binary data: pass --out FILE.png (or redirect stdout)")
    data = encode_graph(graph, fmt)
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        Path(out).write_bytes(data)
    except OSError as exc:
        raise UnumError(f"--out {out}: cannot write: {exc.strerror or exc}") from exc
    print(f"wrote {fmt.value} graph of {graph.name} to {out}", file=sys.stderr)
