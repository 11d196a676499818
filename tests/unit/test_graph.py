"""`builder.graphing`: the examples' graphs have exactly the edges their IR describes, and the
Mermaid / DOT writers draw every node and edge."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.graphing.build import condition_label, load_graph
from builder.graphing.dot import to_dot
from builder.graphing.mermaid import to_mermaid
from builder.graphing.model import END, FAIL, EdgeKind, NodeState
from unum_entry.errors import UnumError

pytestmark = pytest.mark.unit

IMAGES = Path(__file__).resolve().parents[2] / "images"
I, M, FO, FI, S, F = EdgeKind.INVOKE, EdgeKind.MAP, EdgeKind.FAN_OUT, EdgeKind.FAN_IN, EdgeKind.SUCCEED, EdgeKind.FAIL

EXPECTED = {
    "chain": {("Hello", "Shout", I), ("Shout", "Sign", I)},
    "parallel": {("Upload", b, FO) for b in ("Resize", "DetectObjects", "ExtractMetadata")}
                | {(b, "Combine", FI) for b in ("Resize", "DetectObjects", "ExtractMetadata")},
    "map-aggregate": {("Split", "Measure", M), ("Measure", "Summarize", FI)},
    "branch": {("Validate", "Approve", I), ("Validate", "Reject", I)},
    "loop": {("Step", "Done", I), ("Step", "Step", I)},
    "fold": {("Parse", "Post", M), ("Post", "Balance", FI), ("Balance", "Balance", FI), ("Balance", "Statement", I)},
    "neighbour": {("Split", "Encode", M), ("Encode", "Rebase", FI), ("Rebase", "Rebase", FI), ("Rebase", "Final", I)},
    "asl-order": {("Received", "Price", M), ("Price", "PriceLines", FI),
                  ("Received", "ReserveStock", FO), ("Received", "ChargeCard", FO),  # an empty Map completes in place
                  ("PriceLines", "ReserveStock", FO), ("PriceLines", "ChargeCard", FO),
                  ("ReserveStock", "Ship", FI), ("ChargeCard", "Ship", FI), ("Ship", END, S), ("Ship", FAIL, F)},
}


@pytest.mark.parametrize("example", sorted(EXPECTED))
def test_example_edges(example):
    graph = load_graph(IMAGES / example)
    assert graph.edge_set() == EXPECTED[example]
    assert next(iter(graph.nodes)) == graph.entry


def test_branch_edges_carry_their_condition():
    graph = load_graph(IMAGES / "branch")
    by_target = {e.target: e for e in graph.edges}
    assert by_target["Approve"].condition.startswith('$.status == "valid" and ($.total <= 1000 or')
    assert by_target["Reject"].condition is None  # the fall-through


def test_loops_are_the_back_edges():
    loop = {(e.source, e.target): e.loop for e in load_graph(IMAGES / "loop").edges}
    assert loop == {("Step", "Done"): False, ("Step", "Step"): True}
    neighbour = {(e.source, e.target): (e.loop, e.note) for e in load_graph(IMAGES / "neighbour").edges}
    assert neighbour[("Rebase", "Rebase")] == (True, "neighbour +1")
    assert neighbour[("Encode", "Rebase")] == (False, "neighbour +0")


def test_state_machine_states_are_grouped_into_their_functions():
    graph = load_graph(IMAGES / "asl-order" / "statemachine.json")
    hosts = {name: node.states for name, node in graph.nodes.items() if node.states}
    assert hosts == {"Received": ("Received",), "Price": ("Price",), "PriceLines": ("PriceLines", "Total"),
                     "ReserveStock": ("ReserveStock",), "ChargeCard": ("ChargeCard",),
                     "Ship": ("ReserveAndCharge", "Ship", "Rejected", "Summary")}
    assert set(graph.nodes["Ship"].state_edges) == {("ReserveAndCharge", "Ship"), ("ReserveAndCharge", "Rejected"),
                                                    ("Ship", "Summary")}
    # an edge between functions is labelled with the state it goes to
    assert {e.condition for e in graph.edges if e.kind is FO} == {"ReserveAndCharge"}


def test_condition_labels():
    assert condition_label({"Variable": "$.n", "NumericLessThanEquals": 1}) == "$.n <= 1"
    assert condition_label({"Not": {"Variable": "$.x", "IsPresent": True}}) == "not $.x is present"
    assert condition_label({"Or": [{"Variable": "$.a", "BooleanEquals": True},
                                   {"Variable": "$.b", "StringEqualsPath": "$.c"}]}) == "$.a == true or $.b == $.c"
    assert len(condition_label({"And": [{"Variable": "$.long_name", "StringEquals": "x" * 50}] * 3})) == 80


def test_mermaid_and_dot_draw_every_node_and_edge():
    graph = load_graph(IMAGES / "parallel")
    graph.states = {"Upload": NodeState.COMMITTED, "Resize": NodeState.FAILED}
    mermaid = to_mermaid(graph)
    assert mermaid.startswith("flowchart TD\n")
    assert sum(" ==>" in line for line in mermaid.splitlines()) == 3   # fan-out: thick
    assert sum(" -.->" in line for line in mermaid.splitlines()) == 3  # fan-in: dashed
    assert "style n0 fill:#93d37c" in mermaid
    dot = to_dot(graph)
    assert dot.count(" -> ") == 6 + 1  # the edges, and the legend's one invisible link
    assert 'label="failed"' in dot


def test_a_path_that_is_no_workflow(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(UnumError, match="expected a workflow folder or a state machine file"):
        load_graph(tmp_path / "notes.txt")
    with pytest.raises(UnumError, match="neither a workflow folder"):
        load_graph(tmp_path)
