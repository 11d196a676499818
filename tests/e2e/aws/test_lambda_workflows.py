"""The example workflows as Lambda container images: built on the unum base (made from a local OS
image), run under the RIE behind the local asynchronous Invoke endpoint, DynamoDB on moto.

Each result must equal the in-process run of the same workflow (same workflow id), and the table
must hold nothing of the workflow but its results afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unum_entry.local.platform import local_platform
from unum_entry.stores.base import Kind
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


def leftovers(stack, workflow_id: str) -> list[tuple[str, str]]:
    return [(r.kind.value, r.key) for r in stack.store.records(workflow_id) if r.kind is not Kind.RESULT]


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
    assert leftovers(stack, workflow_id) == []
    assert [a for a in stack.endpoint.attempts[seen:] if a.outcome != "ok"] == []
