"""Redrive of a compiled state machine (unum_entry.redrive): a Task whose error ends the workflow
commits that decision in its checkpoint, and a redrive sends the invocation again under a fresh
name (`redriven_frame`), so the handler runs again and everything after it runs under new
names; what committed before is kept. Through the real CLI and through serve's
RedriveExecution; a failure inside a Map is refused in one line; two redrives at once are one."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import ROLE, client, serving, wait_ended

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:"


def functions(root: Path, failures: int = 1) -> Path:
    """Inc (n + 1, counting its calls in a file) and Flaky (fails `failures` times, then answers)."""
    code = root / "functions"
    (code / "Inc").mkdir(parents=True)
    (code / "Inc" / "app.py").write_text(
        "from pathlib import Path\nCALLS = Path(%r)\n"
        "def handler(event, context):\n    CALLS.write_text(str(int(CALLS.read_text() or 0) + 1) if CALLS.exists() else '1')\n"
        "    return {'n': event.get('n', 0) + 1}\n" % str(root / "inc-calls"))
    (code / "Flaky").mkdir()
    (code / "Flaky" / "app.py").write_text(
        "from pathlib import Path\nSEEN = Path(%r)\n"
        "def handler(event, context):\n    seen = int(SEEN.read_text()) if SEEN.exists() else 0\n"
        "    SEEN.write_text(str(seen + 1))\n    if seen < %d:\n        raise RuntimeError(f'failure {seen + 1}')\n"
        "    return {'fixed': event}\n" % (str(root / "flaky-calls"), failures))
    return code


def machine(root: Path, states: dict[str, Any], start: str) -> Path:
    path = root / "statemachine.json"
    path.write_text(json.dumps({"StartAt": start, "States": states}))
    return path


CHAIN = {"First": {"Type": "Task", "Resource": LAMBDA + "Inc", "Next": "Second"},
         "Second": {"Type": "Task", "Resource": LAMBDA + "Flaky", "End": True}}


def cli(*args: Any, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=180, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_a_failed_task_is_redriven_through_the_cli_keeping_what_committed(tmp_path: Path) -> None:
    functions(tmp_path, failures=2)
    path = machine(tmp_path, CHAIN, "First")
    store = tmp_path / "unum.db"
    failed = cli("run", path, "--workflow-id", "w", "--input", '{"n": 1}', "--store", store, cwd=tmp_path)
    assert failed.returncode == 1 and "RuntimeError" in failed.stderr
    again = cli("redrive", "w", "--workflow", path, "--store", store, cwd=tmp_path)
    assert again.returncode == 1 and "failed again" in again.stderr  # the second failure: a fresh name failed too
    done = cli("redrive", "w", "--workflow", path, "--store", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"fixed": {"n": 2}}
    assert (tmp_path / "inc-calls").read_text() == "1"  # First committed once and was kept
    assert (tmp_path / "flaky-calls").read_text() == "3"
    refused = cli("redrive", "w", "--workflow", path, "--store", store, cwd=tmp_path)
    assert refused.returncode == 2 and "did not fail" in refused.stderr and "Traceback" not in refused.stderr
    history = json.loads(cli("inspect", "w", "--history", "--json", "--store", store, cwd=tmp_path).stdout)
    seconds = [e for e in history["events"] if e.get("function") == "Second" and e["type"] == "LambdaFunctionStarted"]
    assert [e.get("redrive") for e in seconds] == [None, 1, 2]  # each run of the Task under its own name
    assert all("iteration" not in e or e["iteration"] < 1 << 32 for e in history["events"])


def test_a_failure_inside_a_map_is_refused_in_one_line(tmp_path: Path) -> None:
    functions(tmp_path)
    path = machine(tmp_path, {"Each": {"Type": "Map", "ItemsPath": "$.items", "End": True, "ItemProcessor": {
        "StartAt": "Work", "States": {"Work": {"Type": "Task", "Resource": LAMBDA + "Flaky", "End": True}}}}},
        "Each")
    store = tmp_path / "unum.db"
    failed = cli("run", path, "--workflow-id", "m", "--input", '{"items": [1]}', "--store", store, cwd=tmp_path)
    assert failed.returncode == 1
    refused = cli("redrive", "m", "--workflow", path, "--store", store, cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1].startswith("error: workflow m failed inside a Map or Parallel")


def test_two_redrives_at_once_are_one(tmp_path: Path) -> None:
    from unum_entry.redrive import CannotRedrive, redrive
    from unum_entry.stores import open_store

    functions(tmp_path)
    path = machine(tmp_path, CHAIN, "First")
    store_path = tmp_path / "unum.db"
    assert cli("run", path, "--workflow-id", "r", "--input", "{}", "--store", store_path, cwd=tmp_path).returncode == 1
    store = open_store(str(store_path))
    sent: list[tuple[str, dict[str, Any]]] = []
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    class Recording:
        def invoke(self, function: str, payload: dict[str, Any]) -> None:
            sent.append((function, payload))

    def one() -> None:
        barrier.wait()
        try:
            redrive(store, "r", Recording())  # type: ignore[arg-type]
            outcomes.append("redriven")
        except CannotRedrive as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    store.close()
    assert outcomes.count("redriven") == 1 and any("redriven already" in o for o in outcomes), outcomes
    assert [function for function, _ in sent] == ["Second"]


def test_redrive_execution_through_serve(tmp_path: Path) -> None:
    with serving(tmp_path, functions=functions(tmp_path)) as server:
        sfn = client(server.url)
        arn = sfn.create_state_machine(name="flaky", definition=json.dumps({"StartAt": "First", "States": CHAIN}),
                                       roleArn=ROLE)["stateMachineArn"]
        execution = sfn.start_execution(stateMachineArn=arn, name="f", input='{"n": 0}')["executionArn"]
        failed = wait_ended(sfn, execution)
        assert (failed["status"], failed["error"], failed["redriveStatus"]) == ("FAILED", "RuntimeError", "REDRIVABLE")
        assert sfn.redrive_execution(executionArn=execution)["redriveDate"].year >= 2026
        done = wait_ended(sfn, execution)
        assert (done["status"], json.loads(done["output"]), done["redriveCount"]) == ("SUCCEEDED", {"fixed": {"n": 1}}, 1)
        with pytest.raises(Exception) as refused:
            sfn.redrive_execution(executionArn=execution)
        assert "ExecutionNotRedrivable" in str(refused.value)


@pytest.mark.parametrize("stop", ["SIGKILL", "SIGTERM"])
def test_a_redrive_killed_midway_is_continued_by_run_resume(tmp_path: Path, stop: str) -> None:
    """The redriven Task is followed by a 2 s Wait: the redrive process is killed in that wait;
    nothing drives the workflow then, inspect shows the command that continues it, and `run
    --resume` finishes it."""
    import signal
    import time

    functions(tmp_path)
    path = machine(tmp_path, {
        "First": CHAIN["First"],
        "Second": {"Type": "Task", "Resource": LAMBDA + "Flaky", "Next": "Pause"},
        "Pause": {"Type": "Wait", "Seconds": 2, "Next": "Third"},
        "Third": {"Type": "Task", "Resource": LAMBDA + "Inc", "InputPath": "$.fixed", "End": True}}, "First")
    store = tmp_path / "unum.db"
    assert cli("run", path, "--workflow-id", "k", "--input", '{"n": 5}', "--store", store, cwd=tmp_path).returncode == 1
    proc = subprocess.Popen([sys.executable, "-m", "builder", "redrive", "k", "--workflow", str(path), "--store",
                             str(store)], cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    seen = ""
    while "redrive 1 of workflow k" not in seen and time.monotonic() < deadline and proc.poll() is None:
        seen += proc.stderr.readline()
    time.sleep(0.5)  # inside the Wait
    proc.send_signal(getattr(signal, stop))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0, seen + err
    if stop == "SIGTERM":
        assert "--resume" in err and "Traceback" not in err, err
    shown = json.loads(cli("inspect", "k", "--store", store, cwd=tmp_path).stdout)
    # nothing drives it: its Wait's timer is kept in the queue, and inspect says how to continue it
    assert shown["status"] in ("interrupted", "waiting") and "--resume" in shown["resume"], shown
    resumed = cli("run", path, "--workflow-id", "k", "--resume", "--store", store, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"n": 7}
    assert (tmp_path / "flaky-calls").read_text() == "2"  # the redriven Task ran once more, not again on resume
