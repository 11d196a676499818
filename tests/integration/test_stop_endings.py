"""Stop's ending is decided by the store for both shapes and against every other ending (issue 45):
a schedule runs the other actor's write right before each store operation of `stop_workflow` in
turn (tests/support/interleaving_store.py), and after its last one.

- the last result lands, for a workflow with one root-level result and for one whose results are
  written by two map branches (no root-level result);
- a failure lands (what an invocation's `record_failure` writes): FAILED (keeping the results
  the branches had committed) or STOPPED (with none);
- a second stop runs;
- a failing invocation (its delivery through the platforms' policy, `deliver` → `Runtime.fail`)
  and the deadline watchdog's failure, each against a stop in both directions: the other actor at
  every store operation of the stop, and the stop at every store operation of the other actor,
  with the outcome read after every operation of either: every reader's sequence is monotone
  (once STOPPED always STOPPED, once FAILED always FAILED: no failure write lands after a stop's
  claim, unum_entry/outcome.py's rule), over SQLite, the file store, DynamoDB (moto) and the
  Firestore emulator.

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
from unum_entry.envelope import DataRef, Envelope
from unum_entry.ir import parse_ir
from unum_entry.outcome import ENDED, WorkflowStatus, failure_record, read_outcome, record_failure, stop_workflow
from unum_entry.platforms.common import DeliveryStatus, RetryPolicy, deliver
from unum_entry.retention import Retention, store_retention
from unum_entry.runtime import Runtime
from unum_entry.stores import open_store
from unum_entry.stores.base import Store
from unum_entry.watchdog import Watchdog, fires_at

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


# ---- a failure against a stop, both ways, every reader's sequence monotone ----------------------

@pytest.fixture(params=["sqlite", "file", "dynamodb", "firestore"])
def any_store(request, tmp_path) -> Iterator[tuple[Store, str | None]]:
    """(store, URL for the CLI readers or None): the embedded stores and the real emulators."""
    if request.param == "dynamodb":  # over moto's wire protocol (tests/integration/conftest.py)
        yield request.getfixturevalue("dynamodb_store"), None
        return
    if request.param == "firestore":  # Google's emulator (tests/support/gcp_emulators.py)
        import uuid

        from unum_entry.stores.firestore import FirestoreStore

        emulator = request.getfixturevalue("firestore_emulator")
        opened: Store = FirestoreStore.from_url(f"firestore://unum-test-{uuid.uuid4().hex[:12]}"
                                                f"?project={emulator.project}")
        yield opened, None
        opened.close()
        return
    url = str(tmp_path / ("unum.db" if request.param == "sqlite" else "store"))
    opened = open_store(url)
    yield opened, url
    opened.close()


class _Watched(InterleavingStore):
    """An actor's store: after each of its operations the outcome of `workflow` is read from the
    store underneath and appended to `seen` (a reader polling between every two operations)."""

    def __init__(self, inner: Store, seen: list[WorkflowStatus], workflow: str,
                 injected: Callable[[Store], object] | None = None, at: int | None = None) -> None:
        super().__init__(inner, injected, at)
        self.seen, self.workflow = seen, workflow

    def _op(self, name, run):  # type: ignore[no-untyped-def]
        done = super()._op(name, run)
        self.seen.append(read_outcome(self.inner, self.workflow).status)
        return done


def _failing_invocation(store: Store, workflow: str) -> DeliveryStatus:
    """A terminal function whose handler raises, delivered as a platform does (one attempt)."""
    ir = parse_ir({"unum_ir": 1, "function": "Leaf", "handler": "app.handler", "max_attempts": 1})

    def handler(event: object, ctx: object) -> object:
        raise RuntimeError("boom")

    runtime = Runtime(ir, handler, store, _NoInvoker())
    try:
        env = Envelope.from_wire({"unum": 2, "workflow": workflow, "frames": [[0, 1, 0]], "inputs": [{"value": 1}],
                                  "deadline": store_retention(store).deadline()})
        return deliver(runtime, env, retry=RetryPolicy()).status
    finally:
        runtime.close()


def _watchdog_fires(store: Store, workflow: str) -> str:
    """The workflow's deadline watchdog fires when due (its clock at `fires_at`, before the deadline)."""
    real = store_retention(store)
    deadline = real.deadline()
    due = fires_at(real, deadline)
    retention = Retention(ttl_seconds=real.ttl_seconds, margin_seconds=real.margin_seconds, clock=lambda: due)
    watchdog = Watchdog("Leaf", store, _NoInvoker(), retention)
    return watchdog.fire(Envelope(workflow=workflow, inputs=(DataRef(value=None),), deadline=deadline, watchdog=True))


def _stop(store: Store, workflow: str) -> bool:
    return stop_workflow(store, workflow)


def _both_ways(store: Store, workflow: str, first: Callable[[Store, str], object],
               second: Callable[[Store, str], object]) -> list[tuple[str, object, object, list[WorkflowStatus]]]:
    """`second` lands before each store operation of `first` in turn (and after its last), on a
    fresh workflow each time, both actors watched: (workflow, first's answer, second's answer,
    the statuses read after every operation of either) per point."""
    dry = InterleavingStore(store)
    first(dry, f"{workflow}-dry")
    runs = []
    for at in range(len(dry.ops) + 1):
        name, seen, answers = f"{workflow}-{at}", [], []  # type: ignore[var-annotated]

        def injected(inner: Store, name: str = name, seen: list[WorkflowStatus] = seen,
                     answers: list[object] = answers) -> None:
            answers.append(second(_Watched(inner, seen, name), name))

        watched = _Watched(store, seen, name, injected, at)
        answer = first(watched, name)
        watched.finish()
        assert len(answers) == 1
        runs.append((name, answer, answers[0], seen))
    return runs


def _monotone(seen: list[WorkflowStatus]) -> bool:
    """Once a reader sees an ending, every later read sees the same one."""
    ended = [status for status in seen if status in ENDED]
    return all(status in ENDED for status in seen[seen.index(ended[0]):]) and len(set(ended)) <= 1 if ended else True


ORDERS = ["stop-first", "other-first"]


def _race(store: Store, workflow: str, other: Callable[[Store, str], object],
          order: str) -> list[tuple[str, bool, object, list[WorkflowStatus]]]:
    """The stop and `other` (`_both_ways`): the stop's answer first in each run."""
    if order == "stop-first":
        return [(name, bool(stop), answer, seen) for name, stop, answer, seen in _both_ways(store, workflow, _stop, other)]
    return [(name, bool(stop), answer, seen) for name, answer, stop, seen in _both_ways(store, workflow, other, _stop)]


@pytest.mark.parametrize("order", ORDERS)
def test_a_failing_invocation_and_a_stop_at_every_point_of_both_never_flip(any_store, order):
    store, url = any_store
    runs = _race(store, f"wf-inv-{order}", _failing_invocation, order)
    endings = set()
    for name, stopped, delivered, seen in runs:
        assert delivered is DeliveryStatus.FAILED, (name, delivered)
        assert _monotone(seen), f"{name}: a reader saw {[str(s) for s in seen]}"
        outcome = read_outcome(store, name)
        assert seen[-1] is outcome.status, (name, seen)
        if outcome.status is WorkflowStatus.STOPPED:
            assert stopped and outcome.results == [], name
        else:
            assert outcome.status is WorkflowStatus.FAILED and not stopped, (name, outcome)
            assert outcome.failure is not None and outcome.failure["Error"] == "RuntimeError", outcome.failure
        endings.add(outcome.status)
    assert endings == {WorkflowStatus.STOPPED, WorkflowStatus.FAILED}, endings  # both orders were reached
    if url is not None:
        readers = _readers(store, url, [name for name, *_ in runs])
        for name, *_ in runs:
            assert set(readers[name].values()) == {str(read_outcome(store, name).status)}, (name, readers[name])


@pytest.mark.parametrize("order", ORDERS)
def test_the_watchdogs_failure_and_a_stop_at_every_point_of_both_never_flip(any_store, order):
    store, _ = any_store
    runs = _race(store, f"wf-dog-{order}", _watchdog_fires, order)
    endings = set()
    for name, stopped, fired, seen in runs:
        assert _monotone(seen), f"{name}: a reader saw {[str(s) for s in seen]}"
        outcome = read_outcome(store, name)
        if outcome.status is WorkflowStatus.STOPPED:
            assert stopped and fired == "ended", (name, fired)
        else:
            assert outcome.status is WorkflowStatus.TIMED_OUT and not stopped and fired == "recorded", (name, fired)
        endings.add(outcome.status)
    assert endings == {WorkflowStatus.STOPPED, WorkflowStatus.TIMED_OUT}, endings
