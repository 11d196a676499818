"""Write a `Graph` in the format the user asked for, to a file or stdout (shared by `graph`,
`inspect --graph` and the web page)."""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from builder.graphing.dot import ImageFormat, render, to_dot
from builder.graphing.mermaid import to_mermaid
from builder.graphing.model import Graph
from unum_entry.errors import UnumError

if TYPE_CHECKING:
    from builder.graphing.states import StateView


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


_BY_EXTENSION = {".svg": GraphFormat.SVG, ".png": GraphFormat.PNG, ".dot": GraphFormat.DOT, ".gv": GraphFormat.DOT,
                 ".mmd": GraphFormat.MERMAID, ".mermaid": GraphFormat.MERMAID}


def resolve_format(fmt: GraphFormat | None, out: str | None) -> GraphFormat:
    """The format to write: `fmt` when given, else the one `out`'s extension names (.svg, .png,
    .dot/.gv, .mmd/.mermaid; as Graphviz's `-o` users expect), else Mermaid. A given format
    that contradicts an image extension (`--format mermaid --out run.svg`) is an error."""
    named = _BY_EXTENSION.get(Path(out).suffix.lower()) if out else None
    if fmt is None:
        return named or GraphFormat.MERMAID
    if named in (GraphFormat.SVG, GraphFormat.PNG) and named is not fmt:
        raise UnumError(f"--out {out}: --format {fmt.value} does not write {named.value.upper()} "
                        f"(drop --format: the extension picks {named.value})")
    return fmt


def write_graph(graph: Graph, fmt: GraphFormat | None, out: str | None) -> None:
    """Write to `out` (a file path) or stdout, in `fmt` (None: from `out`'s extension,
    `resolve_format`). PNG to a terminal is refused (binary)."""
    fmt = resolve_format(fmt, out)
    write_encoded(fmt, out, graph.name, lambda: encode_graph(graph, fmt))


def write_encoded(fmt: GraphFormat, out: str | None, name: str, encode: Callable[[], bytes]) -> None:
    """Write the bytes `encode()` makes in `fmt` to `out` or stdout (PNG to a terminal refused)."""
    if out is None and fmt is GraphFormat.PNG and sys.stdout.isatty():
        raise UnumError("--format png writes binary data: pass --out FILE.png (or redirect stdout)")
    data = encode()
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        Path(out).write_bytes(data)
    except OSError as exc:
        raise UnumError(f"--out {out}: cannot write: {exc.strerror or exc}") from exc
    print(f"wrote {fmt.value} graph of {name} to {out}", file=sys.stderr)


def write_state_view(view: StateView, fmt: GraphFormat | None, out: str | None, *,
                     ran: Collection[str] = (), failed: Collection[str] = ()) -> None:
    """Write a state machine's state view (builder.graphing.states) like `write_graph`."""
    from builder.graphing.states import states_to_dot, states_to_mermaid

    fmt = resolve_format(fmt, out)

    def encode() -> bytes:
        if fmt is GraphFormat.MERMAID:
            return states_to_mermaid(view, ran=ran, failed=failed).encode()
        dot_text = states_to_dot(view, ran=ran, failed=failed)
        return dot_text.encode() if fmt is GraphFormat.DOT else render(dot_text, ImageFormat(fmt.value))
    write_encoded(fmt, out, view.name, encode)
