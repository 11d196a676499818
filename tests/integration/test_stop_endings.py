"""Stop's ending is decided by the store for both shapes and against every other ending (issue 45):
a schedule runs the other actor's write right before each store operation of `stop_workflow` in
turn (tests/support/interleaving_store.py), and after its last one.

- the last result lands, for a workflow with one root-level result and for one whose results are
  written by two map branches (no root-level result);
- a failure lands (what an invocation's `record_failure` writes): FAILED (keeping the results
  the branches had committed) or STOPPED (with none);
- a second stop runs.

Judged by the contract: exactly one ending (SUCCEEDED with every result and no failure standing,
STOPPED with no result, or FAILED with the failure), the stop's answer agreeing with it, and every
reader agreeing: `read_outcome`, `python -m builder inspect` (its report and exit code) and
`python -m builder list --json`, run as a user would (the readers in the console are covered by
tests/integration/test_stop_schedules.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.interleaving_store import InterleavingStore
from unum_entry.envelope import Envelope
from unum_entry.ir import parse_ir
from unum_entry.outcome import WorkflowStatus, failure_record, read_outcome, record_failure, stop_workflow
from unum_entry.retention import store_retention
from unum_entry.runtime import Runtime
from unum_entry.stores import open_store
from unum_entry.stores.base import Store

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SHAPES = {"root": [[[0, 1, 0]]], "branches": [[[0, 1, 0], [0, 2, 0]], [[0, 1, 0], [1, 2, 0]]]}


class _NoInvoker:
    def invoke(self, function: str, payload: dict) -> None:
        raise AssertionError(f"a terminal function invoked {function}")


@pytest.fixture(params=["sqlite", "file"])
def store_url(request, tmp_path) -> str:
    return str(tmp_path / ("unum.db" if request.param == "sqlite" else "store"))


@pytest.fixture
def store(store_url) -> Iterator[Store]:
    opened = open_store(store_url)
    yield opened
    opened.close()


def _commit(store: Store, workflow: str, frames: list[list[int]]) -> None:
    """A terminal function runs at `frames` through the Runtime, as a delivery would: its commit
    is its result record (`record_result`)."""
    ir = parse_ir({"unum_ir": 1, "function": "Leaf", "handler": "app.handler"})
    runtime = Runtime(ir, lambda event, ctx: {"leaf": event}, store, _NoInvoker())
    try:
        runtime.handle(Envelope.from_wire({"unum": 2, "workflow": workflow, "frames": frames,
                                           "inputs": [{"value": frames[-1][0]}],
                                           "deadline": store_retention(store).deadline()}))
    finally:
        runtime.close()


def _fail(store: Store, workflow: str) -> None:
    record_failure(store, workflow, failure_record("Boom", "it broke", function="Leaf", invocation="i",
                                                   attempts=1))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)


def _readers(store: Store, store_url: str, workflows: list[str]) -> dict[str, dict[str, str]]:
    """What each reader says of each workflow: read_outcome, `inspect` (status, exit code), `list`."""
    listed = _cli("list", "--json", "--store", store_url)
    assert listed.returncode == 0, listed.stderr
    rows = {row["workflow"]: row["status"] for row in json.loads(listed.stdout)}
    said = {}
    for workflow in workflows:
        shown = _cli("inspect", workflow, "--store", store_url)
        report = json.loads(shown.stdout)
        status = read_outcome(store, workflow).status
        assert shown.returncode == (0 if status is WorkflowStatus.SUCCEEDED else 1), (workflow, shown)
        said[workflow] = {"read_outcome": str(status), "inspect": report["status"], "list": rows[workflow]}
    return said


def _schedule(store: Store, workflow: str, before: Callable[[Store, str], None],
              other: Callable[[Store, str], object]) -> list[tuple[str, bool]]:
    """For each point of the stop: a fresh workflow (`before` run on it), the stop with `other`
    landing at that point; returns (workflow, did the stop stop it) per point."""
    dry = f"{workflow}-dry"
    before(store, dry)
    counting = InterleavingStore(store)
    stop_workflow(counting, dry)
    assert len(counting.ops) >= 2, "the stop reads and writes"
    runs = []
    for at in range(len(counting.ops) + 1):
        name = f"{workflow}-{at}"
        before(store, name)
        wrapped = InterleavingStore(store, lambda inner, name=name: other(inner, name), at)
        stopped = stop_workflow(wrapped, name)
        wrapped.finish()
        runs.append((name, stopped))
    return runs


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_last_result_at_every_point_of_a_stop_leaves_one_ending(store, store_url, shape):
    *first, last = SHAPES[shape]

    def before(inner: Store, workflow: str) -> None:
        for frames in first:
            _commit(inner, workflow, frames)

    runs = _schedule(store, f"wf-{shape}", before, lambda inner, workflow: _commit(inner, workflow, last))
    readers = _readers(store, store_url, [name for name, _ in runs])
    endings = []
    for name, stopped in runs:
        said = readers[name]
        assert len(set(said.values())) == 1, f"readers disagree on {name}: {said}"
        outcome = read_outcome(store, name)
        if outcome.status is WorkflowStatus.SUCCEEDED:
            assert not stopped and outcome.failure is None
            assert outcome.results == [{"leaf": frames[-1][0]} for frames in SHAPES[shape]]
        else:
            assert outcome.status is WorkflowStatus.STOPPED and stopped and outcome.results == [], (name, said)
        endings.append(outcome.status)
    assert endings[0] is WorkflowStatus.SUCCEEDED and endings[-1] is WorkflowStatus.STOPPED, endings


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_failure_at_every_point_of_a_stop_leaves_one_ending(store, store_url, shape):
    *first, _ = SHAPES[shape]

    def before(inner: Store, workflow: str) -> None:
        for frames in first:
            _commit(inner, workflow, frames)

    runs = _schedule(store, f"wf-fail-{shape}", before, _fail)
    readers = _readers(store, store_url, [name for name, _ in runs])
    endings = []
    for name, stopped in runs:
        said = readers[name]
        assert len(set(said.values())) == 1, f"readers disagree on {name}: {said}"
        outcome = read_outcome(store, name)
        if outcome.status is WorkflowStatus.FAILED:  # a failure keeps what the branches committed
            assert not stopped and outcome.failure is not None and outcome.failure["Error"] == "Boom"
        else:
            assert outcome.status is WorkflowStatus.STOPPED and stopped and outcome.results == [], (name, said)
        endings.append(outcome.status)
    assert endings[0] is WorkflowStatus.FAILED and endings[-1] is WorkflowStatus.STOPPED, endings


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_two_stops_at_once_stop_it_once(store, store_url, shape):
    *first, _ = SHAPES[shape]

    def before(inner: Store, workflow: str) -> None:
        for frames in first:
            _commit(inner, workflow, frames)

    answers: dict[str, bool] = {}

    def second(inner: Store, workflow: str) -> None:
        answers[workflow] = stop_workflow(inner, workflow)

    runs = _schedule(store, f"wf-two-{shape}", before, second)
    readers = _readers(store, store_url, [name for name, _ in runs])
    for name, stopped in runs:
        assert [stopped, answers[name]].count(True) == 1, (name, stopped, answers[name])
        assert set(readers[name].values()) == {"stopped"}, (name, readers[name])
        assert read_outcome(store, name).results == []
