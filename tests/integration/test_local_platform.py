"""The embedded platform's failure paths: bad envelopes, unknown targets, failing handlers.

Each must give a clear error naming what and where, mark the workflow failed where there is a
workflow, and leave nothing corrupted (no result, no stray checkpoints or sets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from unum_entry.local.platform import local_platform
from unum_entry.stores.file import FileStore
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration


def write(root: Path, functions: dict[str, tuple[str, list]], **ir_fields: dict) -> Path:
    """A workflow with entry A whose functions are one-line handler bodies."""
    sources = {name: FunctionSource(f"def handler(event, context):\n    {body}\n", instructions, ir_fields.get(name, {}))
               for name, (body, instructions) in functions.items()}
    write_workflow(root, name="t", entry="A", functions=sources)
    return root


def kinds(store: FileStore) -> list[str]:
    return sorted(r.kind.value for r in store.records())


def test_handler_that_always_fails_marks_the_workflow_failed(tmp_path):
    folder = write(tmp_path / "wf", {
        "A": ("return {'n': event}", [{"op": "invoke", "function": "B"}]),
        "B": ("raise ValueError(f'bad n {event[\"n\"]}')", []),
    }, B={"max_attempts": 2})
    store = FileStore(tmp_path / "store")
    with local_platform(load_workflow(folder), store) as platform:
        outcome = platform.run(7, timeout=30)
        assert platform.stats["handler_retries"] == 1
    assert outcome.results == []
    assert outcome.failure == {"Error": "ValueError", "Cause": "bad n 7", "Function": "B",
                               "Invocation": outcome.failure["Invocation"], "Attempts": 2}
    assert kinds(store) == ["failure"]  # A's checkpoint and the start marker were collected


def test_handler_that_recovers_on_retry_sees_the_attempt_number(tmp_path):
    folder = write(tmp_path / "wf", {
        "A": ("return context.attempt if context.attempt >= 2 else 1 / 0", []),
    })
    store = FileStore(tmp_path / "store")
    with local_platform(load_workflow(folder), store) as platform:
        outcome = platform.run(None, timeout=30)
    assert outcome.failure is None and outcome.results == [2]
    assert kinds(store) == ["result"]


def test_output_that_cannot_be_stored_fails_with_the_function_named(tmp_path):
    folder = write(tmp_path / "wf", {"A": ("return {1, 2}", [])})
    with local_platform(load_workflow(folder), FileStore(tmp_path / "store")) as platform:
        outcome = platform.run(None, timeout=30)
    assert outcome.failure["Function"] == "A"
    assert "output of function 'A' cannot be stored" in outcome.failure["Cause"]


def test_map_over_a_non_list_fails_without_a_retry(tmp_path):
    folder = write(tmp_path / "wf", {
        "A": ("return {'xs': 3}", [{"op": "map", "function": "B", "items": "$.xs"}]),
        "B": ("return event", []),
    })
    with local_platform(load_workflow(folder), FileStore(tmp_path / "store")) as platform:
        outcome = platform.run(None, timeout=30)
        assert platform.stats["handler_retries"] == 0
    assert outcome.failure["Error"] == "PlanError"
    assert "map over 'B' needs a list at $.xs, found int" in outcome.failure["Cause"]


@pytest.mark.parametrize("payload, words", [
    ({"unum": 1, "workflow": "wf-x", "frames": [[0, 1]], "inputs": [{"value": 1}]}, "envelope.frames[0]"),
    ({"unum": 1, "workflow": "wf-x", "frames": [[0, 1, 0]], "inputs": [{"ref": 5}]}, "envelope.inputs[0].ref"),
    ({"hello": "world"}, "envelope.unum"),
])
def test_malformed_envelopes_are_dead_lettered_with_the_field(tmp_path, payload, words):
    folder = write(tmp_path / "wf", {"A": ("return event", [])})
    store = FileStore(tmp_path / "store")
    with local_platform(load_workflow(folder), store) as platform:
        platform.submit("A", payload)
        platform.wait_idle(10)
        assert len(platform.dead_letters) == 1 and words in platform.dead_letters[0]
    assert kinds(store) == []


def test_invoke_of_an_unknown_function_is_dead_lettered(tmp_path):
    folder = write(tmp_path / "wf", {"A": ("return event", [])})
    with local_platform(load_workflow(folder), FileStore(tmp_path / "store")) as platform:
        platform.submit("Nope", {"unum": 1, "workflow": "wf-x", "frames": [[0, 1, 0]], "inputs": [{"value": 1}]})
        platform.wait_idle(10)
        assert platform.dead_letters == ["invoke of unknown function 'Nope' in workflow wf-x"]


def test_duplicate_start_after_the_workflow_ran_does_not_change_the_result(tmp_path):
    folder = write(tmp_path / "wf", {
        "A": ("import random; return random.random()", [{"op": "invoke", "function": "B"}]),
        "B": ("return event", []),
    })
    store = FileStore(tmp_path / "store")
    with local_platform(load_workflow(folder), store) as platform:
        first = platform.run(None, workflow_id="wf-dup", timeout=30)
        again = platform.run(None, workflow_id="wf-dup", timeout=30)
    assert again.results == first.results
    assert kinds(store) == ["result"]
