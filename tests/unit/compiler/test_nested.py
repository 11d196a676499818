"""Nested state machines (issue 20): the child's states renamed under the Task, every reference
to them too (Next, Default, Choice and Catch targets, nested branches and iterators); the runner's
result and failure shapes. Pure: the file lookup is covered through the CLI (test_asl_fidelity)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from builder.compiler.nested import _renamed
from unum_entry.asl import nested

pytestmark = pytest.mark.unit


def test_every_state_and_reference_of_the_child_is_renamed() -> None:
    child = {"StartAt": "C", "QueryLanguage": "JSONPath", "Version": "1.0", "States": {
        "C": {"Type": "Choice", "Choices": [{"Variable": "$.x", "IsPresent": True, "Next": "P"}], "Default": "M"},
        "P": {"Type": "Parallel", "Next": "M", "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "F"}],
              "Branches": [{"StartAt": "B", "States": {"B": {"Type": "Pass", "End": True}}}]},
        "M": {"Type": "Map", "End": True, "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "I",
                                                            "States": {"I": {"Type": "Pass", "End": True}}}},
        "F": {"Type": "Fail"}}}
    renamed = _renamed(child, "Run.")

    assert renamed["StartAt"] == "Run.C" and sorted(renamed["States"]) == ["Run.C", "Run.F", "Run.M", "Run.P"]
    assert "Version" not in renamed and renamed["QueryLanguage"] == "JSONPath"
    states = renamed["States"]
    assert states["Run.C"]["Choices"][0]["Next"] == "Run.P" and states["Run.C"]["Default"] == "Run.M"
    assert states["Run.P"]["Next"] == "Run.M" and states["Run.P"]["Catch"][0]["Next"] == "Run.F"
    assert states["Run.P"]["Branches"][0] == {"StartAt": "Run.B", "States": {"Run.B": {"Type": "Pass", "End": True}}}
    assert states["Run.M"]["ItemProcessor"]["StartAt"] == "Run.I"
    assert states["Run.M"]["ItemProcessor"]["ProcessorConfig"] == {"Mode": "INLINE"}


MARKER = {"Resource": "arn:aws:states:::states:startExecution.sync", "StateMachineArn": "Child", "StateMachine": "Child"}
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def test_the_child_execution_and_aws_result_shapes() -> None:
    child_input, execution = nested.start(MARKER, {"Input": '{"a": 1}', "Name": "kid"}, "inv", "Run", NOW)
    assert child_input == {"a": 1}
    assert execution["Id"] == "arn:aws:states:us-east-1:123456789012:execution:Child:kid"
    assert list(execution) == ["Id", "Input", "StartTime", "Name", "RoleArn", "RedriveCount"]

    text = nested.result(MARKER, execution, {"b": 2}, NOW)
    assert (text["Input"], text["Output"], text["Status"]) == ('{"a":1}', '{"b":2}', "SUCCEEDED")
    assert text["StartDate"] == text["StopDate"] == int(NOW.timestamp() * 1000)
    as_json = nested.result({**MARKER, "Resource": MARKER["Resource"] + ":2"}, execution, {"b": 2}, NOW)
    assert (as_json["Input"], as_json["Output"]) == ({"a": 1}, {"b": 2})

    failed = nested.failure(MARKER, execution, {"Error": "E", "Cause": "C"}, NOW)
    assert failed["Error"] == "States.TaskFailed"
    assert {k: v for k, v in json.loads(failed["Cause"]).items() if k in ("Error", "Cause", "Status", "Name")} == \
        {"Error": "E", "Cause": "C", "Status": "FAILED", "Name": "kid"}


def test_a_child_without_a_name_gets_one_derived_from_the_starting_invocation() -> None:
    first = nested.start(MARKER, {"Input": {}}, "inv-1", "Run", NOW)[1]["Name"]
    assert first == nested.start(MARKER, {}, "inv-1", "Run", NOW)[1]["Name"]  # a replay starts the same child
    assert first != nested.start(MARKER, {}, "inv-2", "Run", NOW)[1]["Name"]  # a retry starts another
