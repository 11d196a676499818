"""The event-id arithmetic of AWS's "(entered at the event id #N)" prefix (unum_entry/asl/event_ids.py)."""

from __future__ import annotations

import pytest

from unum_entry.asl import event_ids

pytestmark = pytest.mark.unit


def test_counts_follow_aws_histories() -> None:
    assert event_ids.task_events(1) == 4            # Entered, Scheduled, Started, Succeeded (Exited apart)
    assert event_ids.task_events(3) == 10           # two failed attempts retried
    assert event_ids.join_events("Parallel", [4, 2]) == 10    # Entered, Started, 6, Succeeded, Exited
    assert event_ids.join_events("Map", [3, 3]) == 12         # + MapIterationSucceeded per item
    assert event_ids.join_events("Map", []) == 4


def test_entered_is_absolute_only_where_the_branch_base_is_known() -> None:
    assert event_ids.entered([], 1) == 2
    assert event_ids.entered([{"parent": None, "ev0": 3}], 0) == 4
    assert event_ids.entered([{"parent": None}], 0) is None    # one of several concurrent branches
    assert event_ids.entered([], None) is None


def test_only_runtime_errors_get_the_prefix_and_a_nested_childs_state_keeps_its_own_name() -> None:
    stack = [{"parent": None, "ev0": 0, "strip": len("Call.")}]
    assert event_ids.prefixed("Call.Fast", stack, 3, "States.Runtime", "boom") == (
        "An error occurred while executing the state 'Fast' (entered at the event id #4). boom")
    assert event_ids.prefixed("S", [], 1, "States.TaskFailed", "boom") == "boom"
    assert event_ids.prefixed("S", [], None, "States.Runtime", "boom") == "boom"
    assert event_ids.prefixed("S", [], 1, "States.Runtime", None) is None
