"""Choice-rule conditions: validation errors name the field path; evaluation is Step Functions'."""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unum_entry import conditions
from unum_entry.conditions import evaluate, resolve_path, validate_condition
from unum_entry.errors import ConditionError, ConditionEvaluationError, IRError

pytestmark = pytest.mark.unit

OUTPUT: dict[str, Any] = {
    "s": "banana",
    "s_same": "banana",
    "s_high": "cherry",
    "empty": "",
    "n": 5,
    "n_float": 5.0,
    "n_high": 7.5,
    "big": 10**30,
    "yes": True,
    "no": False,
    "nul": None,
    "ts": "2020-06-01T12:00:00Z",
    "ts_offset": "2020-06-01T14:00:00+02:00",  # the same instant as ts
    "ts_later": "2020-06-01T12:00:00.000000001Z",
    "ts_bad": "2020-06-01 12:00:00",
    "star": "a*b",
    "backslash": "a\\b",
    "list": [10, "x", {"k": "v"}],
    "obj": {"a b": 1, "nested": {"deep": "yes"}},
}
CONTEXT: dict[str, Any] = {
    "Execution": {"Id": "exec-1", "Input": {"n": 7}},
    "State": {"RetryCount": 0},
}


def rule(operator: str, operand: Any, variable: str = "$.s") -> dict[str, Any]:
    """A leaf rule."""
    return {"Variable": variable, operator: operand}


# (rule, expected) — every operator appears here; see test_every_operator_is_covered.
EVALUATE_CASES = [
    # strings
    pytest.param(rule("StringEquals", "banana"), True, id="StringEquals-true"),
    pytest.param(rule("StringEquals", "Banana"), False, id="StringEquals-case-sensitive"),
    pytest.param(rule("StringEquals", "", "$.empty"), True, id="StringEquals-empty"),
    pytest.param(rule("StringLessThan", "cherry"), True, id="StringLessThan-true"),
    pytest.param(rule("StringLessThan", "banana"), False, id="StringLessThan-equal"),
    pytest.param(rule("StringLessThan", "bananas"), True, id="StringLessThan-prefix"),
    pytest.param(rule("StringGreaterThan", "apple"), True, id="StringGreaterThan-true"),
    pytest.param(rule("StringGreaterThan", "banana"), False, id="StringGreaterThan-equal"),
    pytest.param(rule("StringLessThanEquals", "banana"), True, id="StringLessThanEquals-equal"),
    pytest.param(rule("StringLessThanEquals", "apple"), False, id="StringLessThanEquals-false"),
    pytest.param(rule("StringGreaterThanEquals", "banana"), True, id="StringGreaterThanEquals-eq"),
    pytest.param(rule("StringGreaterThanEquals", "cherry"), False, id="StringGreaterThanEquals-f"),
    pytest.param(rule("StringEqualsPath", "$.s_same"), True, id="StringEqualsPath-true"),
    pytest.param(rule("StringEqualsPath", "$.s_high"), False, id="StringEqualsPath-false"),
    pytest.param(rule("StringLessThanPath", "$.s_high"), True, id="StringLessThanPath-true"),
    pytest.param(rule("StringLessThanPath", "$.s_same"), False, id="StringLessThanPath-false"),
    pytest.param(rule("StringGreaterThanPath", "$.s_high"), False, id="StringGreaterThanPath-f"),
    pytest.param(
        rule("StringGreaterThanPath", "$.s", "$.s_high"), True, id="StringGreaterThanPath-true"
    ),
    pytest.param(rule("StringLessThanEqualsPath", "$.s_same"), True, id="StringLTEPath-true"),
    pytest.param(
        rule("StringLessThanEqualsPath", "$.s", "$.s_high"), False, id="StringLTEPath-false"
    ),
    pytest.param(rule("StringGreaterThanEqualsPath", "$.s_same"), True, id="StringGTEPath-true"),
    pytest.param(rule("StringGreaterThanEqualsPath", "$.s_high"), False, id="StringGTEPath-f"),
    # StringMatches: * wildcard, \* and \\ escapes, whole-string match
    pytest.param(rule("StringMatches", "ban*"), True, id="StringMatches-prefix"),
    pytest.param(rule("StringMatches", "*ana"), True, id="StringMatches-suffix"),
    pytest.param(rule("StringMatches", "b*n*a"), True, id="StringMatches-two-stars"),
    pytest.param(rule("StringMatches", "*"), True, id="StringMatches-star-only"),
    pytest.param(rule("StringMatches", "*", "$.empty"), True, id="StringMatches-star-empty"),
    pytest.param(rule("StringMatches", "banana*"), True, id="StringMatches-star-matches-none"),
    pytest.param(rule("StringMatches", "ban"), False, id="StringMatches-whole-string"),
    pytest.param(rule("StringMatches", "b.n.n."), False, id="StringMatches-dot-is-literal"),
    pytest.param(rule("StringMatches", "a\\*b", "$.star"), True, id="StringMatches-escaped-star"),
    pytest.param(rule("StringMatches", "a\\*b"), False, id="StringMatches-escaped-star-literal"),
    pytest.param(rule("StringMatches", "a\\*", "$.star"), False, id="StringMatches-esc-end"),
    pytest.param(
        rule("StringMatches", "a\\\\b", "$.backslash"), True, id="StringMatches-escaped-backslash"
    ),
    pytest.param(
        rule("StringMatches", "a\\\\*", "$.backslash"), True, id="StringMatches-backslash-then-star"
    ),
    pytest.param(rule("StringMatches", "a\\b", "$.backslash"), False, id="StringMatches-esc-b"),
    pytest.param(rule("StringMatches", "[ab]*"), False, id="StringMatches-no-char-classes"),
    # numbers
    pytest.param(rule("NumericEquals", 5, "$.n"), True, id="NumericEquals-int"),
    pytest.param(rule("NumericEquals", 5.0, "$.n"), True, id="NumericEquals-int-float"),
    pytest.param(rule("NumericEquals", 6, "$.n"), False, id="NumericEquals-false"),
    pytest.param(rule("NumericEquals", 10**30, "$.big"), True, id="NumericEquals-big-int"),
    pytest.param(rule("NumericLessThan", 5.5, "$.n"), True, id="NumericLessThan-true"),
    pytest.param(rule("NumericLessThan", 5, "$.n"), False, id="NumericLessThan-equal"),
    pytest.param(rule("NumericGreaterThan", -1, "$.n"), True, id="NumericGreaterThan-true"),
    pytest.param(rule("NumericGreaterThan", 5, "$.n"), False, id="NumericGreaterThan-equal"),
    pytest.param(rule("NumericLessThanEquals", 5, "$.n"), True, id="NumericLessThanEquals-eq"),
    pytest.param(rule("NumericLessThanEquals", 4.99, "$.n"), False, id="NumericLTE-false"),
    pytest.param(rule("NumericGreaterThanEquals", 5, "$.n"), True, id="NumericGTE-equal"),
    pytest.param(rule("NumericGreaterThanEquals", 5.01, "$.n"), False, id="NumericGTE-false"),
    pytest.param(rule("NumericEqualsPath", "$.n_float", "$.n"), True, id="NumericEqualsPath-t"),
    pytest.param(rule("NumericEqualsPath", "$.n_high", "$.n"), False, id="NumericEqualsPath-f"),
    pytest.param(rule("NumericLessThanPath", "$.n_high", "$.n"), True, id="NumericLTPath-true"),
    pytest.param(rule("NumericLessThanPath", "$.n", "$.n_high"), False, id="NumericLTPath-false"),
    pytest.param(rule("NumericGreaterThanPath", "$.n", "$.n_high"), True, id="NumericGTPath-t"),
    pytest.param(rule("NumericGreaterThanPath", "$.n_float", "$.n"), False, id="NumericGTPath-f"),
    pytest.param(
        rule("NumericLessThanEqualsPath", "$.n_float", "$.n"), True, id="NumericLTEPath-true"
    ),
    pytest.param(
        rule("NumericLessThanEqualsPath", "$.n", "$.n_high"), False, id="NumericLTEPath-false"
    ),
    pytest.param(
        rule("NumericGreaterThanEqualsPath", "$.n_float", "$.n"), True, id="NumericGTEPath-true"
    ),
    pytest.param(
        rule("NumericGreaterThanEqualsPath", "$.n_high", "$.n"), False, id="NumericGTEPath-false"
    ),
    # booleans
    pytest.param(rule("BooleanEquals", True, "$.yes"), True, id="BooleanEquals-true"),
    pytest.param(rule("BooleanEquals", True, "$.no"), False, id="BooleanEquals-false"),
    pytest.param(rule("BooleanEquals", False, "$.no"), True, id="BooleanEquals-false-false"),
    pytest.param(rule("BooleanEqualsPath", "$.yes", "$.yes"), True, id="BooleanEqualsPath-true"),
    pytest.param(rule("BooleanEqualsPath", "$.no", "$.yes"), False, id="BooleanEqualsPath-false"),
    # timestamps: instants, offsets, fractions
    pytest.param(
        rule("TimestampEquals", "2020-06-01T12:00:00Z", "$.ts"), True, id="TimestampEquals-true"
    ),
    pytest.param(
        rule("TimestampEquals", "2020-06-01T12:00:00Z", "$.ts_offset"),
        True,
        id="TimestampEquals-offset-same-instant",
    ),
    pytest.param(
        rule("TimestampEquals", "2020-06-01T07:00:00.000-05:00", "$.ts"),
        True,
        id="TimestampEquals-negative-offset-and-zero-fraction",
    ),
    pytest.param(
        rule("TimestampEquals", "2020-06-01T12:00:00Z", "$.ts_later"),
        False,
        id="TimestampEquals-nanosecond-differs",
    ),
    pytest.param(
        rule("TimestampLessThan", "2020-06-01T12:00:00.000000001Z", "$.ts"),
        True,
        id="TimestampLessThan-nanosecond",
    ),
    pytest.param(
        rule("TimestampLessThan", "2020-06-01T13:00:00+02:00", "$.ts"),
        False,
        id="TimestampLessThan-offset-earlier-instant",
    ),
    pytest.param(
        rule("TimestampGreaterThan", "2020-06-01T13:00:00+02:00", "$.ts"),
        True,
        id="TimestampGreaterThan-offset",
    ),
    pytest.param(
        rule("TimestampGreaterThan", "2020-06-01T12:00:00Z", "$.ts_offset"),
        False,
        id="TimestampGreaterThan-equal",
    ),
    pytest.param(
        rule("TimestampLessThanEquals", "2020-06-01T12:00:00Z", "$.ts_offset"),
        True,
        id="TimestampLessThanEquals-equal",
    ),
    pytest.param(
        rule("TimestampLessThanEquals", "2019-12-31T23:59:59.999Z", "$.ts"),
        False,
        id="TimestampLessThanEquals-false",
    ),
    pytest.param(
        rule("TimestampGreaterThanEquals", "2020-06-01T12:00:00Z", "$.ts"),
        True,
        id="TimestampGreaterThanEquals-equal",
    ),
    pytest.param(
        rule("TimestampGreaterThanEquals", "2020-06-01T12:00:00.5Z", "$.ts"),
        False,
        id="TimestampGreaterThanEquals-false",
    ),
    pytest.param(rule("TimestampEqualsPath", "$.ts_offset", "$.ts"), True, id="TsEqualsPath-t"),
    pytest.param(rule("TimestampEqualsPath", "$.ts_later", "$.ts"), False, id="TsEqualsPath-f"),
    pytest.param(rule("TimestampLessThanPath", "$.ts_later", "$.ts"), True, id="TsLTPath-true"),
    pytest.param(rule("TimestampLessThanPath", "$.ts_offset", "$.ts"), False, id="TsLTPath-f"),
    pytest.param(
        rule("TimestampGreaterThanPath", "$.ts", "$.ts_later"), True, id="TsGTPath-true"
    ),
    pytest.param(
        rule("TimestampGreaterThanPath", "$.ts_offset", "$.ts"), False, id="TsGTPath-false"
    ),
    pytest.param(
        rule("TimestampLessThanEqualsPath", "$.ts_offset", "$.ts"), True, id="TsLTEPath-true"
    ),
    pytest.param(
        rule("TimestampLessThanEqualsPath", "$.ts", "$.ts_later"), False, id="TsLTEPath-false"
    ),
    pytest.param(
        rule("TimestampGreaterThanEqualsPath", "$.ts", "$.ts_offset"), True, id="TsGTEPath-true"
    ),
    pytest.param(
        rule("TimestampGreaterThanEqualsPath", "$.ts_later", "$.ts"), False, id="TsGTEPath-false"
    ),
    # type mismatch between the value and the operator is False, never an error
    pytest.param(rule("NumericEquals", 5, "$.s"), False, id="mismatch-NumericEquals-on-string"),
    pytest.param(rule("NumericEquals", 1, "$.yes"), False, id="mismatch-boolean-is-not-number"),
    pytest.param(rule("NumericLessThan", 10, "$.nul"), False, id="mismatch-Numeric-on-null"),
    pytest.param(rule("StringEquals", "5", "$.n"), False, id="mismatch-StringEquals-on-number"),
    pytest.param(rule("StringMatches", "*", "$.n"), False, id="mismatch-StringMatches-on-number"),
    pytest.param(rule("BooleanEquals", True, "$.n"), False, id="mismatch-BooleanEquals-on-1"),
    pytest.param(
        rule("TimestampEquals", "2020-06-01T12:00:00Z", "$.ts_bad"),
        False,
        id="mismatch-Timestamp-on-non-timestamp-string",
    ),
    pytest.param(
        rule("TimestampLessThan", "2020-06-01T12:00:00Z", "$.n"),
        False,
        id="mismatch-Timestamp-on-number",
    ),
    pytest.param(rule("StringEqualsPath", "$.n", "$.s"), False, id="mismatch-Path-operand"),
    pytest.param(rule("NumericEqualsPath", "$.yes", "$.n"), False, id="mismatch-NumericPath-bool"),
    pytest.param(
        rule("TimestampEqualsPath", "$.s", "$.ts"), False, id="mismatch-TimestampPath-string"
    ),
    pytest.param(
        {"Not": rule("NumericEquals", 5, "$.s")}, True, id="mismatch-under-Not-is-True"
    ),
    # Is… tests
    pytest.param(rule("IsPresent", True, "$.nul"), True, id="IsPresent-null-value"),
    pytest.param(rule("IsPresent", True, "$.missing"), False, id="IsPresent-missing"),
    pytest.param(rule("IsPresent", False, "$.missing"), True, id="IsPresent-false-missing"),
    pytest.param(rule("IsPresent", False, "$.s"), False, id="IsPresent-false-present"),
    pytest.param(rule("IsPresent", True, "$.list[2].k"), True, id="IsPresent-into-list"),
    pytest.param(rule("IsPresent", True, "$.list[3]"), False, id="IsPresent-index-out-of-range"),
    pytest.param(rule("IsPresent", True, "$.s[0]"), False, id="IsPresent-no-index-into-string"),
    pytest.param(rule("IsPresent", True, "$.obj[0]"), False, id="IsPresent-no-index-into-object"),
    pytest.param(rule("IsPresent", True, "$.list.k"), False, id="IsPresent-no-key-into-list"),
    pytest.param(rule("IsPresent", True, "$.nul.k"), False, id="IsPresent-no-key-into-null"),
    pytest.param(rule("IsNull", True, "$.nul"), True, id="IsNull-true"),
    pytest.param(rule("IsNull", True, "$.s"), False, id="IsNull-false"),
    pytest.param(rule("IsNull", False, "$.s"), True, id="IsNull-false-operand"),
    pytest.param(rule("IsNull", True, "$.missing"), False, id="IsNull-missing"),
    pytest.param(rule("IsNull", False, "$.missing"), False, id="IsNull-false-missing"),
    pytest.param(rule("IsNumeric", True, "$.n_high"), True, id="IsNumeric-float"),
    pytest.param(rule("IsNumeric", True, "$.yes"), False, id="IsNumeric-boolean"),
    pytest.param(rule("IsNumeric", False, "$.s"), True, id="IsNumeric-false-operand"),
    pytest.param(rule("IsNumeric", False, "$.missing"), False, id="IsNumeric-missing"),
    pytest.param(rule("IsString", True, "$.empty"), True, id="IsString-true"),
    pytest.param(rule("IsString", True, "$.n"), False, id="IsString-false"),
    pytest.param(rule("IsString", True, "$.missing"), False, id="IsString-missing"),
    pytest.param(rule("IsBoolean", True, "$.no"), True, id="IsBoolean-true"),
    pytest.param(rule("IsBoolean", True, "$.n"), False, id="IsBoolean-false"),
    pytest.param(rule("IsBoolean", False, "$.missing"), False, id="IsBoolean-missing"),
    pytest.param(rule("IsTimestamp", True, "$.ts_offset"), True, id="IsTimestamp-true"),
    pytest.param(rule("IsTimestamp", True, "$.ts_bad"), False, id="IsTimestamp-bad-string"),
    pytest.param(rule("IsTimestamp", True, "$.n"), False, id="IsTimestamp-number"),
    pytest.param(rule("IsTimestamp", False, "$.s"), True, id="IsTimestamp-false-operand"),
    pytest.param(rule("IsTimestamp", True, "$.missing"), False, id="IsTimestamp-missing"),
    # paths: root, brackets, indices, context
    pytest.param(rule("IsString", True, "$"), False, id="path-root-is-object"),
    pytest.param(rule("NumericEquals", 1, "$['obj']['a b']"), True, id="path-bracket-space"),
    pytest.param(rule("StringEquals", "yes", "$.obj.nested.deep"), True, id="path-nested"),
    pytest.param(rule("NumericEquals", 10, "$.list[0]"), True, id="path-index"),
    pytest.param(rule("StringEquals", "v", "$.list[2]['k']"), True, id="path-index-then-key"),
    pytest.param(rule("StringEquals", "exec-1", "$$.Execution.Id"), True, id="path-context"),
    pytest.param(rule("NumericEquals", 0, "$$.State.RetryCount"), True, id="path-context-zero"),
    pytest.param(
        rule("NumericLessThanPath", "$$.Execution.Input.n", "$.n"), True, id="path-operand-context"
    ),
    pytest.param(rule("IsPresent", False, "$$.s"), True, id="path-context-not-output"),
    # And / Or / Not
    pytest.param(
        {"And": [rule("StringEquals", "banana"), rule("NumericEquals", 5, "$.n")]},
        True,
        id="And-true",
    ),
    pytest.param(
        {"And": [rule("StringEquals", "banana"), rule("NumericEquals", 6, "$.n")]},
        False,
        id="And-false",
    ),
    pytest.param({"And": [rule("IsNull", True, "$.nul")]}, True, id="And-single"),
    pytest.param(
        {"Or": [rule("StringEquals", "x"), rule("NumericEquals", 5, "$.n")]}, True, id="Or-true"
    ),
    pytest.param(
        {"Or": [rule("StringEquals", "x"), rule("NumericEquals", 6, "$.n")]}, False, id="Or-false"
    ),
    pytest.param({"Not": rule("StringEquals", "banana")}, False, id="Not-true-rule"),
    pytest.param({"Not": rule("StringEquals", "x")}, True, id="Not-false-rule"),
    pytest.param({"Not": {"Not": rule("StringEquals", "banana")}}, True, id="Not-Not"),
    pytest.param(
        {
            "Or": [
                {"And": [rule("IsPresent", True, "$.missing"), rule("StringEquals", "banana")]},
                {"Not": {"Or": [rule("BooleanEquals", False, "$.yes"), rule("IsNull", True)]}},
            ]
        },
        True,
        id="nested-Or-And-Not",
    ),
    pytest.param(
        {"And": [rule("IsPresent", True, "$.missing"), rule("NumericEquals", 1, "$.missing")]},
        False,
        id="And-short-circuits-before-missing-path",
    ),
    pytest.param(
        {"Or": [rule("IsPresent", False, "$.missing"), rule("NumericEquals", 1, "$.missing")]},
        True,
        id="Or-short-circuits-before-missing-path",
    ),
]


@pytest.mark.parametrize(("condition", "expected"), EVALUATE_CASES)
def test_evaluate(condition: dict[str, Any], expected: bool) -> None:
    validate_condition(condition, source="wf.json", field="when")
    assert evaluate(condition, OUTPUT, CONTEXT) is expected


def operators_in(condition: Any) -> set[str]:
    """Every operator name used in a rule, recursively."""
    names = {key for key in condition if key != "Variable"}
    for name in names & {"And", "Or"}:
        for member in condition[name]:
            names |= operators_in(member)
    if "Not" in condition:
        names |= operators_in(condition["Not"])
    return names


def test_every_operator_is_covered() -> None:
    covered = set().union(*(operators_in(case.values[0]) for case in EVALUATE_CASES))
    assert covered == set(conditions._OPERATORS)
    assert len(conditions._OPERATORS) == 17 + 16 + 6 + 3  # comparisons, …Path, Is…, And/Or/Not


@pytest.mark.parametrize(
    ("condition", "missing_path"),
    [
        pytest.param(rule("StringEquals", "x", "$.missing"), "$.missing", id="Variable"),
        pytest.param(rule("NumericEquals", 1, "$.list[5]"), "$.list[5]", id="index-out-of-range"),
        pytest.param(rule("StringEquals", "b", "$.s[0]"), "$.s[0]", id="index-into-string"),
        pytest.param(rule("NumericEquals", 1, "$.obj[0]"), "$.obj[0]", id="index-into-object"),
        pytest.param(rule("NumericEquals", 1, "$.n.x"), "$.n.x", id="key-into-number"),
        pytest.param(rule("StringEquals", "x", "$$.Nope"), "$$.Nope", id="context-Variable"),
        pytest.param(rule("StringEqualsPath", "$.missing"), "$.missing", id="Path-operand"),
        pytest.param(
            rule("NumericEqualsPath", "$$.Execution.Input.m", "$.n"),
            "$$.Execution.Input.m",
            id="context-Path-operand",
        ),
        pytest.param(
            {"Not": rule("BooleanEquals", True, "$.missing")}, "$.missing", id="under-Not"
        ),
        pytest.param(
            {"And": [rule("IsString", True), rule("StringMatches", "*", "$.gone")]},
            "$.gone",
            id="under-And",
        ),
    ],
)
def test_comparison_on_missing_path_raises(condition: dict[str, Any], missing_path: str) -> None:
    validate_condition(condition, source="wf.json", field="when")
    with pytest.raises(ConditionEvaluationError, match=re.escape(repr(missing_path))):
        evaluate(condition, OUTPUT, CONTEXT)


def test_evaluate_on_non_object_output() -> None:
    assert evaluate(rule("NumericEquals", 3, "$"), 3, {}) is True
    assert evaluate(rule("NumericEquals", 3, "$[1]"), [1, 3], {}) is True
    assert evaluate(rule("IsPresent", False, "$.a"), "text", {}) is True


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("$", OUTPUT),
        ("$.nul", None),
        ("$.list[2].k", "v"),
        ("$['obj']['a b']", 1),
        ("$$.Execution.Input", {"n": 7}),
        ("$$", CONTEXT),
    ],
)
def test_resolve_path(path: str, expected: Any) -> None:
    assert resolve_path(path, OUTPUT, CONTEXT) == expected


@pytest.mark.parametrize("path", ["$.missing", "$.list[3]", "$.s[0]", "$$.s", "$.a[*]", "a", "$.["])
def test_resolve_path_raises_naming_the_path(path: str) -> None:
    with pytest.raises(ConditionEvaluationError, match=re.escape(repr(path))):
        resolve_path(path, OUTPUT, CONTEXT)


# (rule, expected field path, fragment of the problem)
VALIDATION_CASES = [
    # shape
    pytest.param("x", "when", "must be an object", id="rule-not-object"),
    pytest.param([], "when", "must be an object", id="rule-is-list"),
    pytest.param(None, "when", "must be an object", id="rule-is-null"),
    pytest.param({}, "when", "no operator", id="empty-object"),
    pytest.param({"Variable": "$.a"}, "when", "no operator", id="zero-operators"),
    pytest.param(
        {"Variable": "$.a", "NumericEquals": 1, "NumericLessThan": 2},
        "when",
        "2 operators",
        id="two-operators",
    ),
    pytest.param(
        {"And": [rule("IsNull", True)], "Or": [rule("IsNull", True)]},
        "when",
        "2 operators",
        id="And-and-Or",
    ),
    pytest.param(
        {"Not": rule("IsNull", True), "Variable": "$.a", "IsNull": True},
        "when",
        "2 operators",
        id="Not-and-IsNull",
    ),
    pytest.param(rule("NumericEqual", 1), "when.NumericEqual", "unknown operator", id="unknown"),
    pytest.param(
        rule("StringMatchesPath", "$.a"),
        "when.StringMatchesPath",
        "unknown operator",
        id="no-StringMatchesPath-in-ASL",
    ),
    pytest.param(
        {"Variable": "$.a", "IsNull": True, "Next": "x"},
        "when.Next",
        "unknown operator",
        id="unknown-beside-valid",
    ),
    pytest.param(rule("stringequals", "a"), "when.stringequals", "unknown", id="case-sensitive"),
    # Variable
    pytest.param({"NumericEquals": 1}, "when.Variable", "required", id="missing-Variable"),
    pytest.param({"IsPresent": True}, "when.Variable", "required", id="missing-Variable-Is"),
    pytest.param(
        {"Variable": "$.a", "And": [rule("IsNull", True)]},
        "when.Variable",
        "not allowed with And",
        id="Variable-with-And",
    ),
    pytest.param(
        {"Variable": "$.a", "Not": rule("IsNull", True)},
        "when.Variable",
        "not allowed with Not",
        id="Variable-with-Not",
    ),
    pytest.param(rule("IsNull", True, 5), "when.Variable", "reference path", id="Variable-int"),
    pytest.param(rule("IsNull", True, None), "when.Variable", "reference path", id="Var-null"),
    pytest.param(rule("IsNull", True, "a.b"), "when.Variable", "'$'", id="Variable-no-dollar"),
    pytest.param(rule("IsNull", True, ""), "when.Variable", "'$'", id="Variable-empty"),
    pytest.param(rule("IsNull", True, "$.a["), "when.Variable", "invalid JSONPath", id="bad-1"),
    pytest.param(rule("IsNull", True, "$.a b"), "when.Variable", "invalid JSONPath", id="bad-2"),
    pytest.param(rule("IsNull", True, "$."), "when.Variable", "invalid JSONPath", id="bad-3"),
    pytest.param(rule("IsNull", True, "$$$.a"), "when.Variable", "invalid", id="triple-dollar"),
    pytest.param(rule("IsNull", True, "$..a"), "when.Variable", "single value", id="descendant"),
    pytest.param(rule("IsNull", True, "$.a[*]"), "when.Variable", "single value", id="wildcard"),
    pytest.param(rule("IsNull", True, "$.*"), "when.Variable", "single value", id="field-star"),
    pytest.param(rule("IsNull", True, "$.a[0:2]"), "when.Variable", "single value", id="slice"),
    pytest.param(rule("IsNull", True, "$.a[0,1]"), "when.Variable", "single value", id="indices"),
    pytest.param(rule("IsNull", True, "$['a','b']"), "when.Variable", "single value", id="fields"),
    pytest.param(rule("IsNull", True, "$.a[-1]"), "when.Variable", "single value", id="negative"),
    pytest.param(rule("IsNull", True, "$.a | $.b"), "when.Variable", "single value", id="union"),
    pytest.param(rule("IsNull", True, "$.a.$"), "when.Variable", "single value", id="inner-root"),
    pytest.param(
        rule("IsNull", True, "$.a.`parent`"), "when.Variable", "single value", id="parent"
    ),
    # operand types
    pytest.param(rule("NumericEquals", "1"), "when.NumericEquals", "number", id="Numeric-string"),
    pytest.param(rule("NumericEquals", True), "when.NumericEquals", "number", id="Numeric-bool"),
    pytest.param(rule("NumericEquals", None), "when.NumericEquals", "number", id="Numeric-null"),
    pytest.param(
        rule("NumericLessThan", math.nan), "when.NumericLessThan", "finite", id="Numeric-nan"
    ),
    pytest.param(
        rule("NumericGreaterThan", math.inf), "when.NumericGreaterThan", "finite", id="Num-inf"
    ),
    pytest.param(rule("StringEquals", 1), "when.StringEquals", "string", id="String-number"),
    pytest.param(
        rule("StringLessThan", ["a"]), "when.StringLessThan", "string", id="String-list"
    ),
    pytest.param(rule("StringMatches", 1), "when.StringMatches", "string", id="Matches-number"),
    pytest.param(
        rule("StringMatches", "abc\\"), "when.StringMatches", "backslash", id="Matches-trailing-\\"
    ),
    pytest.param(rule("BooleanEquals", 1), "when.BooleanEquals", "boolean", id="Boolean-number"),
    pytest.param(
        rule("BooleanEquals", "true"), "when.BooleanEquals", "boolean", id="Boolean-string"
    ),
    pytest.param(
        rule("TimestampEquals", "2020-01-01"), "when.TimestampEquals", "RFC3339", id="Ts-date"
    ),
    pytest.param(
        rule("TimestampEquals", "2020-01-01T00:00:00"),
        "when.TimestampEquals",
        "RFC3339",
        id="Ts-no-offset",
    ),
    pytest.param(
        rule("TimestampLessThan", "2020-01-01t00:00:00z"),
        "when.TimestampLessThan",
        "RFC3339",
        id="Ts-lowercase",
    ),
    pytest.param(
        rule("TimestampGreaterThan", "2020-02-30T00:00:00Z"),
        "when.TimestampGreaterThan",
        "RFC3339",
        id="Ts-no-such-day",
    ),
    pytest.param(
        rule("TimestampLessThanEquals", "2020-01-01T00:00:00+24:00"),
        "when.TimestampLessThanEquals",
        "RFC3339",
        id="Ts-offset-out-of-range",
    ),
    pytest.param(
        rule("TimestampGreaterThanEquals", 1577836800),
        "when.TimestampGreaterThanEquals",
        "RFC3339",
        id="Ts-epoch-number",
    ),
    pytest.param(rule("IsNull", "true"), "when.IsNull", "boolean", id="IsNull-string"),
    pytest.param(rule("IsPresent", 1), "when.IsPresent", "boolean", id="IsPresent-number"),
    pytest.param(rule("IsNumeric", None), "when.IsNumeric", "boolean", id="IsNumeric-null"),
    pytest.param(rule("IsString", 0), "when.IsString", "boolean", id="IsString-zero"),
    pytest.param(rule("IsBoolean", "yes"), "when.IsBoolean", "boolean", id="IsBoolean-string"),
    pytest.param(rule("IsTimestamp", {}), "when.IsTimestamp", "boolean", id="IsTimestamp-obj"),
    # …Path operands
    pytest.param(rule("NumericEqualsPath", 5), "when.NumericEqualsPath", "'$'", id="Path-number"),
    pytest.param(
        rule("StringEqualsPath", "s_same"), "when.StringEqualsPath", "'$'", id="Path-no-dollar"
    ),
    pytest.param(
        rule("BooleanEqualsPath", "$.a["), "when.BooleanEqualsPath", "invalid", id="Path-bad"
    ),
    pytest.param(
        rule("TimestampEqualsPath", "$..ts"),
        "when.TimestampEqualsPath",
        "single value",
        id="Path-descendant",
    ),
    # And / Or / Not
    pytest.param({"And": []}, "when.And", "non-empty list", id="And-empty"),
    pytest.param({"Or": []}, "when.Or", "non-empty list", id="Or-empty"),
    pytest.param({"And": rule("IsNull", True)}, "when.And", "list", id="And-object"),
    pytest.param({"Or": "x"}, "when.Or", "list", id="Or-string"),
    pytest.param({"Not": []}, "when.Not", "must be an object", id="Not-list"),
    pytest.param({"Not": [rule("IsNull", True)]}, "when.Not", "object", id="Not-list-of-rule"),
    pytest.param({"Not": "x"}, "when.Not", "must be an object", id="Not-string"),
    pytest.param({"Not": {}}, "when.Not", "no operator", id="Not-empty-rule"),
    pytest.param({"And": ["x"]}, "when.And[0]", "must be an object", id="And-member-string"),
    pytest.param(
        {"And": [rule("IsNull", True), rule("NumericEquals", "1")]},
        "when.And[1].NumericEquals",
        "number",
        id="nested-And-operand",
    ),
    pytest.param(
        {"Or": [{"Not": {"And": [{"IsNull": True}]}}]},
        "when.Or[0].Not.And[0].Variable",
        "required",
        id="nested-Or-Not-And-Variable",
    ),
    pytest.param(
        {"Not": {"Not": {"Or": [rule("IsNull", True), {"Variable": "$.a", "Nope": 1}]}}},
        "when.Not.Not.Or[1].Nope",
        "unknown operator",
        id="nested-unknown",
    ),
]


@pytest.mark.parametrize(("condition", "field_path", "problem"), VALIDATION_CASES)
def test_validation_error_names_field_path(condition: Any, field_path: str, problem: str) -> None:
    with pytest.raises(ConditionError) as caught:
        validate_condition(condition, source="wf/fn.json", field="when")
    assert caught.value.field == field_path
    assert caught.value.source == "wf/fn.json"
    assert problem in caught.value.problem
    assert str(caught.value).startswith(f"wf/fn.json: {field_path}: ")


def test_validation_field_path_extends_the_given_field() -> None:
    condition = {"And": [rule("IsNull", True), rule("NumericEquals", "1")]}
    with pytest.raises(ConditionError) as caught:
        validate_condition(condition, source="ir.json", field="instructions[2].when")
    assert caught.value.field == "instructions[2].when.And[1].NumericEquals"
    assert isinstance(caught.value, IRError)


def test_validation_with_empty_field_starts_at_the_key() -> None:
    with pytest.raises(ConditionError) as caught:
        validate_condition({"Not": []}, source="ir.json", field="")
    assert caught.value.field == "Not"


@pytest.mark.parametrize(
    "variable",
    ["$", "$$", "$.a", "$.a.b", "$.a[0]", "$['a b']", '$["a b"]', "$.a[0].b['c d'][12]", "$$.x"],
)
def test_valid_reference_paths(variable: str) -> None:
    validate_condition(rule("IsPresent", True, variable), source="ir.json", field="when")


# --------------------------------------------------------------------------------------------
# Properties.
# --------------------------------------------------------------------------------------------

numbers = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=8))
NUMERIC_OPERATORS = [
    "NumericEquals",
    "NumericLessThan",
    "NumericGreaterThan",
    "NumericLessThanEquals",
    "NumericGreaterThanEquals",
]


@given(value=numbers, operand=numbers)
def test_numeric_less_than_agrees_with_python(value: float, operand: float) -> None:
    output = {"v": value, "o": operand}
    assert evaluate(rule("NumericLessThan", operand, "$.v"), output, {}) is (value < operand)
    assert evaluate(rule("NumericLessThanPath", "$.o", "$.v"), output, {}) is (value < operand)


@given(name=st.sampled_from(NUMERIC_OPERATORS), value=json_scalars, operand=numbers)
def test_not_negates(name: str, value: Any, operand: float) -> None:
    leaf = rule(name, operand, "$.v")
    negated = {"Not": leaf}
    validate_condition(negated, source="p", field="when")
    assert evaluate(negated, {"v": value}, {}) is (not evaluate(leaf, {"v": value}, {}))


@given(value=json_scalars, operand=numbers)
def test_booleans_are_never_numbers(value: Any, operand: float) -> None:
    if isinstance(value, bool):
        assert evaluate(rule("NumericEquals", operand, "$.v"), {"v": value}, {}) is False
        assert evaluate(rule("IsNumeric", True, "$.v"), {"v": value}, {}) is False


def escape_pattern(text: str) -> str:
    """A StringMatches pattern matching exactly `text`."""
    return text.replace("\\", "\\\\").replace("*", "\\*")


@given(text=st.text(alphabet="ab*\\.?[", max_size=10), extra=st.text(min_size=1, max_size=3))
def test_escaped_pattern_matches_only_its_literal(text: str, extra: str) -> None:
    condition = rule("StringMatches", escape_pattern(text), "$.v")
    validate_condition(condition, source="p", field="when")
    assert evaluate(condition, {"v": text}, {}) is True
    assert evaluate(condition, {"v": text + extra}, {}) is False


instants = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc)
)
offsets = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


def rfc3339(moment: datetime) -> str:
    """`moment` rendered as RFC3339 with a numeric offset (or Z for UTC)."""
    return moment.isoformat().replace("+00:00", "Z")


@given(a=instants, b=instants, zone_a=offsets, zone_b=offsets)
def test_timestamp_order_agrees_with_datetime(
    a: datetime, b: datetime, zone_a: timezone, zone_b: timezone
) -> None:
    output = {"a": rfc3339(a.astimezone(zone_a)), "b": rfc3339(b.astimezone(zone_b))}
    assert evaluate(rule("TimestampLessThanPath", "$.b", "$.a"), output, {}) is (a < b)
    assert evaluate(rule("TimestampEqualsPath", "$.b", "$.a"), output, {}) is (a == b)


json_values = st.recursive(
    json_scalars | st.sampled_from(["$", "$.a", "$$.a", "$.a[0]", "$.a[", "$..a", "2020-01-01"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
operator_names = st.sampled_from(sorted(conditions._OPERATORS) + ["Variable", "Bogus"])
rules = st.recursive(
    st.dictionaries(operator_names, json_values, max_size=3),
    lambda inner: st.dictionaries(
        st.sampled_from(["And", "Or", "Not"]), st.lists(inner, max_size=2) | inner, max_size=2
    ),
    max_leaves=6,
)


@given(condition=rules, output=json_values)
def test_validation_and_evaluation_only_raise_their_own_errors(
    condition: Any, output: Any
) -> None:
    try:
        validate_condition(condition, source="fuzz", field="when")
    except ConditionError as error:
        assert error.field.startswith("when")
        return
    try:
        assert isinstance(evaluate(condition, output, {"a": output}), bool)
    except ConditionEvaluationError:
        pass


path_characters = st.sampled_from(list("$.[]'\"*,:?@()`|&-0123456789ab \\"))
path_texts = st.text(alphabet=path_characters, max_size=12)


@given(path=path_texts)
def test_any_variable_string_is_valid_or_a_condition_error(path: str) -> None:
    condition = rule("IsPresent", True, path)
    try:
        validate_condition(condition, source="fuzz", field="when")
    except ConditionError as error:
        assert error.field == "when.Variable"
        return
    assert isinstance(evaluate(condition, {"a": [1, {"b": 2}]}, {}), bool)
