"""The graph of a workflow: functions as nodes, the IR's transitions as edges.

Edges carry what kind of transition they are (`EdgeKind`), the condition that guards them
(a short label, None when unconditional) and whether they close a cycle (`loop`: a back edge
found by a depth-first walk from the entry). For a compiled state machine, each node also
lists the states its function hosts (a cluster in the pictures).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from unum_entry.ir import FunctionIR

END = "(end)"     # pseudo-node: the workflow succeeds here (an IR `succeed`)
FAIL = "(fail)"   # pseudo-node: the workflow fails here (an IR `fail`)


class EdgeKind(str, enum.Enum):
    """What one edge does."""

    INVOKE = "invoke"
    MAP = "map"
    FAN_OUT = "fan-out"
    FAN_IN = "fan-in"
    SUCCEED = "succeed"
    FAIL = "fail"


class NodeState(str, enum.Enum):
    """What a store shows for one function of one workflow (`builder.graphing.status`)."""

    NOT_STARTED = "not started"   # nothing invoked it (yet)
    RUNNING = "running"           # invoked, not committed, the workflow has not ended
    COMMITTED = "committed"       # every invocation the store shows has committed (workflow running)
    RETAINED = "retained"         # committed; the workflow has ended, kept until its TTL for duplicates
    FAILED = "failed"             # the workflow's failure record names this function


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: EdgeKind
    condition: str | None = None   # a short label of the `when` rule
    loop: bool = False             # closes a cycle (`next`)
    note: str | None = None        # e.g. "neighbour +1" for a neighbour fan-in

    @property
    def label(self) -> str:
        """What a picture writes on the edge."""
        parts = [] if self.kind in (EdgeKind.INVOKE, EdgeKind.SUCCEED, EdgeKind.FAIL) else [self.kind.value]
        if self.note:
            parts.append(self.note)
        if self.loop:
            parts.append("loop")
        if self.condition:
            parts.append(f"[{self.condition}]")
        return " ".join(parts)


@dataclass(frozen=True)
class Node:
    name: str
    states: tuple[str, ...] = ()   # the state-machine states this function hosts (empty for IR workflows)
    state_edges: tuple[tuple[str, str], ...] = ()   # transitions between those states
    detail: str = ""               # e.g. "2/3 committed" when coloured by a store


@dataclass
class Graph:
    """A workflow's graph. `nodes` in a stable order (entry first, then by name)."""

    name: str
    entry: str
    nodes: dict[str, Node]
    edges: list[Edge]
    states: dict[str, NodeState] = field(default_factory=dict)   # filled by builder.graphing.status
    programs: dict[str, FunctionIR] = field(default_factory=dict)  # each function's IR (not drawn)

    def edge_set(self) -> set[tuple[str, str, EdgeKind]]:
        """(source, target, kind) of every edge: what tests compare."""
        return {(e.source, e.target, e.kind) for e in self.edges}
