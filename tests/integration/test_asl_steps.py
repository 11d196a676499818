"""Idempotent steps (issue 6) inside compiled Step Functions Tasks: a `@durable` Task handler
gets the steps API through its Lambda-style context, and a Fail state or `ctx.abort` after a
compensated step runs the compensation exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.compiler import compile_state_machine
from unum_entry.codec import decode
from unum_entry.local.faults import FaultInjector, FaultRates
from unum_entry.local.platform import local_platform
from unum_entry.stores import open_store
from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.integration

CASE = Path(__file__).resolve().parents[1] / "asl_steps"


def run(tmp_path: Path, event: dict, faults: FaultInjector | None = None):
    out = compile_state_machine(CASE / "statemachine.json", tmp_path / "wf", functions=CASE / "functions").out
    store = open_store(str(tmp_path / "store"))
    with local_platform(load_workflow(out), store, workers=4, faults=faults) as platform:
        outcome = platform.run(event, timeout=60)
    balance = store.app_read("accounts", [event["account"]])
    store.close()
    return outcome, decode(balance[event["account"]].value)["balance"]


def test_a_task_step_commits_once_when_the_workflow_succeeds(tmp_path: Path) -> None:
    outcome, balance = run(tmp_path, {"account": "alice", "amount": 30})
    assert outcome.failure is None
    assert outcome.result["debit"]["balance"] == 70
    assert balance == 70


@pytest.mark.parametrize("seed", range(8))
def test_a_fail_state_compensates_the_debit_once_under_faults(tmp_path: Path, seed: int) -> None:
    faults = FaultInjector(FaultRates.everything(0.2), seed=seed)
    outcome, balance = run(tmp_path, {"account": "bob", "amount": 130}, faults)
    assert outcome.failure is not None and outcome.failure["Error"] == "Overdrawn"
    assert balance == 100  # debited to -30 once, refunded once


def test_ctx_abort_in_a_task_is_not_caught_and_compensates(tmp_path: Path) -> None:
    outcome, balance = run(tmp_path, {"account": "carol", "amount": 10, "abort": True})
    assert outcome.failure is not None and outcome.failure["Error"] == "Cancelled"
    assert balance == 100
