"""A nested `.sync` Task's TimeoutSeconds (issue 20), on durable timers: a child that takes longer
fails the Task with States.Timeout (its Catch applies), through the real CLI; a child that ends
first wins, and the timer that fires later changes nothing (the join commits once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SLOW = "import time\n\ndef handler(event, context):\n    time.sleep(event['sleep'])\n    return {'slept': event['sleep']}\n"


def folder(tmp_path: Path, timeout: dict[str, Any], catch: bool = True) -> Path:
    (tmp_path / "functions" / "Slow").mkdir(parents=True, exist_ok=True)
    (tmp_path / "functions" / "Slow" / "app.py").write_text(SLOW)
    (tmp_path / "Child.asl.json").write_text(json.dumps(
        {"StartAt": "Slow", "States": {"Slow": {"Type": "Task", "Resource": "Slow", "End": True}}}))
    run: dict[str, Any] = {"Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2", **timeout,
                           "Parameters": {"StateMachineArn": "Child", "Input": {"sleep.$": "$.sleep"}},
                           "ResultSelector": {"status.$": "$.Status", "output.$": "$.Output"}, "End": True}
    states: dict[str, Any] = {"Run": run}
    if catch:
        run["Catch"] = [{"ErrorEquals": ["States.Timeout"], "Next": "TimedOut"}]
        states["TimedOut"] = {"Type": "Pass", "Parameters": {"error.$": "$.Error"}, "End": True}
    (tmp_path / "statemachine.json").write_text(json.dumps({"StartAt": "Run", "States": states}))
    return tmp_path


def run(work: Path, input_value: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", "run", str(work), "--input", json.dumps(input_value),
                           "--store", str(work / "store"), "--compact", "--timeout", "60"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=dict(os.environ))


def test_a_child_slower_than_timeout_seconds_fails_the_task_with_states_timeout(tmp_path: Path) -> None:
    started = time.monotonic()
    proc = run(folder(tmp_path, {"TimeoutSeconds": 2}), {"sleep": 4})

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"error": "States.Timeout"}  # caught
    assert time.monotonic() - started < 30


def test_timeout_seconds_path_and_an_uncaught_timeout_fail_the_workflow(tmp_path: Path) -> None:
    proc = run(folder(tmp_path, {"TimeoutSecondsPath": "$.limit"}, catch=False), {"sleep": 4, "limit": 2})

    assert proc.returncode == 1
    assert "States.Timeout: the nested state machine did not end within TimeoutSeconds (2 s)" in proc.stderr, proc.stderr


def test_a_child_that_ends_first_wins_and_the_later_timer_changes_nothing(tmp_path: Path) -> None:
    from builder.compiler import compile_state_machine
    from unum_entry.local.platform import local_platform
    from unum_entry.stores import open_store
    from unum_entry.workflow import load_workflow

    work = folder(tmp_path, {"TimeoutSeconds": 1})
    out = compile_state_machine(work / "statemachine.json", tmp_path / "wf").out
    store = open_store(str(tmp_path / "store"))
    with local_platform(load_workflow(out), store, workers=4) as platform:
        outcome = platform.run({"sleep": 0}, workflow_id="wf-first", timeout=60)
        platform.wait_idle(30, until=time.time() + 3)  # the timeout's timer fires at the committed join
        after = platform.outcome("wf-first")
    store.close()
    expected = {"status": "SUCCEEDED", "output": {"slept": 0}}
    assert outcome.failure is None and outcome.result == expected
    assert after.failure is None and after.result == expected


@pytest.mark.parametrize("seed", range(3))
def test_timeout_or_child_decides_once_under_faults(tmp_path: Path, seed: int) -> None:
    """Duplicated, crashed and failing deliveries (timers too): the slow child's Task times out
    and is caught exactly as without faults."""
    from builder.compiler import compile_state_machine
    from unum_entry.local.faults import FaultInjector, FaultRates
    from unum_entry.local.platform import local_platform
    from unum_entry.stores import open_store
    from unum_entry.workflow import load_workflow

    work = folder(tmp_path, {"TimeoutSeconds": 1})
    out = compile_state_machine(work / "statemachine.json", tmp_path / "wf").out
    store = open_store(str(tmp_path / "store"))
    with local_platform(load_workflow(out), store, workers=4,
                        faults=FaultInjector(FaultRates.everything(0.2), seed=seed)) as platform:
        outcome = platform.run({"sleep": 3}, timeout=60)
    store.close()
    assert outcome.failure is None and outcome.result == {"error": "States.Timeout"}, outcome


def test_heartbeat_seconds_of_a_sync_task_fails_a_slower_child_with_heartbeat_timeout(tmp_path: Path) -> None:
    """AWS applies HeartbeatSeconds to the job-run (.sync) pattern; nothing sends a .sync Task a
    heartbeat here, so a child running past it fails the Task with States.HeartbeatTimeout, before
    the (longer) TimeoutSeconds."""
    work = folder(tmp_path, {"TimeoutSeconds": 30, "HeartbeatSeconds": 1}, catch=False)
    started = time.monotonic()
    proc = run(work, {"sleep": 4})

    assert proc.returncode == 1
    assert ("States.HeartbeatTimeout: the nested state machine sent no heartbeat within HeartbeatSeconds (1 s)"
            in proc.stderr), proc.stderr
    assert time.monotonic() - started < 25


def test_a_child_faster_than_heartbeat_seconds_path_is_unaffected(tmp_path: Path) -> None:
    proc = run(folder(tmp_path, {"HeartbeatSecondsPath": "$.beat"}), {"sleep": 0, "beat": 3})  # run waits for the timer: keep it short

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "SUCCEEDED"
