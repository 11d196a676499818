"""Two `python -m builder run --workflow-id SAME` processes at once (the second with `--resume`), the driving one
killed with SIGKILL mid-run (issue 45): the survivor, which waited for the driver's outcome,
notices the driver is gone, continues the workflow from what was committed and journaled, and
finishes it once — the fault-free result, every state's handler run, and only the handler that
was in flight at the kill run again (at-least-once: its commit is once). Bounded waits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SLOW = '''import os, time
def handler(event, context):
    with open(os.path.join(os.environ["MARK_DIR"], "mark-%d" % event["step"]), "a") as f:
        f.write("x")
    time.sleep(1.0)
    return {"step": event["step"]}
'''
STEPS = 4


def chain(tmp_path: Path) -> Path:
    (tmp_path / "functions" / "Slow").mkdir(parents=True)
    (tmp_path / "functions" / "Slow" / "app.py").write_text(SLOW)
    slow = "arn:aws:lambda:us-east-1:123456789012:function:Slow"
    states: dict[str, Any] = {f"S{i}": {"Type": "Task", "Resource": slow, "Parameters": {"step": i},
                                        "Next": f"S{i + 1}"} for i in range(STEPS)}
    del states[f"S{STEPS - 1}"]["Next"]
    states[f"S{STEPS - 1}"]["End"] = True
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps({"StartAt": "S0", "States": states}))
    return path


def marks(tmp_path: Path) -> list[int]:
    return [len(p.read_text()) if (p := tmp_path / f"mark-{i}").is_file() else 0 for i in range(STEPS)]


def test_two_resumes_of_one_id_the_driver_killed_the_survivor_finishes_it_once(tmp_path: Path) -> None:
    path = chain(tmp_path)
    store = tmp_path / "store"
    env = {**os.environ, "MARK_DIR": str(tmp_path)}
    args = [sys.executable, "-m", "builder", "run", str(path), "--input", "{}", "--store", str(store),
            "--workflow-id", "wf-two", "--resume", "--compact"]
    starting = [a for a in args if a != "--resume"]  # the driver starts it
    driver = subprocess.Popen(starting, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    survivor = None
    try:
        deadline = time.monotonic() + 30
        while marks(tmp_path)[0] == 0:  # the driver runs S0
            assert time.monotonic() < deadline and driver.poll() is None, "the driver never ran S0"
            time.sleep(0.05)
        survivor = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=env)
        while marks(tmp_path)[1] == 0:  # mid-run: S1's handler in flight in the driver
            assert time.monotonic() < deadline and driver.poll() is None, "the driver never reached S1"
            time.sleep(0.05)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
        out, err = survivor.communicate(timeout=90)
    finally:
        driver.kill()
        if survivor is not None:
            survivor.kill()
    assert survivor.returncode == 0, err
    assert "waiting for its outcome" in err and "continuing it here" in err
    assert json.loads(out) == {"step": STEPS - 1}
    counts = marks(tmp_path)
    assert all(c >= 1 for c in counts), counts  # every state ran
    assert sum(counts) <= STEPS + 1 and max(counts) <= 2, counts  # only the one in flight at the kill again
    assert counts[0] == 1 and counts[-1] == 1, counts  # before the kill and after it: once
    again = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
    assert again.returncode == 0 and json.loads(again.stdout) == {"step": STEPS - 1}
    assert "has already ended" in again.stderr
    assert marks(tmp_path) == counts  # the ended workflow's outcome is printed: nothing runs again
