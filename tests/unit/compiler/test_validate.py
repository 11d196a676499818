"""Static validation: each invalid definition is rejected naming the state (with its nesting
path) and the field."""

from __future__ import annotations

import pytest

from builder.compiler.plan import plan
from builder.compiler.validate import validate
from unum_entry.errors import AslDefinitionError

pytestmark = pytest.mark.unit

TASK = {"Type": "Task", "Resource": "F"}


def sm(states: dict, start: str = "A", **top) -> dict:
    return {"StartAt": start, "States": states, **top}


@pytest.mark.parametrize("doc, state, field, problem", [
    (sm({"A": {"Type": "Pass"}}), "A", "Next", "needs Next or"),
    (sm({"A": {"Type": "Pass", "Next": "B"}}), "A", "Next", "unknown state 'B'"),
    (sm({"A": {"Type": "Pass", "End": True}, "B": {"Type": "Pass", "End": True}}), "B", "<state>", "unreachable"),
    (sm({"A": {"Type": "Pass", "End": True}}, start="Z"), None, "StartAt", "unknown state 'Z'"),
    (sm({"A": {"Type": "Lambda", "End": True}}), "A", "Type", "expected one of"),
    (sm({"A": {**TASK, "End": True, "TimeoutSeconds": "ten"}}), "A", "TimeoutSeconds", "integer >= 1"),
    (sm({"A": {**TASK, "End": True, "InputPath": "input"}}), "A", "InputPath", "starting with '$'"),
    (sm({"A": {"Type": "Pass", "End": True, "Output": "{% 1 %}"}}), "A", "Output", "JSONata field"),
    (sm({"A": {"Type": "Pass", "End": True, "InputPath": "$.a"}}, QueryLanguage="JSONata"), "A", "InputPath", "JSONPath field"),
    (sm({"A": {"Type": "Choice", "Choices": [{"Variable": "$.x", "NumericEquals": "1", "Next": "A"}]}}),
     "A", "Choices[0].NumericEquals", "must be a finite number"),
    (sm({"A": {"Type": "Choice", "Choices": [], "Default": "A"}}), "A", "Choices", "non-empty list"),
    (sm({"A": {**TASK, "End": True, "Retry": [{"ErrorEquals": ["States.ALL"]}, {"ErrorEquals": ["X"]}]}}),
     "A", "Retry[0].ErrorEquals", "States.ALL must appear alone"),
    (sm({"A": {**TASK, "End": True, "Retry": [{"ErrorEquals": ["X"], "BackoffRate": 0.5}]}}), "A", "Retry[0].BackoffRate", ">= 1.0"),
    (sm({"A": {**TASK, "End": True, "Catch": [{"ErrorEquals": ["X"]}]}}), "A", "Catch[0].Next", "needs Next"),
    (sm({"A": {"Type": "Succeed", "Next": "A"}}), "A", "Next", "not a field of a Succeed state"),
    (sm({"A": {"Type": "Wait", "End": True}}), "A", "Seconds", "needs one of"),
    (sm({"A": {"Type": "Parallel", "End": True, "Branches": [
        {"StartAt": "B", "States": {"B": {"Type": "Pass", "Next": "C"}}}]}}), "A/Branches[0]/B", "Next", "unknown state 'C'"),
    (sm({"A": {"Type": "Map", "End": True, "ItemProcessor": {"StartAt": "B", "States": {
        "B": {**TASK, "End": True, "Resource": "arn:aws:states:::dynamodb:putItem"}}}}}), "A/ItemProcessor/B", "Resource", "not supported"),
    (sm({"A": {"Type": "Map", "End": True, "ItemReader": {}, "ItemProcessor": {"StartAt": "B", "States": {
        "B": {"Type": "Pass", "End": True}}}}}), "A", "ItemReader", "not supported"),
    (sm({"A": {"Type": "Pass", "Next": "B"}, "B": {"Type": "Parallel", "End": True, "Branches": [
        {"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}}]}}), "B/Branches[0]/A", "<name>", "unique"),
    (sm({"A": {"Type": "Pass", "End": True, "Parameters": {"x.$": "$.a[?(@"}}}), "A", "Parameters", ""),
])
def test_invalid_definitions_name_state_and_field(doc: dict, state: str | None, field: str, problem: str) -> None:
    with pytest.raises(AslDefinitionError) as caught:
        validate(doc, "sm.json")
    error = caught.value
    assert (error.state, error.field.startswith(field), problem in error.problem) == (state, True, True), str(error)


def test_folding_puts_pass_states_into_the_next_task_and_a_start_choice_into_a_router() -> None:
    doc = sm({"A": {"Type": "Pass", "Next": "B"}, "B": {**TASK, "Next": "C"},
              "C": {"Type": "Choice", "Choices": [{"Variable": "$.x", "BooleanEquals": True, "Next": "B2"}], "Default": "D"},
              "B2": {**TASK, "Next": "C"}, "D": {"Type": "Succeed"}})
    layout = plan(validate(doc, "sm.json"))
    assert sorted(layout.functions) == ["B", "B2"]
    assert layout.functions["B"].head == "A" and layout.entry == "B"
    assert ("goto", "B2") in layout.functions["B"].exits and ("end", None) in layout.functions["B"].exits

    starts_with_choice = sm({"C": {"Type": "Choice", "Choices": [{"Variable": "$.x", "BooleanEquals": True, "Next": "B"}],
                                   "Default": "B2"}, "B": {**TASK, "End": True}, "B2": {**TASK, "End": True}}, start="C")
    layout = plan(validate(starts_with_choice, "sm.json"))
    assert sorted(layout.functions) == ["B", "B2", "C"] and layout.entry == "C"
