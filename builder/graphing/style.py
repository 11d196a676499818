"""How pictures draw node states and edge kinds (shared by the Mermaid and DOT writers)."""

from __future__ import annotations

from builder.graphing.model import EdgeKind, NodeState

FILL = {
    NodeState.NOT_STARTED: "#ffffff",
    NodeState.RUNNING: "#9fc5f8",
    NodeState.COMMITTED: "#93d37c",
    NodeState.RETAINED: "#d9ead3",
    NodeState.FAILED: "#f28b82",
}
STROKE = {
    NodeState.NOT_STARTED: "#888888",
    NodeState.RUNNING: "#1a5fb4",
    NodeState.COMMITTED: "#2e7d32",
    NodeState.RETAINED: "#6a9f58",
    NodeState.FAILED: "#b3261e",
}
DASHED = {EdgeKind.FAN_IN}            # joins: drawn dashed
BOLD = {EdgeKind.MAP, EdgeKind.FAN_OUT}  # fan-outs: drawn thick
