"""Redrive against stop at every store operation of both (issue 45), the schedule of
tests/integration/test_stop_endings.py: a workflow failed in a real failing delivery (`deliver` →
`Runtime.fail`, its failure stamped), then `unum_entry.redrive.redrive` and `stop_workflow`, the
one landing before each store operation of the other in turn (and after its last), the outcome
read after every operation of either, over SQLite, the file store, DynamoDB (moto) and the
Firestore emulator.

Judged by the contract: exactly one of the two acts (the stop of a failed workflow changes
nothing; a stop once the redrive cleared the failure record stops the redriven run, and what the
redrive sends then finds it ended), the redrive never refused as "being redriven" nor leaving a
second claim, and every reader's sequence monotone in its phases: failed, then running (the
redrive cleared the failure), then stopped — never back, never another ending."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_stop_endings import ORDERS, _both_ways, _failing_invocation, _stop, any_store  # noqa: F401
from unum_entry import naming
from unum_entry.outcome import WorkflowStatus, read_outcome
from unum_entry.redrive import CannotRedrive, redrive
from unum_entry.stores.base import Store

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PHASE = {WorkflowStatus.FAILED: 0, WorkflowStatus.RUNNING: 1, WorkflowStatus.STOPPED: 2}


class _Recording:
    """The redrive's invoker: what it sends is kept (not run)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.sent.append(function)


def _redrive(store: Store, workflow: str) -> str:
    """A redrive of `workflow`: "redriven N", or the one line it was refused with."""
    try:
        return f"redriven {redrive(store, workflow, _Recording()).number}"
    except CannotRedrive as exc:
        return str(exc)


def _failed(store: Store, workflow: str) -> None:
    from unum_entry.platforms.common import DeliveryStatus

    assert _failing_invocation(store, workflow) is DeliveryStatus.FAILED


def _phases_monotone(seen: list[WorkflowStatus]) -> bool:
    return all(s in PHASE for s in seen) and all(PHASE[a] <= PHASE[b] for a, b in zip(seen, seen[1:]))


@pytest.mark.parametrize("order", ["stop-first", "redrive-first"])
def test_a_redrive_and_a_stop_at_every_point_of_both_end_once(any_store, order):  # noqa: F811
    store, url = any_store
    prefix = f"wf-rd-{order}"

    def failed_first(act: Any) -> Any:  # each run's workflow fails (unwatched, uncounted) before `act` starts
        def first(watched: Any, workflow: str) -> Any:
            _failed(watched.inner, workflow)
            return act(watched, workflow)
        return first

    if order == "stop-first":
        runs = [(name, bool(stopped), answer, seen) for name, stopped, answer, seen in
                _both_ways(store, prefix, failed_first(_stop), _redrive)]
    else:
        runs = [(name, bool(stopped), answer, seen) for name, answer, stopped, seen in
                _both_ways(store, prefix, failed_first(_redrive), _stop)]
    finals = set()
    for name, stopped, answer, seen in runs:
        assert _phases_monotone(seen), f"{name}: a reader saw {[str(s) for s in seen]}"
        outcome = read_outcome(store, name)
        assert not seen or seen[-1] is outcome.status, (name, seen)
        assert "being redriven" not in str(answer), (name, answer)
        assert store.get(naming.redrive_key(name, 1)) is None, name  # one redrive at most
        if stopped:
            assert outcome.status is WorkflowStatus.STOPPED and outcome.results == [], (name, outcome)
            assert answer == "redriven 0" or "was stopped" in str(answer) or "did not fail (stopped)" in str(answer), \
                (name, answer)
        else:  # the stop found it failed (before the redrive cleared it): the redrive runs it again
            assert answer == "redriven 0" and outcome.status is WorkflowStatus.RUNNING, (name, answer, outcome)
        finals.add(outcome.status)
    assert finals == {WorkflowStatus.STOPPED, WorkflowStatus.RUNNING}, finals  # both orders were reached
    if url is not None:  # the CLI's readers agree with the store's
        listed = {row["workflow"]: row["status"] for row in json.loads(_cli("list", "--json", "--store", url).stdout)}
        for name, *_ in runs:
            status = read_outcome(store, name).status
            shown = json.loads(_cli("inspect", name, "--store", url).stdout)["status"]
            expected = {"stopped"} if status is WorkflowStatus.STOPPED else {"running", "interrupted"}
            assert shown in expected and listed[name] in expected, (name, shown, listed[name])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=False)
