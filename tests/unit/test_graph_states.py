"""A state machine drawn as the Step Functions console draws it (builder/graphing/states.py):
definition order, Map/Parallel boxes with their branches inside, Choice rules and Catch errors
on the edges, every end, and the path of a run coloured."""

from __future__ import annotations

import pytest

from builder.graphing.states import FAILED_FILL, RAN_FILL, state_view, states_to_dot, states_to_mermaid

pytestmark = pytest.mark.unit

MACHINE = {
    "StartAt": "Check",
    "States": {
        "Check": {"Type": "Choice", "Choices": [{"Variable": "$.n", "NumericGreaterThan": 10, "Next": "Big"}],
                  "Default": "Small"},
        "Big": {"Type": "Map", "ItemProcessor": {"StartAt": "Each", "States": {"Each": {"Type": "Task", "Resource": "x",
                                                                                      "End": True}}},
                "Next": "Done", "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Oops"}]},
        "Small": {"Type": "Parallel", "Branches": [
            {"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": "x", "End": True}}},
            {"StartAt": "B", "States": {"B": {"Type": "Pass", "End": True}}}], "Next": "Done"},
        "Done": {"Type": "Succeed"},
        "Oops": {"Type": "Fail", "Error": "E"},
    },
}


def test_states_in_definition_order_with_boxes_and_labels():
    view = state_view(MACHINE, "m")
    names = [view.states[sid][0] for sid in view.states]
    assert names == ["Start", "End", "Check", "Big", "Each", "Small", "A", "B", "Done", "Oops"]
    boxes = sorted((label, [view.states[s][0] for s in members], [view.containers[c][0] for c in children])
                   for label, members, children in view.containers.values())
    assert boxes == [("", ["Big"], ["each item"]), ("", ["Small"], ["branch 1", "branch 2"]),
                     ("branch 1", ["A"], []), ("branch 2", ["B"], []), ("each item", ["Each"], [])]
    edges = {(view.states[a][0], view.states[b][0], label) for a, b, label, _ in view.edges}
    assert ("Check", "Big", "$.n > 10") in edges and ("Check", "Small", "default") in edges
    assert ("Big", "Oops", "catch States.ALL") in edges and ("Done", "End", "") in edges
    assert ("Start", "Check", "") in edges and ("Big", "Each", "") in edges and ("Small", "B", "") in edges


def test_the_path_of_a_run_is_coloured():
    view = state_view(MACHINE, "m")
    dot = states_to_dot(view, ran={"Check", "Big"}, failed={"Each"})
    assert dot.count(RAN_FILL) == 2 and dot.count(FAILED_FILL) == 1
    mermaid = states_to_mermaid(view, ran={"Check"})
    assert mermaid.startswith("flowchart TD") and mermaid.count(f"fill:{RAN_FILL}") == 1
    import re
    assert 'st_end((("End")))' in mermaid  # `end` is Mermaid's keyword: never a node id
    assert not any(re.match(r"\s*end[(\[{]|.*--> end$", line) for line in mermaid.splitlines())
