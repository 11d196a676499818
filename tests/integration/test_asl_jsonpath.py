"""JSONPath through the real CLI (`python -m builder run|compile`): a Choice reads workflow
variables through the one JSONPath selector, and a bracket key keeps a backslash before the
other quote as AWS does (`$['Test\\""Name"']`). No AWS call is made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_asl_fidelity import NO_AWS, cli, failure

pytestmark = pytest.mark.integration

# Assign a variable, then branch on it: on its own, against the input (`…Path` operand), inside it.
VARIABLE_CHOICE = {"StartAt": "Remember", "States": {
    "Remember": {"Type": "Pass", "Assign": {"limit.$": "$.limit", "order": {"items": [{"id": 7}]}}, "Next": "Route"},
    "Route": {"Type": "Choice", "Default": "Small", "Choices": [
        {"And": [{"Variable": "$limit", "NumericGreaterThan": 5},
                 {"Variable": "$.n", "NumericLessThanEqualsPath": "$limit", "Comment": "n within the limit"}],
         "Next": "Big"},
        {"Variable": "$order.items[0].id", "NumericEquals": 7, "Next": "Seven"}]},
    "Big": {"Type": "Pass", "Result": "big", "End": True},
    "Seven": {"Type": "Pass", "Result": "seven", "End": True},
    "Small": {"Type": "Pass", "Result": "small", "End": True}}}


@pytest.mark.parametrize("input_value, expected", [
    ({"limit": 10, "n": 3}, "big"),     # $limit > 5 and $.n <= $limit
    ({"limit": 10, "n": 11}, "seven"),  # $.n > $limit: the next rule reads inside $order
    ({"limit": 2, "n": 1}, "seven"),
])
def test_a_choice_branches_on_workflow_variables(tmp_path: Path, input_value: dict[str, Any], expected: str) -> None:
    proc = cli("run", VARIABLE_CHOICE, tmp_path, NO_AWS, input_value)

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == expected


def test_a_choice_on_an_undefined_variable_fails_naming_the_path_as_written(tmp_path: Path) -> None:
    definition = {"StartAt": "Route", "States": {
        "Route": {"Type": "Choice", "Default": "Done",
                  "Choices": [{"Variable": "$nobody.x", "NumericEquals": 1, "Next": "Done"}]},
        "Done": {"Type": "Succeed"}}}
    proc = cli("run", definition, tmp_path, NO_AWS, {})

    assert failure(proc).startswith("States.Runtime: ")
    assert failure(proc).endswith("Invalid path '$nobody.x': no value is present there")


def test_a_choice_variable_path_that_selects_several_values_is_rejected_at_compile_time(tmp_path: Path) -> None:
    definition = {"StartAt": "Route", "States": {
        "Route": {"Type": "Choice", "Default": "Done",
                  "Choices": [{"Variable": "$order.items[*]", "IsPresent": True, "Next": "Done"}]},
        "Done": {"Type": "Succeed"}}}
    proc = cli("compile", definition, tmp_path, NO_AWS)

    assert proc.returncode == 2
    assert "'Route'" in proc.stderr and "Choices[0].Variable" in proc.stderr and "single value" in proc.stderr
    assert "Traceback" not in proc.stderr


AWS_KEY_PATH = "$['Test\\\"\"Name\"']"  # the documented example: the key is Test\""Name"


def test_a_backslash_before_the_other_quote_stays_in_the_key(tmp_path: Path) -> None:
    definition = {"StartAt": "Pick", "States": {
        "Pick": {"Type": "Pass", "Parameters": {"picked.$": AWS_KEY_PATH}, "Next": "Route"},
        "Route": {"Type": "Choice", "Default": "Other",
                  "Choices": [{"Variable": "$.picked", "StringEquals": "with backslash", "Next": "Same"}]},
        "Same": {"Type": "Pass", "Result": "as on AWS", "End": True},
        "Other": {"Type": "Fail", "Error": "Unescaped"}}}
    input_value = {'Test\\""Name"': "with backslash", 'Test""Name"': "without backslash"}
    proc = cli("run", definition, tmp_path, NO_AWS, input_value)

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == "as on AWS"


def test_a_choice_variable_with_the_aws_key(tmp_path: Path) -> None:
    definition = {"StartAt": "Route", "States": {
        "Route": {"Type": "Choice", "Default": "Other",
                  "Choices": [{"Variable": AWS_KEY_PATH, "StringEquals": "with backslash", "Next": "Same"}]},
        "Same": {"Type": "Pass", "Result": "as on AWS", "End": True},
        "Other": {"Type": "Pass", "Result": "unescaped", "End": True}}}
    proc = cli("run", definition, tmp_path, NO_AWS, {'Test\\""Name"': "with backslash"})

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == "as on AWS"
