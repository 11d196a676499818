"""Stop against the last branch result, at every store operation of the stop: one ending, decided
by the store, and every reader sees that one (issue 45).

The workflow's results are written by the branches of a map (two terminal branches, no root-level
result: `record_result` / a terminal function's commit at positions [0] and [1] of 2). Branch 0
has committed. The stop runs through each of its front ends — the library (`stop_workflow`), the
CLI (`python -m builder stop`'s command) and the web console's action (`builder.ui.actions`) —
over `InterleavingStore` (tests/support/interleaving_store.py), and branch 1 commits (through the
Runtime, as a delivery would) right before the stop's store operation number k, for every k, and
after its last one. Each schedule is judged by the contract:

- one ending: SUCCEEDED with both results and no failure record standing, or STOPPED with no
  result — and the stop said it stopped exactly when the ending is STOPPED;
- the store decided it: a reader right after branch 1's commit saw an ending only if it is the
  final one (a success seen by anyone is never turned into STOPPED afterwards);
- every reader agrees: `read_outcome` (inspect, run, the console's pane), `list`'s rows
  (builder.ui.listing) and the console's list (builder.ui.pages).

The same holds for a stop that died between its claim and its failure record once both results
are in, and for two stops with the branch commit between them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator

import pytest

from tests.support.interleaving_store import InterleavingStore
from unum_entry.envelope import Envelope
from unum_entry.errors import UnumError
from unum_entry.ir import parse_ir
from unum_entry.outcome import ENDED, WorkflowStatus, claim_result, failure_record, read_outcome, stop_workflow
from unum_entry.retention import store_retention
from unum_entry.runtime import Runtime
from unum_entry.stores import open_store
from unum_entry.stores.base import Store

pytestmark = pytest.mark.integration

BRANCHES = 2


class _NoInvoker:
    def invoke(self, function: str, payload: dict) -> None:
        raise AssertionError(f"a terminal branch invoked {function}")


@pytest.fixture(params=["sqlite", "file", "dynamodb"])
def store(request, tmp_path) -> Iterator[Store]:
    if request.param == "dynamodb":  # over moto's wire protocol (tests/integration/conftest.py)
        yield request.getfixturevalue("dynamodb_store")
        return
    opened = open_store(str(tmp_path / ("unum.db" if request.param == "sqlite" else "store")))
    yield opened
    opened.close()


def _commit_branch(store: Store, workflow: str, index: int) -> None:
    """Branch `index` of the map runs its terminal function: its commit is its result record."""
    ir = parse_ir({"unum_ir": 1, "function": "Leaf", "handler": "app.handler"})
    runtime = Runtime(ir, lambda event, ctx: {"leaf": event}, store, _NoInvoker())
    try:
        runtime.handle(Envelope.from_wire({"unum": 2, "workflow": workflow, "frames": [[0, 1, 0], [index, BRANCHES, 0]],
                                           "inputs": [{"value": index}], "deadline": store_retention(store).deadline()}))
    finally:
        runtime.close()


def _stop_library(store: Store, workflow: str) -> bool:
    return stop_workflow(store, workflow)


def _stop_cli(store: Store, workflow: str) -> bool:
    from builder.commands import options
    from builder.commands.stop import cmd_stop

    opened, options.open_existing_store = options.open_existing_store, lambda url: store  # type: ignore[assignment]
    try:
        return cmd_stop(argparse.Namespace(store="(test)", workflow_id=workflow, error=None, cause=None)) == 0
    except UnumError as exc:
        assert "has already ended" in str(exc)
        return False
    finally:
        options.open_existing_store = opened  # type: ignore[assignment]


def _stop_ui(store: Store, workflow: str) -> bool:
    from builder.ui.actions import run_action

    try:
        return run_action(store, "stop", {"w": [workflow]}) == workflow
    except UnumError as exc:
        assert "has already ended" in str(exc)
        return False


FRONT_ENDS: dict[str, Callable[[Store, str], bool]] = {"library": _stop_library, "cli": _stop_cli, "ui": _stop_ui}


def _statuses(store: Store, workflow: str) -> dict[str, WorkflowStatus]:
    """What each reader says of `workflow`."""
    from builder.ui.listing import list_workflows
    from builder.ui.pages import RunFilter, query_runs

    row = next(r for r in list_workflows(store) if r.workflow == workflow)
    shown = next(r for r in query_runs(store, RunFilter()).rows if r["workflow"] == workflow)
    return {"read_outcome": read_outcome(store, workflow).status, "list": row.status,
            "console": WorkflowStatus(shown["status"])}


def _judge(store: Store, workflow: str, stopped: bool, seen_after_commit: list[WorkflowStatus]) -> WorkflowStatus:
    """The contract (module docstring); returns the ending."""
    readers = _statuses(store, workflow)
    ending = readers["read_outcome"]
    assert set(readers.values()) == {ending}, f"readers disagree: {readers}"
    outcome = read_outcome(store, workflow)
    if ending is WorkflowStatus.SUCCEEDED:
        assert outcome.results == [{"leaf": i} for i in range(BRANCHES)] and outcome.failure is None
        assert not stopped, "the stop said it stopped a workflow that succeeded"
    else:
        assert ending is WorkflowStatus.STOPPED, readers
        assert outcome.results == [] and stopped
    for seen in seen_after_commit:
        assert seen not in ENDED or seen is ending, f"a reader saw {seen} when the last branch committed, then {ending}"
    return ending


def _dry_run(make: Callable[[], Store], stop: Callable[[Store, str], bool]) -> int:
    """How many store operations the stop makes on an unfinished two-branch workflow."""
    store = make()
    _commit_branch(store, "wf-dry", 0)
    counting = InterleavingStore(store)
    stop(counting, "wf-dry")
    return len(counting.ops)


@pytest.mark.parametrize("front_end", sorted(FRONT_ENDS))
def test_the_last_branch_committing_at_every_point_of_a_stop_leaves_one_ending(store, front_end):
    stop = FRONT_ENDS[front_end]
    points = _dry_run(lambda: store, stop)
    assert points >= 2, "the stop reads and writes"
    endings = []
    for at in range(points + 1):
        workflow = f"wf-{front_end}-{at}"
        _commit_branch(store, workflow, 0)
        seen: list[WorkflowStatus] = []

        def last_branch(inner: Store, workflow: str = workflow, seen: list[WorkflowStatus] = seen) -> None:
            _commit_branch(inner, workflow, 1)
            seen.append(read_outcome(inner, workflow).status)

        wrapped = InterleavingStore(store, last_branch, at)
        stopped = stop(wrapped, workflow)
        wrapped.finish()
        seen.append(read_outcome(store, workflow).status)
        endings.append((at, wrapped.ops[at] if at < len(wrapped.ops) else "end",
                        _judge(store, workflow, stopped, seen)))
    # both endings happen: the branch before the stop's first operation wins; after its last, the stop
    assert endings[0][2] is WorkflowStatus.SUCCEEDED and endings[-1][2] is WorkflowStatus.STOPPED, endings


def test_a_stop_that_died_after_its_claim_refuses_a_later_result(store):
    """A claim made while results were incomplete, the process gone before its failure record:
    the workflow reads stopped, the last branch's result is refused by the store, and the stop
    run again completes it."""
    _commit_branch(store, "wf-half", 0)
    assert claim_result(store, "wf-half", _stop_record())
    assert read_outcome(store, "wf-half").status is WorkflowStatus.STOPPED
    _commit_branch(store, "wf-half", 1)  # refused: the claim came first
    assert _judge(store, "wf-half", True, [read_outcome(store, "wf-half").status]) is WorkflowStatus.STOPPED
    assert stop_workflow(store, "wf-half") and not stop_workflow(store, "wf-half")
    assert _judge(store, "wf-half", True, []) is WorkflowStatus.STOPPED


def test_a_claim_made_after_the_results_yields_to_them(store):
    """A stop that claimed after every branch had committed (and died, or has yet to read the
    results): the results came first, so every reader says succeeded, and the stop is refused."""
    for index in range(BRANCHES):
        _commit_branch(store, "wf-late-claim", index)
    assert claim_result(store, "wf-late-claim", _stop_record())
    assert _judge(store, "wf-late-claim", False, []) is WorkflowStatus.SUCCEEDED
    assert not stop_workflow(store, "wf-late-claim")
    assert _judge(store, "wf-late-claim", False, []) is WorkflowStatus.SUCCEEDED


def _stop_record() -> dict:
    record = failure_record("Unum.Stopped", "died", function="", invocation="", attempts=0)
    record["Stopped"] = True
    return record


def test_two_stops_with_the_last_branch_between_them_stop_once(store):
    _commit_branch(store, "wf-two", 0)
    assert stop_workflow(store, "wf-two")
    _commit_branch(store, "wf-two", 1)
    assert not stop_workflow(store, "wf-two")
    assert _judge(store, "wf-two", True, []) is WorkflowStatus.STOPPED
