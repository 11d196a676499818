"""The example workflows as Lambda container images: built on the unum base (made from a local OS
image), run under the RIE behind the local asynchronous Invoke endpoint, DynamoDB on moto.

Each result must equal the in-process run of the same workflow (same workflow id), and the table
must hold nothing of the workflow afterwards but its result and retained objects that expire
within the store's TTL (tests/support/retained.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.retained import assert_only_ttl_bounded, outcome_kinds
from unum_entry.local.platform import local_platform
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.e2e

IMAGES = Path(__file__).resolve().parents[3] / "images"
WORKFLOWS = ["chain", "parallel", "map-aggregate", "iot-pipeline"]


def _input(folder: Path):
    path = folder / "input.json"
    return json.loads(path.read_text()) if path.is_file() else {"name": "lambda"}


def in_process_result(folder: Path, input_value, workflow_id: str):
    with local_platform(load_workflow(folder), MemoryStore()) as platform:
        return platform.run(input_value, workflow_id=workflow_id, timeout=60).result


def left_outcome(stack, workflow_id: str) -> list[str]:
    """The kinds of the outcome records the workflow left in the table, after checking that all
    else it left is retained only until an expiry within the TTL."""
    return outcome_kinds(assert_only_ttl_bounded(stack.store, workflow_id))


@pytest.mark.parametrize("name", WORKFLOWS)
def test_workflow_in_lambda_containers(name: str, lambda_stack) -> None:
    folder = IMAGES / name
    stack = lambda_stack(folder)
    input_value = _input(folder)
    workflow_id = f"wf-e2e-{name}"
    seen = len(stack.endpoint.attempts)  # the stack is shared with other tests

    outcome = stack.run(input_value, workflow_id=workflow_id)

    assert outcome.failure is None, outcome.failure
    assert outcome.result == in_process_result(folder, input_value, workflow_id)
    expected = folder / "expected.json"
    if expected.is_file():
        assert outcome.result == json.loads(expected.read_text())
    assert left_outcome(stack, workflow_id) == ["result"]
    assert [a for a in stack.endpoint.attempts[seen:] if a.outcome != "ok"] == []
