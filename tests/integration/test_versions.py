"""Versions on the embedded engine (builder/versions.py, builder/commands/versions.py; docs/versions.md):
a workflow finishes on the code it started with through the real CLI - a Wait's timer delivered
by `run --resume`, a run killed by SIGTERM and resumed, a redrive, a task-token callback's local
continuation - while a new run takes the changed folder; `upgrade` behind its replay check;
`versions` counts; `gc` keeps what is in use; bad input is one line (exit 2). And every command
of docs/versions.md, run as written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.doc_commands import doc_commands

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCALED = {"UNUM_ASL_TIME_SCALE": "0.001"}


def cli(cwd: Path, *args: object, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
    assert "Traceback" not in done.stderr, done.stderr
    return done


def machine(folder: Path, states: dict[str, object], start: str, code: dict[str, str]) -> Path:
    """A state machine folder: statemachine.json and functions/<Name>/app.py."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "statemachine.json").write_text(json.dumps({"StartAt": start, "States": states}))
    for name, source in code.items():
        (folder / "functions" / name).mkdir(parents=True, exist_ok=True)
        (folder / "functions" / name / "app.py").write_text(source)
    return folder


def task(name: str, **more: object) -> dict[str, object]:
    return {"Type": "Task", "Resource": f"arn:aws:lambda:us-east-1:123456789012:function:{name}", **more}


def confirm(word: str) -> str:
    return f"def handler(event, context):\n    return {{'n': event['n'], 'code': {word!r}}}\n"


TAKE = "def handler(event, context):\n    return {'n': event['n']}\n"


def waiting_machine(folder: Path, *, wait: bool = True) -> Path:
    states: dict[str, object] = {"Take": task("Take", Next="Pause" if wait else "Confirm"),
                                 "Confirm": task("Confirm", End=True)}
    if wait:
        states["Pause"] = {"Type": "Wait", "Seconds": 4000, "Next": "Confirm"}  # 4 s at the test's scale
    return machine(folder, states, "Take", {"Take": TAKE, "Confirm": confirm("old")})


def start_waiting(cwd: Path, workflow_id: str, n: int) -> None:
    """Start the waiting machine and return while its Wait's timer is pending."""
    done = cli(cwd, "run", "m/statemachine.json", "--input", json.dumps({"n": n}), "--workflow-id", workflow_id,
               "--timeout", "1.5", env=SCALED)
    assert done.returncode == 0 and "is waiting until" in done.stderr, done.stderr


def version_of(cwd: Path, workflow_id: str) -> str:
    shown = cli(cwd, "inspect", workflow_id)
    return json.loads(shown.stdout)["version"]


def test_a_timer_delivered_by_resume_runs_the_old_code_and_a_new_run_the_new(tmp_path: Path) -> None:
    waiting_machine(tmp_path / "m")
    start_waiting(tmp_path, "w-1", 1)
    started_on = version_of(tmp_path, "w-1")
    (tmp_path / "m" / "functions" / "Confirm" / "app.py").write_text(confirm("new"))
    resumed = cli(tmp_path, "run", "m/statemachine.json", "--workflow-id", "w-1", "--resume", env=SCALED)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"n": 1, "code": "old"}
    assert f"note: workflow w-1 runs version {started_on}, the code it started with" in resumed.stderr
    fresh = cli(tmp_path, "run", "m/statemachine.json", "--input", '{"n": 2}', "--workflow-id", "w-2", env=SCALED)
    assert fresh.returncode == 0 and json.loads(fresh.stdout) == {"n": 2, "code": "new"}, fresh.stderr
    assert version_of(tmp_path, "w-2") != started_on and version_of(tmp_path, "w-1") == started_on
    again = cli(tmp_path, "run", "m/statemachine.json", "--input", '{"n": 1}', "--workflow-id", "w-1")
    assert json.loads(again.stdout) == {"n": 1, "code": "old"}  # its recorded outcome: nothing re-ran
    listed = json.loads(cli(tmp_path, "versions", "--json").stdout)
    assert {(r["version"], r["running"], r["retained"]) for r in listed} == {
        (started_on, 0, 1), (version_of(tmp_path, "w-2"), 0, 1)}
    only = cli(tmp_path, "list", "--version", started_on)
    assert "w-1" in only.stdout and "w-2" not in only.stdout


def test_a_run_killed_by_sigterm_resumes_on_the_code_it_started_with(tmp_path: Path) -> None:
    """An IR workflow: A blocks while a file exists; SIGTERM the run, change B, resume."""
    block = tmp_path / "block"
    block.write_text("")
    folder = tmp_path / "wf"
    folder.mkdir()
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "wf", "entry": "A"}))
    sources = {"A": (f"import os, time\n\ndef handler(event, context):\n    while os.path.exists({str(block)!r}):\n"
                     f"        time.sleep(0.02)\n    return event\n", [{"op": "invoke", "function": "B"}]),
               "B": ("def handler(event, context):\n    return {'b': 'old'}\n", [])}
    for name, (code, instructions) in sources.items():
        (folder / name).mkdir()
        (folder / name / "app.py").write_text(code)
        (folder / name / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": name, "handler": "app.handler",
                                                                 "instructions": instructions}))
    proc = subprocess.Popen([sys.executable, "-m", "builder", "run", "wf", "--workflow-id", "k-1"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not list((tmp_path / ".unum" / "versions").glob("v*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # A is running (blocked)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    (folder / "B" / "app.py").write_text("def handler(event, context):\n    return {'b': 'new'}\n")
    block.unlink()
    resumed = cli(tmp_path, "run", "wf", "--workflow-id", "k-1", "--resume")
    assert resumed.returncode == 0 and json.loads(resumed.stdout) == {"b": "old"}, resumed.stderr
    fresh = cli(tmp_path, "run", "wf")
    assert json.loads(fresh.stdout) == {"b": "new"}, fresh.stderr


def test_redrive_stays_on_the_version_and_upgrade_moves_it_to_the_fix(tmp_path: Path) -> None:
    waiting_machine(tmp_path / "m", wait=False)
    broken = "def handler(event, context):\n    raise ValueError('broken')\n"
    (tmp_path / "m" / "functions" / "Confirm" / "app.py").write_text(broken)
    failed = cli(tmp_path, "run", "m/statemachine.json", "--input", '{"n": 3}', "--workflow-id", "r-1")
    assert failed.returncode == 1 and "broken" in failed.stderr
    (tmp_path / "m" / "functions" / "Confirm" / "app.py").write_text(confirm("fixed"))
    again = cli(tmp_path, "redrive", "r-1")
    assert again.returncode == 1 and "broken" in again.stderr  # pinned: the fix is not picked up by itself
    assert "note: redrive runs version" in again.stderr and "upgrade r-1 --to" in again.stderr
    old = version_of(tmp_path, "r-1")
    dry = cli(tmp_path, "upgrade", "r-1", "--to", "m/statemachine.json", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.startswith(f"would upgrade workflow r-1 from {old} to "), dry.stderr
    assert version_of(tmp_path, "r-1") == old  # a dry run changes nothing
    moved = cli(tmp_path, "upgrade", "r-1", "--to", "m/statemachine.json")
    assert moved.returncode == 0 and "replay check passed" in moved.stdout, moved.stderr
    fixed = cli(tmp_path, "redrive", "r-1")
    assert fixed.returncode == 0 and json.loads(fixed.stdout) == {"n": 3, "code": "fixed"}, fixed.stderr
    shown = json.loads(cli(tmp_path, "inspect", "r-1").stdout)
    assert shown["version"] != old and shown["upgrades"] == 1


def test_an_upgrade_whose_replay_check_fails_names_the_state_and_changes_nothing(tmp_path: Path) -> None:
    waiting_machine(tmp_path / "m")
    start_waiting(tmp_path, "u-1", 4)
    old = version_of(tmp_path, "u-1")
    waiting_machine(tmp_path / "m2", wait=False)  # the Wait the workflow stands at is gone
    refused = cli(tmp_path, "upgrade", "u-1", "--to", "m2/statemachine.json")
    assert refused.returncode == 2, refused.stderr
    [line] = [l for l in refused.stderr.splitlines() if l.startswith("error:")]
    assert line.startswith("error: upgrade of workflow u-1 to v") and line.endswith(
        "refused, nothing changed: state 'Pause' of function 'Take' (a Wait timer) does not exist in the new version")
    assert version_of(tmp_path, "u-1") == old
    machine(tmp_path / "m3", {"Take": task("Take", Next="Pause"), "Pause": {"Type": "Wait", "Seconds": 1000,
                                                                             "Next": "Confirm"},
                              "Confirm": task("Confirm", End=True)}, "Take",
            {"Take": TAKE, "Confirm": confirm("moved")})
    moved = cli(tmp_path, "upgrade", "u-1", "--to", "m3")
    assert moved.returncode == 0, moved.stderr
    resumed = cli(tmp_path, "run", "m/statemachine.json", "--workflow-id", "u-1", "--resume", env=SCALED)
    assert json.loads(resumed.stdout) == {"n": 4, "code": "moved"}, resumed.stderr


def test_a_task_token_continuation_runs_the_version_the_workflow_started_with(tmp_path: Path) -> None:
    ask = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
           "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token"}},
           "ResultPath": "$.answer", "Next": "Confirm"}
    machine(tmp_path / "m", {"Ask": ask, "Confirm": task("Confirm", End=True)}, "Ask",
            {"Ask": "def handler(event, context):\n    return {}\n", "Confirm": confirm("old")})
    started = cli(tmp_path, "run", "m/statemachine.json", "--input", '{"n": 5}', "--workflow-id", "t-1")
    assert started.returncode == 0, started.stderr
    [token] = [w["token"] for w in json.loads(cli(tmp_path, "inspect", "t-1").stdout)["waiting"]]
    (tmp_path / "m" / "functions" / "Confirm" / "app.py").write_text(confirm("new"))
    done = cli(tmp_path, "task-success", token, "--output", "{}", "--workflow", "m/statemachine.json")
    assert done.returncode == 0 and json.loads(done.stdout) == {"n": 5, "code": "old"}, done.stderr
    assert "note: the continuation runs version" in done.stderr


def test_gc_keeps_a_version_in_use_and_removes_an_unused_one(tmp_path: Path) -> None:
    waiting_machine(tmp_path / "m")
    start_waiting(tmp_path, "g-1", 6)  # waiting: its version is in use
    in_use = version_of(tmp_path, "g-1")
    (tmp_path / "m" / "functions" / "Confirm" / "app.py").write_text(confirm("other"))
    start_waiting(tmp_path, "g-2", 7)
    unused = version_of(tmp_path, "g-2")
    rows = {r["version"]: (r["running"], r["retained"]) for r in json.loads(cli(tmp_path, "versions", "--json").stdout)}
    assert rows == {in_use: (1, 1), unused: (1, 1)}
    assert cli(tmp_path, "rm", "g-2", "--force").returncode == 0
    swept = cli(tmp_path, "gc")
    assert swept.returncode == 0 and "removed 1 version(s) no retained workflow uses; kept 1 in use" in swept.stderr
    assert (tmp_path / ".unum" / "versions" / in_use).is_dir()
    assert not (tmp_path / ".unum" / "versions" / unused).exists()
    resumed = cli(tmp_path, "run", "m/statemachine.json", "--workflow-id", "g-1", "--resume", env=SCALED)
    assert json.loads(resumed.stdout) == {"n": 6, "code": "old"}, resumed.stderr


@pytest.mark.parametrize(("args", "says"), [
    (("list", "--version", "v0123456789abcdef"), "error: list --version v0123456789abcdef: no such version in "),
    (("list", "--version", "latest"), "error: 'latest' is not a version id (v + 16 hex digits"),
    (("upgrade", "b-1", "--to", "v0123456789abcdef"), "error: unknown version 'v0123456789abcdef': no copy of it in "),
    (("upgrade", "b-1", "--to", "nowhere"), "error: --to 'nowhere': neither a version id"),
    (("upgrade", "nope", "--to", "m"), "error: upgrade: no workflow 'nope' in store .unum/unum.db"),
])
def test_bad_input_is_one_line_naming_it(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    waiting_machine(tmp_path / "m")
    start_waiting(tmp_path, "b-1", 8)
    done = cli(tmp_path, *args)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(says), done.stderr


def test_snapshot_is_content_addressed_and_idempotent(tmp_path: Path) -> None:
    from builder import versions

    folder = waiting_machine(tmp_path / "m")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"junk")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref")
    first = versions.snapshot(folder, tmp_path / "versions")
    assert versions.snapshot(folder, tmp_path / "versions") == first
    assert versions.content_id(first.path) == first.id  # the copy holds what was hashed, nothing else
    assert not (first.path / "__pycache__").exists() and not (first.path / ".git").exists()
    (folder / "functions" / "Confirm" / "app.py").write_text(confirm("new"))
    assert versions.content_id(folder) != first.id
    assert [v.id for v in versions.listed(tmp_path / "versions")] == [first.id]


def test_docs_versions_commands_run_as_written(tmp_path: Path) -> None:
    shutil.copytree(REPO / "images" / "asl-versions", tmp_path / "images" / "asl-versions")
    shutil.copytree(REPO / "images" / "durable-versions", tmp_path / "images" / "durable-versions")  # its durable example
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')  # this interpreter, as `python`
    (bin_dir / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    commands = doc_commands("docs/versions.md")
    assert len(commands) >= 14
    seen: dict[str, subprocess.CompletedProcess[str]] = {}
    for command in commands:
        line = command.text
        if "VERSION" in line:
            line = line.replace("VERSION", version_of(tmp_path, "order-1"))
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{line}: {done.stderr}"
        if command.comment.startswith("{"):
            assert json.loads(done.stdout) == json.loads(command.comment), f"{line}: {done.stdout} {done.stderr}"
        seen[command.text] = done
    listed = next(d for c, d in seen.items() if c.startswith("python -m builder versions"))
    assert listed.stdout.startswith("VERSION  ") and len(listed.stdout.strip().splitlines()) == 3  # v1, v2
    shown = next(d for c, d in seen.items() if c.startswith("python -m builder inspect order-3"))
    assert json.loads(shown.stdout)["upgrades"] == 1
    swept = next(d for c, d in seen.items() if c == "python -m builder gc")
    assert "removed 1 version(s) no retained workflow uses; kept 2 in use" in swept.stderr
