"""`python -m builder run` as a user meets it, through the real CLI in a subprocess and a real
file store: the workflow id first, progress only on a terminal, Ctrl-C and timeouts that stop
at once and say how to resume, reused workflow ids, and the user's frames of a failed handler."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from unum_entry.local.platform import local_platform
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import load_workflow

from tests.support.terminal import run_on_terminal

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SLOW = "import time\n\ndef handler(event, context):\n    time.sleep(30)\n    return 1\n"


def cli(*args: str | Path, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def one_function(folder: Path, source: str, **ir: object) -> Path:
    (folder / "A").mkdir(parents=True)
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": folder.name, "entry": "A"}))
    (folder / "A" / "app.py").write_text(source)
    (folder / "A" / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": "A", "handler": "app.handler", **ir}))
    return folder


def test_the_workflow_id_comes_first_and_nothing_is_drawn_off_a_terminal(tmp_path: Path) -> None:
    proc = cli("run", "images/chain", "--input", '{"name": "ada"}', "--store", tmp_path / "s", "--workflow-id", "wf-1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == "workflow wf-1"
    assert lines[-1].startswith("workflow wf-1: 3 invocations")
    assert len(lines) == 2 and "\r" not in proc.stderr  # no progress line when stderr is a pipe
    assert json.loads(proc.stdout)["greeting"] == "HELLO, ADA!"


def test_progress_is_drawn_on_a_terminal(tmp_path: Path) -> None:
    """stderr on a pseudo-terminal: the progress line (with a bar for the map) is redrawn in
    place; stdout (a pipe) still holds only the result."""
    folder = tmp_path / "wf"
    for name, code, ir in [("Split", "def handler(e, c):\n    return list(range(40))\n",
                            {"instructions": [{"op": "map", "function": "Work"}]}),
                           ("Work", "import time\n\ndef handler(e, c):\n    time.sleep(0.05)\n    return e\n",
                            {"instructions": [{"op": "fan_in", "function": "Sum"}]}),
                           ("Sum", "def handler(e, c):\n    return sum(e)\n", {})]:
        (folder / name).mkdir(parents=True)
        (folder / name / "app.py").write_text(code)
        (folder / name / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": name, "handler": "app.handler", **ir}))
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "m", "entry": "Split"}))
    code, text, out = run_on_terminal(["run", str(folder), "--store", str(tmp_path / "s"), "--workers", "2"], 160,
                                      timeout=60)
    assert code == 0, text
    assert json.loads(out) == sum(range(40))
    assert text.startswith("workflow wf-")
    assert "\r\x1b[K" in text and "running" in text and "queued" in text and "committed" in text
    assert "Work [" in text and "/40" in text  # the map's bar


def test_ctrl_c_stops_within_a_second_and_says_how_to_resume(tmp_path: Path) -> None:
    folder = one_function(tmp_path / "slow", SLOW)
    store = tmp_path / "s"
    proc = subprocess.Popen([sys.executable, "-m", "builder", "run", str(folder), "--store", str(store),
                             "--workflow-id", "wf-int"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline() == "workflow wf-int\n"  # the run has started
    time.sleep(0.3)  # the handler is sleeping now
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    took = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert took < 1.0, f"took {took:.2f} s to stop"
    assert out == "" and "Traceback" not in err
    [line] = err.splitlines()
    assert line.startswith("interrupted: workflow wf-int stopped")
    assert f"--workflow-id wf-int --resume --store {store}" in line and f"inspect wf-int --store {store}" in line
    shown = cli("inspect", "wf-int", "--store", store)
    assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "interrupted"  # not "running": nobody drives it
    assert "--resume" in json.loads(shown.stdout)["resume"]


def test_a_timeout_stops_and_says_how_to_resume(tmp_path: Path) -> None:
    folder = one_function(tmp_path / "slow", SLOW)
    started = time.monotonic()
    proc = cli("run", folder, "--store", tmp_path / "s", "--workflow-id", "wf-t", env={"UNUM_TIMEOUT": "0.5"})
    assert time.monotonic() - started < 10
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert "still running after 0.5 s" in last and "--workflow-id wf-t --resume" in last


def test_a_reused_id_resumes_with_the_same_input_and_refuses_another(tmp_path: Path) -> None:
    store = tmp_path / "s"
    first = cli("run", "images/chain", "--input", '{"name": "ada"}', "--store", store, "--workflow-id", "wf-r", "--compact")
    assert first.returncode == 0, first.stderr
    again = cli("run", "images/chain", "--input", '{"name": "ada"}', "--store", store, "--workflow-id", "wf-r", "--compact")
    assert again.returncode == 0 and again.stdout == first.stdout
    assert "already ended" in again.stderr
    other = cli("run", "images/chain", "--input", '{"name": "bob"}', "--store", store, "--workflow-id", "wf-r")
    assert other.returncode == 2 and other.stdout == ""
    assert other.stderr.splitlines() == ["error: workflow 'wf-r' was started with a different input; pass --resume to "
                                         "continue it with its recorded input, or choose another --workflow-id"]
    resumed = cli("run", "images/chain", "--input", '{"name": "bob"}', "--store", store, "--workflow-id", "wf-r",
                  "--resume", "--compact")
    assert resumed.returncode == 0 and resumed.stdout == first.stdout  # the recorded input's result
    missing = cli("run", "images/chain", "--store", store, "--workflow-id", "wf-none", "--resume")
    assert missing.returncode == 2 and "no workflow 'wf-none'" in missing.stderr


def test_an_interrupted_workflow_resumes_to_its_result(tmp_path: Path) -> None:
    """Ctrl-C while the second function runs; the resume runs only what has not committed."""
    folder = tmp_path / "wf"
    (folder / "A").mkdir(parents=True)
    (folder / "B").mkdir()
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "r", "entry": "A"}))
    (folder / "A" / "app.py").write_text("def handler(e, c):\n    return e + 1\n")
    (folder / "A" / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": "A", "handler": "app.handler",
                                                           "instructions": [{"op": "invoke", "function": "B"}]}))
    flag = tmp_path / "slow-once"
    flag.write_text("")
    (folder / "B" / "app.py").write_text(
        f"import os, time\n\ndef handler(e, c):\n    if os.path.exists({str(flag)!r}):\n        time.sleep(30)\n    return e * 10\n")
    (folder / "B" / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": "B", "handler": "app.handler"}))
    store = tmp_path / "s"
    proc = subprocess.Popen([sys.executable, "-m", "builder", "run", str(folder), "--input", "4", "--store", str(store),
                             "--workflow-id", "wf-res"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline() == "workflow wf-res\n"
    time.sleep(0.8)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=10)
    assert proc.returncode == 130
    flag.unlink()
    resumed = cli("run", folder, "--store", store, "--workflow-id", "wf-res", "--resume", "--compact")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == 50


def test_a_failed_handler_shows_the_users_frames(tmp_path: Path) -> None:
    source = "def helper(x):\n    return x['missing']\n\n\ndef handler(event, context):\n    return helper(event)\n"
    folder = one_function(tmp_path / "wf", source, max_attempts=1)
    store = tmp_path / "s"
    proc = cli("run", folder, "--input", "{}", "--store", store, "--workflow-id", "wf-f")
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr
    app = str(folder / "A" / "app.py")
    assert f'File "{app}", line 6, in handler' in proc.stderr
    assert f'File "{app}", line 2, in helper' in proc.stderr and "return x['missing']" in proc.stderr
    assert "unum_entry" not in proc.stderr  # only the user's frames
    last = proc.stderr.splitlines()[-1]
    assert last == "error: workflow wf-f failed in function 'A' after 1 attempt(s): KeyError: 'missing'"
    shown = cli("inspect", "wf-f", "--store", store)
    assert shown.returncode == 1
    trace = json.loads(shown.stdout)["failure"]["Trace"]
    assert [(f["File"], f["Line"], f["Function"]) for f in trace] == [(app, 6, "handler"), (app, 2, "helper")]


def test_run_keeps_the_loaded_workflow_out_of_the_cycle_collectors_passes(tmp_path: Path) -> None:
    """`run` owns its process: once the workflow is loaded its objects are frozen
    (unum_entry.local.heap); a library caller's process is left alone (this test's)."""
    source = "import gc\n\ndef handler(event, context):\n    return {'frozen': gc.get_freeze_count()}\n"
    folder = one_function(tmp_path / "wf", source)
    proc = cli("run", folder, "--store", tmp_path / "s")
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["frozen"] > 1000, seen  # every module, IR and runtime loaded: thousands of objects
    before = gc.get_freeze_count()
    with local_platform(load_workflow(folder), MemoryStore()) as platform:
        assert platform.run(None).result == {"frozen": before}
    assert gc.get_freeze_count() == before
