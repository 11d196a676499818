"""Faults with real containers: a function's container dies in the middle of an invocation and
stays down for a while, and another function gets its event delivered twice. The workflow must
still end with one result, equal to the in-process run, and leave nothing else in the table but
retained objects that expire within the store's TTL."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.aws.test_lambda_workflows import in_process_result, left_outcome
from unum_entry.outcome import read_outcome

pytestmark = pytest.mark.e2e

CHAIN = Path(__file__).resolve().parents[3] / "images" / "chain"


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_container_killed_mid_invocation_and_duplicate_delivery(lambda_stack) -> None:
    stack = lambda_stack(CHAIN)
    endpoint = stack.endpoint
    shout = stack.containers["Shout"].get_wrapped_container()
    workflow_id = "wf-e2e-fault"
    seen = len(endpoint.attempts)

    shout.pause()  # the next request to Shout is accepted by the kernel and hangs
    endpoint.duplicate_next("Sign")
    stack.start_workflow({"name": "fault"}, workflow_id)
    assert endpoint.wait_running("Shout", 60), "Shout was never invoked"
    shout.unpause()
    shout.kill()  # the execution environment dies with the request in flight
    _wait_for(lambda: any(a.function == "Shout" and a.outcome == "unavailable" for a in endpoint.attempts[seen:]),
              30, "a retry of Shout to find its container down")
    stack.containers["Shout"].restart()
    assert endpoint.wait_idle(120), endpoint.stats

    mine = endpoint.attempts[seen:]
    outcome = read_outcome(stack.store, workflow_id)
    assert outcome.failure is None, outcome.failure
    assert outcome.results == [in_process_result(CHAIN, {"name": "fault"}, workflow_id)]
    assert left_outcome(stack, workflow_id) == ["result"]
    shout_outcomes = [a.outcome for a in mine if a.function == "Shout"]
    # the request in flight died with the container (a function error), retries found it down
    # (unavailable, not counted as attempts), and the delivery after the restart went through
    assert shout_outcomes[0] == "function_error" and "unavailable" in shout_outcomes, shout_outcomes
    assert shout_outcomes[-1] == "ok", shout_outcomes
    assert [a.outcome for a in mine if a.function == "Sign"] == ["ok", "ok"]  # delivered twice, one result
