"""A redriven state machine keeps its top-level `TimeoutSeconds` (issue 45): the redrive arms the
execution timeout again, counted from the redrive (unum_entry.watchdog, "After a redrive"), so
a redriven run that outlasts it ends `timed out` (States.Timeout) exactly once — through the real
CLI, also when the redrive process is SIGKILLed after its claim, after clearing the failure
record, after its first commit, or while its Task runs, and what docs/history.md says continues
it (`redrive` again, or `run … --resume`) finishes it; and a redriven run that ends within its own
TimeoutSeconds succeeds although the first attempt's deadline passed meanwhile.

Times are scaled by UNUM_ASL_TIME_SCALE (every ASL time is): TimeoutSeconds 200 lasts 2 s."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:"
SCALE = "0.01"
TIMEOUT = 200  # scaled: 2 s


def env() -> dict[str, str]:
    return {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "UNUM_ASL_TIME_SCALE": SCALE}


def cli(*args: Any, cwd: Path, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [*(prefix or [sys.executable, "-m", "builder"]), *map(str, args)]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120, env=env())


def machine(root: Path, timeout: int = TIMEOUT) -> Path:
    """First (counts its calls) -> Second: fails its first call at once; every later call sleeps
    the seconds in the file `sleep` (real time, not scaled), then answers."""
    code = root / "functions"
    (code / "First").mkdir(parents=True)
    (code / "First" / "app.py").write_text(
        "from pathlib import Path\nCALLS = Path(%r)\n"
        "def handler(event, context):\n"
        "    CALLS.write_text(str(int(CALLS.read_text()) + 1) if CALLS.exists() else '1')\n"
        "    return {'n': event.get('n', 0) + 1}\n" % str(root / "first-calls"))
    (code / "Second").mkdir()
    (code / "Second" / "app.py").write_text(
        "import time\nfrom pathlib import Path\nSEEN = Path(%r)\nSLEEP = Path(%r)\n"
        "def handler(event, context):\n"
        "    seen = int(SEEN.read_text()) if SEEN.exists() else 0\n"
        "    SEEN.write_text(str(seen + 1))\n"
        "    if seen == 0:\n        raise RuntimeError('first call fails')\n"
        "    time.sleep(float(SLEEP.read_text()))\n"
        "    return {'fixed': event}\n" % (str(root / "second-calls"), str(root / "sleep")))
    path = root / "statemachine.json"
    path.write_text(json.dumps({"StartAt": "First", "TimeoutSeconds": timeout, "States": {
        "First": {"Type": "Task", "Resource": LAMBDA + "First", "Next": "Second"},
        "Second": {"Type": "Task", "Resource": LAMBDA + "Second", "End": True}}}))
    return path


def failed_run(root: Path, sleep: float, timeout: int = TIMEOUT) -> tuple[Path, Path]:
    """The machine run once: it fails in Second; later calls of Second sleep `sleep` s."""
    path = machine(root, timeout)
    (root / "sleep").write_text(str(sleep))
    store = root / "unum.db"
    ran = cli("run", path, "--workflow-id", "w", "--input", '{"n": 1}', "--store", store, cwd=root)
    assert ran.returncode == 1 and "first call fails" in ran.stderr, ran.stderr
    return path, store


def assert_timed_out_once(root: Path, store: Path, *, task_committed: bool = True) -> None:
    """inspect, list and the history agree: timed out by States.Timeout, one ExecutionTimedOut,
    no result, First ran once (and, `task_committed`, the redriven Task's late commit is there)."""
    shown = cli("inspect", "w", "--store", store, cwd=root)
    report = json.loads(shown.stdout)
    assert shown.returncode == 1 and report["status"] == "timed out", report
    assert report["failure"]["Error"] == "States.Timeout" and report["results"] == [], report
    assert [row["status"] for row in json.loads(cli("list", "--json", "--store", store, cwd=root).stdout)] == \
        ["timed out"]
    history = json.loads(cli("inspect", "w", "--store", store, "--history", "--json", cwd=root).stdout)
    types = [e["type"] for e in history["events"]]
    assert types.count("ExecutionTimedOut") == 1 and types[-1] == "ExecutionTimedOut", types
    assert any(e.get("redrive") == 1 for e in history["events"]) is task_committed, types
    assert (root / "first-calls").read_text() == "1"


def test_a_redriven_run_that_outlasts_its_timeout_seconds_times_out(tmp_path: Path) -> None:
    path, store = failed_run(tmp_path, sleep=6)
    time.sleep(2.5)  # the first attempt's TimeoutSeconds elapses while it is failed
    redriven = cli("redrive", "w", "--workflow", path, "--store", store, cwd=tmp_path)
    assert redriven.returncode == 1, redriven.stderr
    assert "States.Timeout" in redriven.stderr and "Traceback" not in redriven.stderr, redriven.stderr
    assert_timed_out_once(tmp_path, store)


def test_the_timeout_counts_from_the_redrive(tmp_path: Path) -> None:
    """TimeoutSeconds 4 s; the redrive comes ~2 s after the start and its run lasts 2.5 s: it
    ends after the first attempt's deadline, within its own, and succeeds."""
    path, store = failed_run(tmp_path, sleep=2.5, timeout=400)
    time.sleep(1.5)
    done = cli("redrive", "w", "--workflow", path, "--store", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"fixed": {"n": 2}}
    assert json.loads(cli("inspect", "w", "--store", store, cwd=tmp_path).stdout)["status"] == "succeeded"


KILL_AFTER = [sys.executable, "-m", "tests.support.kill_after"]


@pytest.mark.parametrize("writes", [1, 2, 3])
def test_a_redrive_killed_after_each_of_its_first_writes_still_times_out(tmp_path: Path, writes: int) -> None:
    """SIGKILLed right after its claim (1: the workflow reads failed, `redrive` again continues
    the dead one's claim), after clearing the failure record (2: nothing journaled, `run
    --resume` continues the redrive), after its first commit (3: what it sent is journaled,
    `run --resume` re-drives it); each continuation then outlasts TimeoutSeconds and times out."""
    path, store = failed_run(tmp_path, sleep=6)
    killed = cli("redrive", "w", "--workflow", path, "--store", store, cwd=tmp_path,
                 prefix=[*KILL_AFTER, str(writes)])
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    shown = json.loads(cli("inspect", "w", "--store", store, cwd=tmp_path).stdout)
    status = shown["status"]
    if writes == 1:
        assert status == "failed"
        again = cli("redrive", "w", "--workflow", path, "--store", store, cwd=tmp_path)
    elif status == "timed out":
        assert writes == 3
        again = cli("run", path, "--workflow-id", "w", "--resume", "--store", store, cwd=tmp_path)
    else:  # interrupted, and inspect prints the command that continues it (docs/history.md): run as printed
        assert status == "interrupted", shown
        words = shlex.split(shown["resume"])
        assert words[words.index("run"):] == ["run", str(path), "--workflow-id", "w", "--resume", "--store",
                                              str(store)], shown
        again = cli(*words[words.index("run"):], cwd=tmp_path)
    assert again.returncode == 1 and "States.Timeout" in again.stderr, again.stderr
    assert_timed_out_once(tmp_path, store, task_committed=status != "timed out")


def test_a_redrive_killed_while_its_task_runs_is_timed_out_by_run_resume(tmp_path: Path) -> None:
    """kill -9 of the redrive while the redriven Task sleeps: its timer is journaled with what it
    sent; `run --resume` re-drives both and the timeout ends the workflow once."""
    path, store = failed_run(tmp_path, sleep=6)
    proc = subprocess.Popen([sys.executable, "-m", "builder", "redrive", "w", "--workflow", str(path), "--store",
                             str(store)], cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env())
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    seen = ""
    while "redrive 1 of workflow w" not in seen and time.monotonic() < deadline and proc.poll() is None:
        seen += proc.stderr.readline()
    time.sleep(0.5)  # inside Second's sleep
    proc.kill()
    proc.communicate(timeout=60)
    shown = json.loads(cli("inspect", "w", "--store", store, cwd=tmp_path).stdout)
    assert shown["status"] == "interrupted" and "--resume" in shown["resume"], shown
    # the command inspect prints (docs/history.md, Redrive), run as printed after the program name
    words = shlex.split(shown["resume"])
    assert words[words.index("run"):] == ["run", str(path), "--workflow-id", "w", "--resume", "--store", str(store)]
    resumed = cli(*words[words.index("run"):], cwd=tmp_path)
    assert resumed.returncode == 1 and "States.Timeout" in resumed.stderr, resumed.stderr
    assert_timed_out_once(tmp_path, store)
