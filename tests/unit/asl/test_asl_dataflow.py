"""JSONPath data flow: one test per field (InputPath, Parameters, ResultSelector, ResultPath,
OutputPath, context object, Assign, Catch, Choice, the …Path fields), with the examples of the
AWS documentation ("Input and Output Processing", "ResultPath", "InputPath, Parameters and
ResultSelector", "Context object", "Passing data between states with variables")."""

from __future__ import annotations

from typing import Any

import pytest

from unum_entry.asl import paths
from unum_entry.asl.dataflow import (
    Scope,
    check_state_fields,
    error_output,
    evaluate_condition,
    resolve,
    state_input,
    state_output,
)
from unum_entry.errors import StatesRuntimeError

pytestmark = pytest.mark.unit

CONTEXT = {
    "Execution": {"Id": "arn:aws:states:us-east-1:123456789012:execution:sm:run-1", "Name": "run-1",
                  "StartTime": "2019-03-26T20:14:13.192Z", "Input": {"x": 1}},
    "State": {"Name": "Task1", "EnteredTime": "2019-03-26T20:14:13.192Z", "RetryCount": 0},
    "StateMachine": {"Id": "arn:aws:states:us-east-1:123456789012:stateMachine:sm", "Name": "sm"},
}
SCOPE = Scope(context=CONTEXT)


def run_task(state: dict[str, Any], raw: Any, handler: Any, scope: Scope = SCOPE) -> tuple[Any, Any, dict[str, Any]]:
    """(what the handler received, the state's output, variables after) for a Task state."""
    received = state_input(state, raw, scope)
    output, variables = state_output(state, raw, handler(received), scope)
    return received, output, variables


# --- InputPath / ResultPath / OutputPath ---------------------------------------------------------


def test_input_result_output_path_hello_world_example() -> None:
    state = {"Type": "Task", "InputPath": "$.lambda", "ResultPath": "$.data.lambdaresult", "OutputPath": "$.data"}
    raw = {"comment": "An input comment.", "data": {"val1": 23, "val2": 17}, "extra": "foo",
           "lambda": {"who": "AWS Step Functions"}}
    received, output, _ = run_task(state, raw, lambda event: f"Hello, {event['who']}!")
    assert received == {"who": "AWS Step Functions"}
    assert output == {"val1": 23, "val2": 17, "lambdaresult": "Hello, AWS Step Functions!"}
    assert raw["data"] == {"val1": 23, "val2": 17}  # the input is never mutated


def test_numbers_to_add_example() -> None:
    raw = {"title": "Numbers to add", "numbers": {"val1": 3, "val2": 4}}
    add = lambda numbers: numbers["val1"] + numbers["val2"]  # noqa: E731
    _, output, _ = run_task({"Type": "Task", "InputPath": "$.numbers", "ResultPath": "$.sum", "OutputPath": "$"}, raw, add)
    assert output == {"title": "Numbers to add", "numbers": {"val1": 3, "val2": 4}, "sum": 7}
    _, output, _ = run_task({"Type": "Task", "InputPath": "$.numbers", "ResultPath": "$.sum", "OutputPath": "$.sum"}, raw, add)
    assert output == 7


def test_input_path_selects_a_slice_and_null_discards() -> None:
    assert state_input({"Type": "Task", "InputPath": "$.a[0:2]"}, {"a": [1, 2, 3, 4]}, SCOPE) == [1, 2]
    assert state_input({"Type": "Task", "InputPath": None}, {"a": 1}, SCOPE) == {}
    with pytest.raises(StatesRuntimeError) as caught:
        state_input({"Type": "Task", "InputPath": "$.missing"}, {"a": 1}, SCOPE)
    assert (caught.value.error, caught.value.cause) == (
        "States.Runtime", "Invalid path '$.missing' : No results for path: $['missing']")  # AWS's wording


# The ResultPath page: input {"master": {"detail": [1, 2, 3]}}, a task returning "Hello, AWS Step Functions!".
RESULT_PATH_INPUT = {"comment": "This is a test of the input and output of a Task state.",
                     "details": "Default example", "who": "AWS Step Functions"}
HELLO = "Hello, AWS Step Functions!"


@pytest.mark.parametrize("result_path, expected", [
    ("$", HELLO),
    (None, RESULT_PATH_INPUT),
    ("$.taskresult", {**RESULT_PATH_INPUT, "taskresult": HELLO}),
    ("$.who", {**RESULT_PATH_INPUT, "who": HELLO}),
])
def test_result_path_forms(result_path: Any, expected: Any) -> None:
    _, output, _ = run_task({"Type": "Task", "ResultPath": result_path}, RESULT_PATH_INPUT, lambda _: HELLO)
    assert output == expected


def test_result_path_creates_missing_objects_and_indexes_arrays() -> None:
    raw = {"master": {"detail": [1, 2, 3]}}
    _, output, _ = run_task({"Type": "Task", "ResultPath": "$.master.detail"}, raw, lambda _: 6)
    assert output == {"master": {"detail": 6}}
    _, output, _ = run_task({"Type": "Task", "ResultPath": "$.master.more.sum"}, raw, lambda _: 6)
    assert output == {"master": {"detail": [1, 2, 3], "more": {"sum": 6}}}
    _, output, _ = run_task({"Type": "Task", "ResultPath": "$.master.detail[1]"}, raw, lambda _: 9)
    assert output == {"master": {"detail": [1, 9, 3]}}


def test_result_path_into_a_non_object_is_a_match_failure() -> None:
    with pytest.raises(StatesRuntimeError) as caught:
        run_task({"Type": "Task", "ResultPath": "$.who.name"}, RESULT_PATH_INPUT, lambda _: 1)
    assert caught.value.error == "States.ResultPathMatchFailure"


def test_output_path_null_and_missing() -> None:
    _, output, _ = run_task({"Type": "Task", "OutputPath": None}, {"a": 1}, lambda _: 2)
    assert output == {}
    with pytest.raises(StatesRuntimeError) as caught:
        run_task({"Type": "Task", "OutputPath": "$.nope"}, {"a": 1}, lambda _: 2)
    assert caught.value.error == "States.Runtime"


# --- Parameters / ResultSelector / context -----------------------------------------------------


def test_parameters_payload_template_documented_example() -> None:
    state = {"Type": "Task", "Parameters": {
        "comment": "Selecting what I care about.",
        "MyDetails": {"size.$": "$.product.details.size", "exists.$": "$.product.availability", "StaticValue": "foo"}}}
    raw = {"comment": "Example for Parameters.", "product": {
        "details": {"color": "blue", "size": "small", "material": "cotton"}, "availability": "in stock",
        "sku": "2317", "cost": "$23"}}
    assert state_input(state, raw, SCOPE) == {
        "comment": "Selecting what I care about.",
        "MyDetails": {"size": "small", "exists": "in stock", "StaticValue": "foo"}}


def test_parameters_after_input_path_and_inside_arrays() -> None:
    state = {"Type": "Pass", "InputPath": "$.inner", "Parameters": {"list": [{"v.$": "$.x"}, "lit"], "all.$": "$"}}
    assert state_input(state, {"inner": {"x": 5}}, SCOPE) == {"list": [{"v": 5}, "lit"], "all": {"x": 5}}


def test_parameters_missing_path_names_the_field() -> None:
    with pytest.raises(StatesRuntimeError) as caught:
        state_input({"Type": "Task", "Parameters": {"a": {"b.$": "$.nope"}}}, {"x": 1}, SCOPE)
    assert caught.value.error == "States.Runtime"
    # AWS's wording: the template key and the input
    assert caught.value.cause == "The JSONPath '$.nope' specified for the field 'b.$' could not be found in the input '{\"x\":1}'"


def test_context_object_in_parameters() -> None:
    state = {"Type": "Task", "Parameters": {"ExecutionID.$": "$$.Execution.Id", "state.$": "$$.State.Name",
                                            "whole.$": "$$.StateMachine"}}
    assert state_input(state, {}, SCOPE) == {"ExecutionID": CONTEXT["Execution"]["Id"], "state": "Task1",
                                             "whole": CONTEXT["StateMachine"]}


def test_map_item_context_in_item_selector() -> None:
    scope = Scope(context={**CONTEXT, "Map": {"Item": {"Index": 2, "Value": {"name": "c"}}}})
    selector = {"ContextIndex.$": "$$.Map.Item.Index", "ContextValue.$": "$$.Map.Item.Value", "constant.$": "$.k"}
    assert resolve(selector, {"k": "K"}, scope, field="ItemSelector") == {
        "ContextIndex": 2, "ContextValue": {"name": "c"}, "constant": "K"}
    # Map's Parameters (the older name of ItemSelector) is not applied to the Map state's input.
    assert state_input({"Type": "Map", "Parameters": selector, "InputPath": "$.in"}, {"in": [1]}, scope) == [1]


def test_result_selector_shapes_the_result_before_result_path() -> None:
    state = {"Type": "Task", "ResultSelector": {"ClusterId.$": "$.output.ClusterId", "ResourceType.$": "$.resourceType"},
             "ResultPath": "$.EMROutput"}
    result = {"resourceType": "elasticmapreduce", "resource": "createCluster.sync",
              "output": {"SdkHttpMetadata": {"HttpStatusCode": 200}, "ClusterId": "AKIAIOSFODNN7EXAMPLE"}}
    output, _ = state_output(state, {"in": 1}, result, SCOPE)
    assert output == {"in": 1, "EMROutput": {"ClusterId": "AKIAIOSFODNN7EXAMPLE", "ResourceType": "elasticmapreduce"}}


def test_result_selector_flattens_an_array_of_arrays() -> None:
    state = {"Type": "Parallel", "ResultSelector": {"flattenArray.$": "$[*][*]"}}
    output, _ = state_output(state, {}, [[1, 2, 3], [4, 5, 6]], SCOPE)
    assert output == {"flattenArray": [1, 2, 3, 4, 5, 6]}


# --- Pass, Choice, Wait, Succeed ---------------------------------------------------------------


def test_pass_result_and_result_path() -> None:
    state = {"Type": "Pass", "Result": {"x-datum": 0.381018, "y-datum": 622.2269926397355}, "ResultPath": "$.coords"}
    raw = {"georefOf": "Home"}
    output, _ = state_output(state, raw, None, SCOPE)
    assert output == {"georefOf": "Home", "coords": {"x-datum": 0.381018, "y-datum": 622.2269926397355}}


def test_pass_without_result_passes_its_parameters() -> None:
    state = {"Type": "Pass", "Parameters": {"v.$": "$.a"}, "ResultPath": "$.out"}
    output, _ = state_output(state, {"a": 1}, "ignored", SCOPE)
    assert output == {"a": 1, "out": {"v": 1}}


def test_choice_wait_succeed_output_their_effective_input() -> None:
    for kind in ("Choice", "Wait", "Succeed"):
        output, _ = state_output({"Type": kind, "InputPath": "$.a", "OutputPath": "$.b"}, {"a": {"b": 7}}, None, SCOPE)
        assert output == 7


# --- variables (Assign) ----------------------------------------------------------------------


def test_assign_in_task_sees_the_result_and_entry_values() -> None:
    scope = Scope(context=CONTEXT, variables={"x": 3, "a": 6})
    state = {"Type": "Task", "ResultSelector": {"price.$": "$.Payload.current_price"},
             "Assign": {"x.$": "$a", "nextX.$": "$x", "price.$": "$.price", "static": {"k": 1}, "n.$": "$$.State.Name"}}
    output, variables = state_output(state, {"in": 1}, {"Payload": {"current_price": 9.5}}, scope)
    assert output == {"price": 9.5}
    assert variables == {"x": 6, "a": 6, "nextX": 3, "price": 9.5, "static": {"k": 1}, "n": "Task1"}
    assert scope.variables == {"x": 3, "a": 6}  # the scope is not modified


def test_assign_in_choice_and_wait_sees_the_effective_input() -> None:
    _, variables = state_output({"Type": "Wait", "InputPath": "$.in", "Assign": {"w.$": "$.v"}}, {"in": {"v": 1}}, None, SCOPE)
    assert variables == {"w": 1}
    rule = {"Variable": "$.v", "NumericEquals": 1, "Next": "X", "Assign": {"matched.$": "$.v"}}
    assert evaluate_condition(rule, {"v": 1}, SCOPE)
    output, variables = state_output({"Type": "Choice", "Assign": rule["Assign"]}, {"v": 1}, None, SCOPE)
    assert output == {"v": 1} and variables == {"matched": 1}


def test_variables_in_paths_of_parameters_and_input_path() -> None:
    scope = Scope(context=CONTEXT, variables={"customerName": "María", "order": {"items": [{"id": 7}]}})
    state = {"Type": "Task", "Parameters": {"static": "Hello", "title.$": "$.title", "name.$": "$customerName",
                                            "not-evaluated": "$customerName", "id.$": "$order.items[0].id"}}
    assert state_input(state, {"title": "Doctor"}, scope) == {
        "static": "Hello", "title": "Doctor", "name": "María", "not-evaluated": "$customerName", "id": 7}
    assert state_input({"Type": "Task", "InputPath": "$order.items"}, {}, scope) == [{"id": 7}]
    with pytest.raises(StatesRuntimeError, match="not defined"):
        state_input({"Type": "Task", "Parameters": {"v.$": "$nobody"}}, {}, scope)


# --- Catch ------------------------------------------------------------------------------------


ERROR = {"Error": "java.lang.Exception", "Cause": "something failed"}


def test_catch_result_path_adds_the_error_output() -> None:
    catcher = {"ErrorEquals": ["java.lang.Exception"], "ResultPath": "$.error-info", "Next": "RecoveryState"}
    output, _ = error_output(catcher, {"foo": "bar"}, ERROR, SCOPE)
    assert output == {"foo": "bar", "error-info": ERROR}


def test_catch_default_replaces_the_input_and_null_keeps_it() -> None:
    assert error_output({"ErrorEquals": ["States.ALL"], "Next": "E"}, {"foo": "bar"}, ERROR, SCOPE)[0] == ERROR
    kept, _ = error_output({"ErrorEquals": ["States.ALL"], "Next": "E", "ResultPath": None}, {"foo": "bar"}, ERROR, SCOPE)
    assert kept == {"foo": "bar"}


def test_catch_assign_sees_the_error_output() -> None:
    catcher = {"ErrorEquals": ["States.ALL"], "Next": "E", "Assign": {"lastError.$": "$.Error"}}
    _, variables = error_output(catcher, {}, ERROR, Scope(context=CONTEXT, variables={"k": 1}))
    assert variables == {"k": 1, "lastError": "java.lang.Exception"}


# --- Choice rules ------------------------------------------------------------------------------


def test_choice_rules_with_context_and_variables() -> None:
    scope = Scope(context=CONTEXT, variables={"desired": 10, "limits": {"max": 3}})
    value = {"current_price": 8, "count": 3}
    assert evaluate_condition({"Variable": "$.current_price", "NumericLessThanEqualsPath": "$desired", "Next": "N"}, value, scope)
    assert evaluate_condition({"Variable": "$limits.max", "NumericEqualsPath": "$.count"}, value, scope)
    assert evaluate_condition({"And": [{"Variable": "$$.State.Name", "StringEquals": "Task1"},
                                       {"Not": {"Variable": "$desired", "NumericLessThan": 5}}]}, value, scope)
    with pytest.raises(StatesRuntimeError) as caught:
        evaluate_condition({"Variable": "$limits.min", "NumericEquals": 1}, value, scope)
    assert caught.value.error == "States.Runtime" and "$limits.min" in caught.value.cause


# --- resolve: the other fields ----------------------------------------------------------------


def test_resolve_path_fields_and_intrinsics_in_error_path() -> None:
    data = {"wait": 5, "until": "2016-03-14T01:59:00Z", "items": [1, 2], "err": "Bad", "n": 3}
    assert resolve("$.wait", data, SCOPE, field="SecondsPath") == 5
    assert resolve("$.until", data, SCOPE, field="TimestampPath") == "2016-03-14T01:59:00Z"
    assert resolve("$.items", data, SCOPE, field="ItemsPath") == [1, 2]
    assert resolve("$.err", data, SCOPE, field="ErrorPath") == "Bad"
    assert resolve("States.Format('{} failed {} times', $.err, $.n)", data, SCOPE, field="CausePath") == "Bad failed 3 times"
    assert resolve(10, data, SCOPE, field="Seconds") == 10  # literals pass through
    with pytest.raises(StatesRuntimeError):
        resolve("$.nope", data, SCOPE, field="SecondsPath")


# --- static checks ----------------------------------------------------------------------------


def fields(state: dict[str, Any]) -> list[str]:
    return [field for field, _ in check_state_fields(state, "JSONPath")]


def test_static_checks_accept_a_valid_state() -> None:
    state = {"Type": "Task", "InputPath": "$.a[0:2]", "OutputPath": "$$.Execution", "ResultPath": None,
             "Parameters": {"x.$": "$v.y", "z.$": "States.Array($.a)"}, "ResultSelector": {"r.$": "$.p"},
             "Assign": {"count.$": "States.MathAdd($count, 1)"},
             "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.err", "Next": "N"}]}
    assert check_state_fields(state, "JSONPath") == []


@pytest.mark.parametrize("state, field", [
    ({"InputPath": "a.b"}, "InputPath"),
    ({"OutputPath": "$.a["}, "OutputPath"),
    ({"ResultPath": "$.a[*]"}, "ResultPath"),
    ({"ResultPath": "$$.Execution"}, "ResultPath"),
    ({"ResultPath": "$var"}, "ResultPath"),
    ({"ItemsPath": "$..items"}, "ItemsPath"),
    ({"SecondsPath": 5}, "SecondsPath"),
    ({"Parameters": {"a": {"b.$": "no-dollar"}}}, "Parameters.a.b.$"),
    ({"Parameters": {"a.$": 3}}, "Parameters.a.$"),
    ({"Parameters": {"a": 1, "a.$": "$.x"}}, "Parameters.a.$"),
    ({"ResultSelector": {"a.$": "States.Bad()"}}, "ResultSelector.a.$"),
    ({"Assign": {"x.y": 1}}, "Assign.x.y"),
    ({"Assign": {"states": 1}}, "Assign.states"),
    ({"Assign": ["x"]}, "Assign"),
    ({"Choices": [{"Variable": "$.a", "NumericEquals": "1", "Next": "N"}]}, "Choices[0].NumericEquals"),
    ({"Choices": [{"And": [{"Variable": "$x", "Nope": 1}], "Next": "N"}]}, "Choices[0].And[0].Nope"),
    ({"Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.a..b", "Next": "N"}]}, "Catch[0].ResultPath"),
    ({"Catch": [{"ErrorEquals": ["States.ALL"], "Assign": {"e.$": "$$$"}, "Next": "N"}]}, "Catch[0].Assign.e.$"),
    ({"CausePath": "States.Format('{}')x"}, "CausePath"),
])
def test_static_checks_name_the_field(state: dict[str, Any], field: str) -> None:
    assert fields({"Type": "Task", **state}) == [field]


def test_reference_paths_reject_multi_value_selectors() -> None:
    for text in ("$.a[*]", "$..a", "$.a[0:1]", "$.a[?(@.x)]", "$.a['x','y']"):
        assert paths.reference_path_problem(text) is not None, text
    for text in ("$", "$.a", "$['a b'].c[0]", "$$.Map.Item.Value", "$myVar.x"):
        assert paths.reference_path_problem(text) is None, text
