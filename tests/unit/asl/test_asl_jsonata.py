"""JSONata states: Arguments, Output, Assign, Condition, `$states`, Catch errorOutput, the
Step Functions JSONata functions and States.QueryEvaluationError — with the examples of AWS's
"Transforming data with JSONata" and "Passing data between states with variables" pages."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest

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

CONTEXT = {"Execution": {"Id": "exec-1", "Input": {"orig": True}, "StartTime": "2024-11-01T00:00:00Z"},
           "State": {"Name": "S", "EnteredTime": "2024-11-01T00:00:01Z", "RetryCount": 0}}


def scope(variables: dict[str, Any] | None = None, **extra: Any) -> Scope:
    return Scope(context=CONTEXT, variables=variables or {}, query_language="JSONata", **extra)


def expression(text: str, data: Any = None, variables: dict[str, Any] | None = None, **extra: Any) -> Any:
    return resolve(text, data, scope(variables, **extra), field="Output")


def test_arguments_documented_conversion_example() -> None:
    state = {"Type": "Task", "Arguments": {"static": "Hello", "title": "{% $states.input.title %}",
                                           "name": "{% $customerName %}", "not-evaluated": "$customerName"}}
    assert state_input(state, {"title": "Doctor"}, scope({"customerName": "María"})) == {
        "static": "Hello", "title": "Doctor", "name": "María", "not-evaluated": "$customerName"}


def test_arguments_default_to_the_raw_input() -> None:
    assert state_input({"Type": "Task"}, {"a": 1}, scope()) == {"a": 1}
    assert state_input({"Type": "Task", "Arguments": "{% $states.input.a %}"}, {"a": [1]}, scope()) == [1]


def test_output_documented_input_and_output_example() -> None:
    state = {"Type": "Succeed", "Output": {"lastName": "{% 'Last=>' & $states.input.customer.lastName %}",
                                           "orderValue": "{% $states.input.order.total %}"}}
    raw = {"customer": {"firstName": "Martha", "lastName": "Rivera"}, "order": {"items": 7, "total": 27.91}}
    assert state_output(state, raw, None, scope())[0] == {"lastName": "Last=>Rivera", "orderValue": 27.91}


def test_output_documented_filter_example() -> None:
    state = {"Type": "Pass", "Output": {"dietProducts": "{% $states.input.products[calories=0] %}"}}
    raw = {"products": [{"calories": 140, "flavour": "Cola", "name": "Product-1"},
                        {"calories": 0, "flavour": "Cola", "name": "Product-2"},
                        {"calories": 0, "flavour": "Lime", "name": "Product-5"}]}
    assert state_output(state, raw, None, scope())[0] == {"dietProducts": [
        {"calories": 0, "flavour": "Cola", "name": "Product-2"}, {"calories": 0, "flavour": "Lime", "name": "Product-5"}]}


def test_output_defaults_result_for_tasks_input_otherwise() -> None:
    assert state_output({"Type": "Task"}, {"in": 1}, {"out": 2}, scope())[0] == {"out": 2}
    assert state_output({"Type": "Pass"}, {"in": 1}, None, scope())[0] == {"in": 1}
    state = {"Type": "Task", "Output": "{% $merge([$states.input, {'r': $states.result.Payload}]) %}"}
    assert state_output(state, {"in": 1}, {"Payload": 5}, scope())[0] == {"in": 1, "r": 5}
    assert state_output({"Type": "Pass", "Output": 42}, {}, None, scope())[0] == 42


def test_assign_evaluation_order_documented_example() -> None:
    state = {"Type": "Pass", "Assign": {"x": "{% $a %}", "nextX": "{% $x %}"}}
    _, variables = state_output(state, {}, None, scope({"x": 3, "a": 6}))
    assert variables == {"x": 6, "a": 6, "nextX": 3}


def test_assign_and_output_both_see_the_result() -> None:
    state = {"Type": "Task", "Assign": {"product": "{% $states.input.order.product %}",
                                        "currentPrice": "{% $states.result.Payload.current_price %}"},
             "Output": {"price": "{% $states.result.Payload.current_price %}", "had": "{% $currentPrice %}"}}
    output, variables = state_output(state, {"order": {"product": "p1"}}, {"Payload": {"current_price": 9}},
                                     scope({"currentPrice": 1}))
    assert output == {"price": 9, "had": 1}  # Output sees the entry value, not the one assigned
    assert variables == {"product": "p1", "currentPrice": 9}


def test_condition_uses_variables_and_input() -> None:
    rule = {"Condition": "{% $current_price <= $states.input.desired_price %}", "Next": "Send Notification"}
    assert evaluate_condition(rule, {"desired_price": 10}, scope({"current_price": 8})) is True
    assert evaluate_condition(rule, {"desired_price": 5}, scope({"current_price": 8})) is False
    with pytest.raises(StatesRuntimeError) as caught:
        evaluate_condition({"Condition": "{% $states.input.desired_price %}"}, {"desired_price": 5}, scope())
    assert caught.value.error == "States.QueryEvaluationError"


def test_catch_output_and_assign_see_error_output() -> None:
    catcher = {"ErrorEquals": ["States.ALL"], "Next": "Handle",
               "Output": {"err": "{% $states.errorOutput.Error %}", "why": "{% $states.errorOutput.Cause %}",
                          "orig": "{% $states.input.k %}"},
               "Assign": {"failedWith": "{% $states.errorOutput.Error %}"}}
    output, variables = error_output(catcher, {"k": "v"}, {"Error": "Boom", "Cause": "because"}, scope())
    assert output == {"err": "Boom", "why": "because", "orig": "v"}
    assert variables == {"failedWith": "Boom"}
    assert error_output({"ErrorEquals": ["States.ALL"], "Next": "H"}, {"k": 1}, {"Error": "E", "Cause": "C"},
                        scope())[0] == {"Error": "E", "Cause": "C"}


def test_context_through_states_context() -> None:
    assert expression("{% $states.context.Execution.Id %}") == "exec-1"
    assert resolve({"ContextIndex": "{% $states.context.Map.Item.Index %}"}, {},
                   Scope(context={"Map": {"Item": {"Index": 4}}}, query_language="JSONata"),
                   field="ItemSelector") == {"ContextIndex": 4}


def test_fields_accept_expressions_anywhere() -> None:
    assert resolve([1, "{% $two %}", 3], {}, scope({"two": 2}), field="Items") == [1, 2, 3]
    assert resolve("{% $timeout %}", {}, scope({"timeout": 30}), field="TimeoutSeconds") == 30
    assert resolve("{% $states.input.wait %}", {"wait": 5}, scope(), field="Seconds") == 5
    assert resolve(" {% 1 %}", {}, scope(), field="Seconds") == " {% 1 %}"  # not an expression: a literal


def test_null_is_a_value_undefined_is_an_error() -> None:
    assert expression("{% $states.input.n %}", {"n": None}) is None
    assert expression("{% $v %}", {}, {"v": None}) is None
    assert expression("{% $states.input.list[0] %}", {"list": [None, 1]}) is None
    with pytest.raises(StatesRuntimeError) as caught:
        expression("{% $states.input.thisFieldDoesNotExist %}", {"a": 1})
    assert caught.value.error == "States.QueryEvaluationError" and "undefined" in caught.value.cause


@pytest.mark.parametrize("text", ["{% $x + $y %}", "{% $eval('1') %}", "{% function($a){$a} %}", "{% ( %}"])
def test_evaluation_errors_are_query_evaluation_errors(text: str) -> None:
    with pytest.raises(StatesRuntimeError) as caught:
        expression(text, {}, {"x": 1, "y": "a"})
    assert caught.value.error == "States.QueryEvaluationError"
    assert "'Output'" in caught.value.cause


def test_step_functions_functions() -> None:
    assert expression("{% $partition([1,2,3,4], $states.input.chunkSize) %}", {"chunkSize": 3}) == [[1, 2, 3], [4]]
    assert expression("{% $partition($states.input.a, 1) %}", {"a": [None, 1]}) == [[None], [1]]
    assert expression("{% $range(0, 10, 2) %}") == [0, 2, 4, 6, 8, 10]
    assert expression("{% $range(0, 2.9, 1) %}") == [0, 1, 2]  # integer arguments round down
    assert expression("{% $hash($states.input.content, $alg) %}", {"content": "input data"}, {"alg": "SHA-256"}) == (
        hashlib.sha256(b"input data").hexdigest())
    assert expression("{% $random() %}", random=lambda: 0.125) == 0.125
    assert expression("{% $random(7) %}") == expression("{% $random(7) %}")
    assert 0 <= expression("{% $random(7) %}") < 1
    assert uuid.UUID(expression("{% $uuid() %}")).version == 4
    assert expression("{% $parse($states.input.json_string) %}", {"json_string": '{"a": [1, null]}'}) == {"a": [1, None]}


def test_step_functions_functions_reject_bad_arguments() -> None:
    for text in ("{% $partition([1], 0) %}", "{% $range(0, 5000, 1) %}", "{% $hash('x', 'SHA-2') %}", "{% $parse('{') %}"):
        with pytest.raises(StatesRuntimeError) as caught:
            expression(text)
        assert caught.value.error == "States.QueryEvaluationError", text


def test_assign_must_be_an_object() -> None:
    with pytest.raises(StatesRuntimeError):
        state_output({"Type": "Pass", "Assign": "{% 1 %}"}, {}, None, scope())
    _, variables = state_output({"Type": "Pass", "Assign": "{% {'a': 1} %}"}, {}, None, scope())
    assert variables == {"a": 1}


# --- static checks ----------------------------------------------------------------------------


def problems(state: dict[str, Any]) -> list[tuple[str, str]]:
    return check_state_fields(state, "JSONata")


def test_static_checks_accept_valid_jsonata() -> None:
    state = {"Type": "Task", "Arguments": {"a": "{% $states.input.a %}", "lit": ["x", 1]},
             "Output": "{% $states.result %}", "Assign": {"v": "{% $states.result.v %}"},
             "TimeoutSeconds": "{% $t %}",
             "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "N", "Output": "{% $states.errorOutput %}"}]}
    assert problems(state) == []


@pytest.mark.parametrize("state, field, words", [
    ({"Type": "Task", "Arguments": {"a": "{% $x + %}"}}, "Arguments.a", "invalid JSONata"),
    ({"Type": "Task", "Arguments": "{% $states.result %}"}, "Arguments", "$states.result"),
    ({"Type": "Pass", "Output": "{% $states.result %}"}, "Output", "$states.result"),
    ({"Type": "Task", "Output": "{% $states.errorOutput %}"}, "Output", "$states.errorOutput"),
    ({"Type": "Choice", "Choices": [{"Next": "N"}]}, "Choices[0].Condition", "required"),
    ({"Type": "Choice", "Choices": [{"Condition": "$.a", "Next": "N"}]}, "Choices[0].Condition", "JSONata expression"),
    ({"Type": "Pass", "Assign": {"a.b": 1}}, "Assign.a.b", "variable name"),
    ({"Type": "Map", "Items": "{% [1, %}"}, "Items", "invalid JSONata"),
])
def test_static_checks_name_the_field(state: dict[str, Any], field: str, words: str) -> None:
    found = problems(state)
    assert [f for f, _ in found] == [field]
    assert words in found[0][1]
