"""Behaviour that used to differ from AWS Step Functions (issue 11), each case from AWS's
documentation or from executions on AWS as the issue records them."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from unum_entry.asl import intrinsics, paths
from unum_entry.asl.dataflow import Scope, check_state_fields, evaluate_condition, state_input, state_output
from unum_entry.asl.retry import matches
from unum_entry.asl.runner import Fragment, Services, run
from unum_entry.errors import StatesRuntimeError

pytestmark = pytest.mark.unit

JSONATA = Scope(context={}, query_language="JSONata")


def intrinsic(expression: str, data: Any = None) -> Any:
    state = {"Type": "Pass", "Parameters": {"out.$": expression}, "End": True}
    return state_input(state, data if data is not None else {}, Scope(context={}))["out"]


# --- intrinsics ---------------------------------------------------------------------------------


@pytest.mark.parametrize("a, b, total", [(-1.49, -1.5, -2), (-0.5, 0.5, 1), (1.5, 2.4, 4), (111, -1, 110)])
def test_math_add_rounds_half_up_as_java(a: float, b: float, total: int) -> None:
    assert intrinsic("States.MathAdd($.a, $.b)", {"a": a, "b": b}) == total


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_string_to_json_of_an_empty_or_blank_string_is_null(text: str) -> None:
    assert intrinsic("States.StringToJson($.s)", {"s": text}) is None


def test_format_renders_objects_and_arrays_java_style() -> None:
    data = {"o": {"Arg1": 1, "Arg2": []}, "a": ["x", 2.5, None, {"k": True}]}
    assert intrinsic("States.Format('{} and {}', $.o, $.a)", data) == "{Arg1=1, Arg2=[]} and [x, 2.5, null, {k=true}]"
    assert intrinsics.java_text(1e20) == "1.0E20" and intrinsics.java_text(0.0001) == "1.0E-4"


@pytest.mark.parametrize("expression, words", [
    ("States.MathAdd(1,'-1')", "second argument of States.MathAdd must be a number, found a string ('-1')"),
    ("States.ArrayLength('abc')", "must be an array"),
    ("States.StringSplit(1, ',')", "must be a string"),
    ("States.MathAdd(States.Format('{}', 1), 1)", "which returns a string"),
    ("States.JsonMerge('a', $.b, false)", "must be an object"),
])
def test_literal_arguments_of_the_wrong_type_are_static_errors(expression: str, words: str) -> None:
    problems = check_state_fields({"Type": "Pass", "Parameters": {"x.$": expression}}, "JSONPath")
    assert [field for field, _ in problems] == ["Parameters.x.$"] and words in problems[0][1]


# --- JSONata ------------------------------------------------------------------------------------


def test_a_string_is_an_expression_only_when_exactly_delimited() -> None:
    state = {"Type": "Pass", "Output": {"lit": " {% 1 + 1 %}", "also": "{% 1 %} x", "expr": "{% 1 + 1 %}"}}
    output, _ = state_output(state, {}, None, JSONATA)
    assert output == {"lit": " {% 1 + 1 %}", "also": "{% 1 %} x", "expr": 2}
    assert check_state_fields(state, "JSONata") == []


def test_a_choice_condition_may_be_a_literal_boolean() -> None:
    assert evaluate_condition({"Condition": True, "Next": "A"}, {}, JSONATA) is True
    assert evaluate_condition({"Condition": False, "Next": "A"}, {}, JSONATA) is False
    assert check_state_fields({"Type": "Choice", "Choices": [{"Condition": True, "Next": "A"}]}, "JSONata") == []


def test_singleton_sequence_rule_for_range() -> None:
    output, _ = state_output({"Type": "Pass", "Output": {"one": "{% $range(1, 9, 9) %}", "two": "{% $range(1, 9, 8) %}"}},
                             {}, None, JSONATA)
    assert output == {"one": 1, "two": [1, 9]}


def test_undefined_result_uses_aws_wording_with_the_field_path() -> None:
    with pytest.raises(StatesRuntimeError) as caught:
        state_output({"Type": "Pass", "Output": {"v": "{% $states.input.absent %}"}}, {}, None, JSONATA)
    assert caught.value.error == "States.QueryEvaluationError"
    assert caught.value.cause == ("The JSONata expression '$states.input.absent' specified for the field 'Output/v' "
                                  "returned nothing (undefined).")


# --- Choice, paths ------------------------------------------------------------------------------


def test_comment_is_allowed_in_nested_choice_rules() -> None:
    rule = {"And": [{"Comment": "positive", "Variable": "$.x", "NumericGreaterThan": 0},
                    {"Not": {"Comment": "not ten", "Variable": "$.x", "NumericEquals": 10}}], "Next": "A"}
    assert check_state_fields({"Type": "Choice", "Choices": [rule]}, "JSONPath") == []
    assert evaluate_condition(rule, {"x": 3}, Scope(context={})) is True
    assert evaluate_condition(rule, {"x": 10}, Scope(context={})) is False


@pytest.mark.parametrize("path, expected", [
    ("$['it\\'s']", 1), ('$["say \\"hi\\""]', 2), ("$['back\\\\slash']", 3), ("$['*']", 4), ("$['a.b']['c]']", 5),
    ("$.list[(@.length-1)]", 30), ("$.list[(@.length-3)]", 10), ("$.é", 6),
])
def test_bracket_keys_with_quotes_and_backslashes_and_jayway_length(path: str, expected: Any) -> None:
    data = {"it's": 1, 'say "hi"': 2, "back\\slash": 3, "*": 4, "a.b": {"c]": 5}, "list": [10, 20, 30], "é": 6}
    assert paths.select(path, data) == expected


def test_missing_paths_use_aws_wording() -> None:
    with pytest.raises(StatesRuntimeError) as caught:
        paths.select("$.Payload.body", {"Payload": {}}, field="InputPath")
    assert caught.value.cause == "Invalid path '$.Payload.body' : No results for path: $['Payload']['body']"


# --- the runner: Wait, Map items, payload size, bytes -------------------------------------------


class Ctx(SimpleNamespace):
    def __init__(self) -> None:
        super().__init__(workflow_id="wf", invocation="inv", attempt=1, index=0, size=1, iteration=0)


def run_machine(states: dict[str, Any], head: str, event: Any, *, handler: Any = None, task: str | None = None,
                query_language: str = "JSONPath", data_limit: int | None = 256 * 1024) -> dict[str, Any]:
    fragment = Fragment(function="f", head=head, join=False, in_branch=False, states=states, task=task,
                        query_language=query_language)
    services = Services(sleep=lambda _: None, now=lambda: datetime(2024, 1, 1, tzinfo=timezone.utc), data_limit=data_limit)
    return run(fragment, handler, event, Ctx(), services)


def test_wait_seconds_path_must_be_an_integer() -> None:
    states = {"W": {"Type": "Wait", "SecondsPath": "$.s", "End": True}}
    assert run_machine(states, "W", {"s": 2})["__next__"] == "__end__"
    decision = run_machine(states, "W", {"s": 1.5})
    assert decision["__next__"] == "__fail__" and decision["error"]["Error"] == "States.Runtime"


def test_map_items_not_an_array() -> None:
    jsonata = {"M": {"Type": "Map", "Items": "{% $states.input.things %}", "End": True,
                     "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}}}
    decision = run_machine(jsonata, "M", {"things": {"a": 1}}, query_language="JSONata")
    assert decision["error"] == {"Error": "States.QueryEvaluationError", "Cause": (
        "An error occurred while executing the state 'M' (entered at the event id #2). The JSONata expression '$states.input.things' specified for the field 'Items' returned an unexpected result "
        "type. Expected 'array', but was 'object' for value: {\"a\":1}")}
    jsonpath = {"M": {**jsonata["M"], "ItemsPath": "$.things"}}
    del jsonpath["M"]["Items"]
    assert run_machine(jsonpath, "M", {"things": "x"})["error"]["Error"] == "States.Runtime"


def test_state_output_over_256_kib_fails_with_data_limit_exceeded_unless_lifted() -> None:
    big = "x" * (256 * 1024)
    states = {"P": {"Type": "Pass", "Result": big, "End": True}}
    decision = run_machine(states, "P", {})
    assert decision["error"]["Error"] == "States.DataLimitExceeded"
    assert run_machine(states, "P", {}, data_limit=None) == {"__next__": "__end__", "output": big}


def test_data_limit_exceeded_is_not_caught_by_states_all_but_by_its_name() -> None:
    assert not matches(["States.ALL"], "States.DataLimitExceeded")
    assert not matches(["States.TaskFailed"], "States.DataLimitExceeded")
    assert matches(["States.DataLimitExceeded"], "States.DataLimitExceeded")
    states = {"T": {"Type": "Task", "Resource": "F", "End": True,
                    "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}]},
              "Caught": {"Type": "Pass", "End": True}}
    decision = run_machine(states, "T", {}, handler=lambda event, ctx: "y" * 300_000, task="T")
    assert decision["error"]["Error"] == "States.DataLimitExceeded"


def test_a_handler_returning_bytes_returns_their_json() -> None:
    states = {"T": {"Type": "Task", "Resource": "F", "End": True}}
    decision = run_machine(states, "T", {}, handler=lambda event, ctx: json.dumps({"ok": [1, 2]}).encode(), task="T")
    assert decision == {"__next__": "__end__", "output": {"ok": [1, 2]}}
