"""The one JSONPath implementation (`unum_entry.jsonpath`): Choice rules and IR paths
(`conditions.py`) and States Language paths (`asl/paths.py`) parse and select through it, so
they agree on every key; AWS's literal backslash before the other quote in a bracket key;
variables reach Choice rules through the shared selector."""

from __future__ import annotations

from typing import Any

import pytest

from unum_entry import conditions, jsonpath
from unum_entry.asl import paths
from unum_entry.asl.dataflow import Scope, check_state_fields, evaluate_condition
from unum_entry.errors import ConditionError, ConditionEvaluationError, StatesRuntimeError

pytestmark = pytest.mark.unit

# The documented example: inside a single-quoted key, `\"` is a backslash and a quote, kept.
AWS_KEY_PATH = "$['Test\\\"\"Name\"']"
AWS_KEY = 'Test\\""Name"'


def test_a_backslash_before_the_other_quote_is_kept_literally() -> None:
    assert jsonpath.parse_path(AWS_KEY_PATH).steps == (AWS_KEY,)
    assert jsonpath.parse_path("$[\"it\\'s\"]").steps == ("it\\'s",)  # the mirror case


@pytest.mark.parametrize("path, key", [
    ("$['it\\'s']", "it's"), ('$["say \\"hi\\""]', 'say "hi"'), ("$['back\\\\slash']", "back\\slash"),
    ("$['tab\\there']", "tab\there"),
])
def test_a_backslash_still_escapes_the_keys_own_quote_and_the_json_escapes(path: str, key: str) -> None:
    assert jsonpath.parse_path(path).steps == (key,)


DATA = {AWS_KEY: "aws", 'Test""Name"': "unescaped", "it's": 1, "list": [10, 20, 30],
        "obj": {"a b": {"c": [{"d": True}]}}, "odd-name": 5, "é": 6}


@pytest.mark.parametrize("path", [
    AWS_KEY_PATH, "$['it\\'s']", "$.list[2]", "$.list[(@.length-1)]", "$.obj['a b'].c[0].d", "$.odd-name", "$.é",
    "$", "$$.Execution.Id",
])
def test_choice_rules_and_states_language_paths_select_the_same_value(path: str) -> None:
    context = {"Execution": {"Id": "arn"}}
    selected = paths.select(path, DATA, context)
    if "(@.length" not in path:  # a reference path (Choice, IR) takes no index from the end
        assert conditions.resolve_path(path, DATA, context) == selected
    assert jsonpath.lookup(jsonpath.parse_path(path), DATA, context, {}) == selected


def test_the_aws_key_selects_the_member_with_the_backslash() -> None:
    assert paths.select(AWS_KEY_PATH, DATA) == "aws"
    rule = {"Variable": AWS_KEY_PATH, "StringEquals": "aws"}
    conditions.validate_condition(rule, source="wf", field="when")
    assert conditions.evaluate(rule, DATA, {}) is True


VARIABLES = {"limit": 10, "order": {"items": [{"id": 7}]}}


@pytest.mark.parametrize("rule, expected", [
    ({"Variable": "$limit", "NumericGreaterThan": 5}, True),
    ({"Variable": "$.n", "NumericLessThanEqualsPath": "$limit"}, True),
    ({"Variable": "$order.items[0].id", "NumericEquals": 7}, True),
    ({"Variable": "$nobody", "IsPresent": False}, True),
    ({"Not": {"Variable": "$order.items[1]", "IsPresent": True}}, True),
    ({"Variable": "$limit", "StringEquals": "10"}, False),
])
def test_variables_reach_choice_rules_through_the_shared_selector(rule: dict[str, Any], expected: bool) -> None:
    conditions.validate_condition(rule, source="wf", field="when", variables=True)
    assert conditions.evaluate(rule, {"n": 3}, {}, VARIABLES) is expected
    assert evaluate_condition({**rule, "Next": "X"}, {"n": 3}, Scope(context={}, variables=VARIABLES)) is expected


def test_a_missing_variable_in_a_comparison_is_states_runtime_naming_the_path_as_written() -> None:
    with pytest.raises(StatesRuntimeError) as caught:
        evaluate_condition({"Variable": "$nobody.x", "NumericEquals": 1, "Next": "X"}, {}, Scope(context={}))
    assert caught.value.error == "States.Runtime"
    assert caught.value.cause == "Invalid path '$nobody.x': no value is present there"


def test_ir_conditions_and_paths_have_no_variables() -> None:
    with pytest.raises(ConditionError) as caught:
        conditions.validate_condition({"Variable": "$limit", "IsPresent": True}, source="wf.json", field="when")
    assert caught.value.field == "when.Variable" and "variables cannot be used here" in caught.value.problem
    with pytest.raises(ConditionEvaluationError, match="variables cannot be used here"):
        conditions.resolve_path("$limit", {}, {})


def test_choice_rule_checks_name_the_variable_path_as_written() -> None:
    state = {"Type": "Choice", "Default": "X", "Choices": [
        {"Variable": "$ok.a", "IsPresent": True, "Next": "X"},
        {"And": [{"Variable": "$bad[*]", "IsNull": True, "Comment": "nested comments are allowed"}], "Next": "X"}]}
    assert check_state_fields(state, "JSONPath") == [(
        "Choices[1].And[0].Variable",
        "'$bad[*]' is not a reference path: it must select a single value (only .name, ['name'] and [index] steps)")]
