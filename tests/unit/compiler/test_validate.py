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
        "B": {**TASK, "End": True, "Resource": "arn:aws:states:::dynamodb:query"}}}}}), "A/ItemProcessor/B", "Resource", "not supported"),
    (sm({"A": {"Type": "Map", "End": True, "ItemReader": {}, "ItemProcessor": {"StartAt": "B", "States": {
        "B": {"Type": "Pass", "End": True}}}}}), "A", "ItemReader.Resource", "expected arn:aws:states:::s3:getObject"),
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


MAP_BODY = {"ItemProcessor": {"StartAt": "B", "States": {"B": {"Type": "Pass", "End": True}}}}


@pytest.mark.parametrize("doc, state, field, problem", [
    (sm({"A": {"Type": "Map", "End": True, **MAP_BODY, "ItemBatcher": {"MaxItemsPerBatch": 2, "MaxItemsPerBatchPath": "$.n"}}}),
     "A", "ItemBatcher.MaxItemsPerBatchPath", "only one of MaxItemsPerBatch, MaxItemsPerBatchPath"),
    (sm({"A": {"Type": "Map", "End": True, **MAP_BODY, "ItemBatcher": {"MaxInputBytesPerBatch": 2,
                                                                       "MaxInputBytesPerBatchPath": "$.n"}}}),
     "A", "ItemBatcher.MaxInputBytesPerBatchPath", "only one of"),
    (sm({"A": {"Type": "Map", "End": True, **MAP_BODY, "ToleratedFailureCount": 1, "ToleratedFailureCountPath": "$.n"}}),
     "A", "ToleratedFailureCountPath", "only one of ToleratedFailureCount, ToleratedFailureCountPath"),
    (sm({"A": {"Type": "Map", "End": True, **MAP_BODY, "ToleratedFailurePercentage": 1,
               "ToleratedFailurePercentagePath": "$.n"}}), "A", "ToleratedFailurePercentagePath", "only one of"),
    (sm({"A": {**TASK, "End": True, "HeartbeatSeconds": 1, "HeartbeatSecondsPath": "$.h"}}), "A", "HeartbeatSecondsPath", "only one of"),
    (sm({"A": {"Type": "Pass", "End": True, "Parameters": {"x.$": "States.MathAdd(1,'-1')"}}}),
     "A", "Parameters.x.$", "must be a number, found a string ('-1')"),
    (sm({"A": {"Type": "Pass", "Next": "B"}, "B": {"Type": "Pass", "Next": "A"}}), None, "StartAt", "no terminal state"),
    (sm({"A": {"Type": "Parallel", "End": True, "Branches": [{"StartAt": "L", "States": {
        "L": {"Type": "Wait", "Seconds": 1, "Next": "L"}}}]}}), "A/Branches[0]", "Branches[0].StartAt", "no terminal state"),
    (sm({"A": {**TASK, "End": True, "Resource": "arn:aws:lambda:us-east-1:123456789012:function:F:"}}),
     "A", "Resource", "empty qualifier"),
    (sm({"A": {**TASK, "End": True, "Resource": "arn:aws:lambda:us-east-1:123456789012:function:F:bad!q"}}),
     "A", "Resource", "qualifier 'bad!q'"),
    (sm({"A": {**TASK, "End": True, "Resource": "arn:aws:lambda:us-east-1:123456789012:F"}}), "A", "Resource", "not a Lambda function ARN"),
    (sm({"A": {**TASK, "End": True, "Resource": "arn:aws:states:::lambda:invoke",
               "Parameters": {"FunctionName": "F:", "Payload.$": "$"}}}), "A", "Parameters.FunctionName", "empty qualifier"),
    (sm({"A": {**TASK, "End": True, "Resource": "arn:aws:states:::lambda:invoke",
               "Arguments": {"FunctionName": "{% $states.input.fn %}"}}}, QueryLanguage="JSONata"),
     "A", "Arguments.FunctionName", "dynamic FunctionName (a JSONata expression)"),
    (sm({"A": {**TASK, "End": True, "Resource": "${DoubleArn}"}}), "A", "Resource", "unresolved substitution ${DoubleArn}"),
    (sm({"A": {"Type": "Pass", "End": True, "Parameters": {"table": "${Table}"}}}), "A", "Parameters.table", "--substitution Table=VALUE"),
    (sm({"A": {**TASK, "End": True, "Resource": {"Fn::GetAtt": ["Double", "Arn"]}}}), "A", "Resource", "--substitution Double.Arn="),
])
def test_invalid_definitions_issue_11(doc: dict, state: str | None, field: str, problem: str) -> None:
    with pytest.raises(AslDefinitionError) as caught:
        validate(doc, "sm.json")
    error = caught.value
    assert (error.state, error.field, problem in error.problem) == (state, field, True), str(error)


@pytest.mark.parametrize("resource", ["F", "F:1", "F:$LATEST", "F:live", "123456789012:function:F:2",
                                      "arn:aws:lambda:us-east-1:123456789012:function:F",
                                      "arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:F:prod"])
def test_well_formed_lambda_names_and_arns_are_accepted(resource: str) -> None:
    validate(sm({"A": {**TASK, "End": True, "Resource": resource}}), "sm.json")


def test_a_jsonata_choice_condition_may_be_a_literal_boolean() -> None:
    validate(sm({"C": {"Type": "Choice", "Choices": [{"Condition": True, "Next": "D"}], "Default": "D"},
                 "D": {"Type": "Succeed"}}, start="C", QueryLanguage="JSONata"), "sm.json")


def test_substitutions_and_cloudformation_intrinsics_are_resolved_when_given(tmp_path) -> None:
    from builder.compiler.load import load_definition
    from builder.compiler.substitute import SubstitutionError, parse_substitutions

    path = tmp_path / "sm.json"
    path.write_text('{"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": "${Fn}", "Next": "W"},'
                    ' "W": {"Type": "Wait", "Seconds": ${Wait}, "Next": "B"},'
                    ' "B": {"Type": "Task", "Resource": {"Fn::GetAtt": ["Other", "Arn"]}, "Next": "C"},'
                    ' "C": {"Type": "Task", "Resource": {"Ref": "Third"}, "End": true}}}')
    values = parse_substitutions(["Fn=arn:aws:lambda:us-east-1:1:function:Double:live", "Wait=5",
                                  "Other.Arn=Other", "Third=Third:2"])
    doc = load_definition(path, values)
    validate(doc, str(path))
    assert [doc["States"][s].get("Resource", doc["States"][s].get("Seconds")) for s in "AWBC"] == [
        "arn:aws:lambda:us-east-1:1:function:Double:live", 5, "Other", "Third:2"]
    with pytest.raises(SubstitutionError, match="KEY=VALUE"):
        parse_substitutions(["novalue"])
    with pytest.raises(AslDefinitionError, match="unquoted"):
        load_definition(path, {})
