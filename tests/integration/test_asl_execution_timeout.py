"""A state machine's top-level `TimeoutSeconds` (an execution timeout) through the real CLI:
the workflow ends `timed out` with States.Timeout when it elapses, on the entry function's timer
(unum_entry.watchdog); a Task still running then cannot record a result afterwards; a machine
that ends in time is unaffected; a bad value is one line naming the field. The timeout honours
`UNUM_ASL_TIME_SCALE` as every ASL time does (here 0.001: 500 s last half a second)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from unum_entry.outcome import WorkflowStatus, read_outcome
from unum_entry.stores import open_store
from unum_entry.stores.base import Kind

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCALE = "0.001"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=180, env={**os.environ, "UNUM_ASL_TIME_SCALE": SCALE})


def machine(folder: Path, timeout: object, sleep: float) -> Path:
    """A Task that sleeps `sleep` real seconds (user code: not scaled), then a Pass; the machine's
    TimeoutSeconds is `timeout` (scaled)."""
    (folder / "functions" / "slow").mkdir(parents=True)
    (folder / "functions" / "slow" / "app.py").write_text(
        f"import time\ndef handler(event, context):\n    time.sleep({sleep})\n    return {{'slept': {sleep}}}\n")
    path = folder / "statemachine.json"
    path.write_text(json.dumps({"StartAt": "Slow", "TimeoutSeconds": timeout, "States": {
        "Slow": {"Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:slow", "Next": "Done"},
        "Done": {"Type": "Pass", "End": True}}}))
    return path


def test_the_execution_times_out_when_timeout_seconds_elapse(tmp_path):
    db = str(tmp_path / "unum.db")
    # 500 s scaled are 0.5 s: the Task's 1.5 real seconds outlast it (unscaled, the run would succeed)
    ran = cli("run", str(machine(tmp_path / "m", 500, 1.5)), "--input", "{}", "--store", db, "--workflow-id", "wf-slow")
    assert ran.returncode == 1, ran.stderr
    assert ran.stderr.splitlines()[-1] == ("error: workflow wf-slow timed out: States.Timeout: the execution timed "
                                           "out: its TimeoutSeconds (500 s) elapsed")
    shown = cli("inspect", "wf-slow", "--store", db)
    report = json.loads(shown.stdout)
    assert shown.returncode == 1 and report["status"] == "timed out" and report["results"] == []
    assert report["failure"]["Error"] == "States.Timeout"
    listed = json.loads(cli("list", "--json", "--store", db).stdout)
    assert [row["status"] for row in listed] == ["timed out"]
    history = json.loads(cli("inspect", "wf-slow", "--store", db, "--history", "--json").stdout)
    assert history["events"][-1]["type"] == "ExecutionTimedOut"
    # the Task finished after the timeout (its commit is in the history) but no result was recorded
    assert any(e["type"] == "LambdaFunctionSucceeded" for e in history["events"])
    store = open_store(db)
    try:
        assert [r.key for r in store.records("wf-slow") if r.kind is Kind.RESULT] == []
        assert read_outcome(store, "wf-slow").status is WorkflowStatus.TIMED_OUT
    finally:
        store.close()
    again = cli("stop", "wf-slow", "--store", db)
    assert again.returncode == 2 and "has already ended (timed out)" in again.stderr


def test_a_machine_that_ends_in_time_succeeds(tmp_path):
    db = str(tmp_path / "unum.db")
    ran = cli("run", str(machine(tmp_path / "m", 60000, 0)), "--input", "{}", "--store", db, "--workflow-id", "wf-fast")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"slept": 0}  # 60000 s scaled: a minute
    assert json.loads(cli("inspect", "wf-fast", "--store", db).stdout)["status"] == "succeeded"


@pytest.mark.parametrize("bad", [0, "ten", 1.5])
def test_a_bad_timeout_seconds_is_one_line(tmp_path, bad):
    ran = cli("compile", str(machine(tmp_path / "m", bad, 0)), "--out", str(tmp_path / "out"))
    assert ran.returncode == 2
    assert len(ran.stderr.strip().splitlines()) == 1 and "TimeoutSeconds" in ran.stderr, ran.stderr
