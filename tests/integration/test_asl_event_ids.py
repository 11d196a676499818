"""AWS's "(entered at the event id #N)" prefix of runtime causes (issue 20), through the real CLI
(`python -m builder run`). The expected ids are those of real Step Functions histories: a Lambda
Task is 5 events (Entered, Scheduled, Started, Succeeded, Exited), Pass 2, a Parallel adds
Entered + Started before and Succeeded + Exited after its branches, a Map also
MapIterationStarted / Succeeded per item (the shapes recorded from us-east-1 in floci's
AslExecutorBranchHistoryEventsTest and the AWS workshop's 'Check Address' failure at #7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_asl_fidelity import NO_AWS, cli, failure

pytestmark = pytest.mark.integration

ECHO_TASK = "def handler(event, context):\n    return event\n"
FLAKY_TASK = ("class Flaky(Exception):\n    pass\n\n"
              "def handler(event, context):\n"
              "    if context.retry_count < 2:\n        raise Flaky('not yet')\n    return event\n")
BAD = {"Type": "Pass", "Parameters": {"m.$": "$.nope"}, "End": True}
MISSING = "The JSONPath '$.nope' specified for the field 'm.$' could not be found in the input"


def prefix(state: str, number: int) -> str:
    return f"States.Runtime: An error occurred while executing the state '{state}' (entered at the event id #{number}). "


CASES: list[tuple[str, dict[str, Any], Any, str]] = [
    ("first state", {"StartAt": "Bad", "States": {"Bad": BAD}}, {"x": "a"}, prefix("Bad", 2)),
    # the workshop's shape: a Lambda Task, then the failing state at #7
    ("after a task", {"StartAt": "Check", "States": {
        "Check": {"Type": "Task", "Resource": "Echo", "Next": "Bad"}, "Bad": BAD}}, {"x": "a"}, prefix("Bad", 7)),
    # Retry: every failed attempt adds Scheduled, Started, Failed
    ("after retries", {"StartAt": "Check", "States": {
        "Check": {"Type": "Task", "Resource": "Flaky", "Next": "Bad",
                  "Retry": [{"ErrorEquals": ["Flaky"], "IntervalSeconds": 1, "MaxAttempts": 3, "BackoffRate": 1}]},
        "Bad": BAD}}, {"x": "a"}, prefix("Bad", 13)),
    ("choice and wait", {"StartAt": "C", "States": {
        "C": {"Type": "Choice", "Choices": [{"Variable": "$.x", "StringEquals": "a", "Next": "W"}]},
        "W": {"Type": "Wait", "Seconds": 0, "Next": "Bad"}, "Bad": BAD}}, {"x": "a"}, prefix("Bad", 6)),
    # inside a Parallel's only branch: ExecutionStarted, ParallelStateEntered, ParallelStateStarted, #4
    ("one branch", {"StartAt": "P", "States": {"P": {"Type": "Parallel", "End": True, "Branches": [
        {"StartAt": "Fast", "States": {"Fast": BAD}}]}}}, {"x": "a"}, prefix("Fast", 4)),
    # the Parallel's own ResultSelector fails: the Parallel's Entered event
    ("parallel result selector", {"StartAt": "P", "States": {"P": {
        "Type": "Parallel", "End": True, "ResultSelector": {"m.$": "$.nope"},
        "Branches": [{"StartAt": "Ok", "States": {"Ok": {"Type": "Pass", "End": True}}}]}}}, {"x": "a"},
     prefix("P", 2)),
    # iteration 0 of a Map with MaxConcurrency 1: MapIterationStarted is #4, the state #5
    ("map iteration", {"StartAt": "M", "States": {"M": {
        "Type": "Map", "ItemsPath": "$.items", "MaxConcurrency": 1, "End": True,
        "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "Fast", "States": {"Fast": BAD}}}}},
     {"items": [{"x": 1}, {"nope": 2}]}, prefix("Fast", 5)),  # only item 0 fails (item 1 may start: lanes)
    # after a Parallel (two branches) and a Map (two items): the join adds every branch's events
    ("after fan-outs", {"StartAt": "P", "States": {
        "P": {"Type": "Parallel", "ResultPath": "$.p", "Next": "M", "Branches": [
            {"StartAt": "B1", "States": {"B1": {"Type": "Pass", "Next": "B2"}, "B2": {"Type": "Pass", "End": True}}},
            {"StartAt": "C1", "States": {"C1": {"Type": "Task", "Resource": "Echo", "End": True}}}]},
        "M": {"Type": "Map", "ItemsPath": "$.items", "ResultPath": "$.m", "Next": "Bad",
              "ItemProcessor": {"StartAt": "I", "States": {"I": {"Type": "Pass", "End": True}}}},
        "Bad": BAD}}, {"items": [1, 2]}, prefix("Bad", 27)),
    # a caught Task failure: Entered, Scheduled, Started, Failed, Exited, then the handler state
    ("after a catch", {"StartAt": "Check", "States": {
        "Check": {"Type": "Task", "Resource": "Flaky", "Next": "Bad",
                  "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Bad", "ResultPath": "$.error"}]},
        "Bad": BAD}}, {"x": "a"}, prefix("Bad", 7)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_runtime_cause_names_the_entered_event(case, tmp_path: Path) -> None:
    _, machine, input_value, expected = case
    proc = cli("run", machine, tmp_path, NO_AWS, input_value,
               env={"UNUM_ASL_TIME_SCALE": "0.001"}, functions={"Echo": ECHO_TASK, "Flaky": FLAKY_TASK})
    cause = failure(proc)
    assert cause.startswith(expected) and MISSING in cause, cause


def test_no_prefix_where_the_id_depends_on_interleaving(tmp_path: Path) -> None:
    """Inside one of several concurrent branches the id depends on how AWS interleaves their
    events: unum leaves the prefix out rather than guess."""
    machine = {"StartAt": "P", "States": {"P": {"Type": "Parallel", "End": True, "Branches": [
        {"StartAt": "Ok", "States": {"Ok": {"Type": "Pass", "End": True}}},
        {"StartAt": "Fast", "States": {"Fast": BAD}}]}}}
    cause = failure(cli("run", machine, tmp_path, NO_AWS, {"x": "a"}))
    assert cause.startswith(f"States.Runtime: {MISSING}"), cause


def test_nested_child_counts_its_own_history(tmp_path: Path) -> None:
    """A `.sync` child is an execution of its own: its states' ids start from its ExecutionStarted,
    and the cause names the state as the child's definition does."""
    (tmp_path / "Child.asl.json").write_text(
        '{"StartAt": "Prep", "States": {"Prep": {"Type": "Pass", "Next": "Fast"}, '
        '"Fast": {"Type": "Pass", "Parameters": {"m.$": "$.nope"}, "End": true}}}')
    machine = {"StartAt": "Start", "States": {
        "Start": {"Type": "Pass", "Next": "Call"},
        "Call": {"Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2", "End": True,
                 "Parameters": {"StateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:Child",
                                "Input": {"x": "a"}}}}}
    proc = cli("run", machine, tmp_path, NO_AWS, {})
    assert proc.returncode == 1, proc.stderr
    text = proc.stderr
    assert "An error occurred while executing the state 'Fast' (entered at the event id #4). " in text, text
