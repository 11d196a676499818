"""The execution history (unum_entry.history) and stop over Firestore's emulator: the same
store contract, so the same history as on the file store and DynamoDB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unum_entry import load_workflow, local_platform
from unum_entry.history import events, read_history
from unum_entry.outcome import WorkflowStatus, read_outcome, stop_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


def test_history_of_a_map_on_firestore(firestore_store):
    given = json.loads((REPO / "images/map-aggregate/input.json").read_text())
    with local_platform(load_workflow(REPO / "images/map-aggregate"), firestore_store) as platform:
        outcome = platform.run(given, timeout=120)
    assert outcome.status is WorkflowStatus.SUCCEEDED
    history = read_history(firestore_store, outcome.workflow_id)
    assert history.input == given and history.duration_ms is not None
    functions = [s.function for s in history.steps]
    words = history.steps[0].output["words"]
    assert functions == ["Split", *["Measure"] * len(words), "Summarize"]
    assert sorted(s.position[-1][0] for s in history.steps if s.function == "Measure") == list(range(len(words)))
    numbered = events(history, "succeeded")
    assert [e["id"] for e in numbered] == list(range(1, len(numbered) + 1))
    assert numbered[0]["type"] == "ExecutionStarted" and numbered[-1]["type"] == "ExecutionSucceeded"
    assert not stop_workflow(firestore_store, outcome.workflow_id)  # it ended: a stop changes nothing
    assert read_outcome(firestore_store, outcome.workflow_id).status is WorkflowStatus.SUCCEEDED
