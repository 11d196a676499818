"""`run` on a DynamoDB store (moto over loopback) journals its delivery queue in a SQLite file of
this machine (`.unum/queue-<digest>.db` in the current directory: unum_entry.local.runs.queue_path),
so a `run` SIGKILLed mid-chain is resumed by `run --resume` — the pending delivery is re-driven,
not only the entry — and ends with the fault-free result; `inspect` says `interrupted` meanwhile.
Real CLI subprocesses, a real moto server, real SQLite files."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.test_run_durable_queue import chain, write_workflow

pytestmark = pytest.mark.integration


def cli(cwd: Path, *args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def table_url(moto_server) -> str:
    """A fresh table's URL (`create=1`: `run` creates it)."""
    return f"dynamodb://unum-q-{uuid.uuid4().hex[:12]}?endpoint={moto_server.endpoint}&create=1"


def test_a_run_killed_mid_chain_on_dynamodb_resumes_from_its_journaled_queue(tmp_path: Path, table_url: str) -> None:
    """A → B (marks that it started, then waits for a file) → C. SIGKILL while B runs: `inspect`
    says interrupted; the queue file beside the default store holds B's delivery; `run --resume`
    re-drives it ("resuming: 1 …"), and the result is the fault-free run's."""
    started, release = tmp_path / "B-started", tmp_path / "release"
    runs_of_a = tmp_path / "A-runs"
    folder = write_workflow(tmp_path / "wf", "A", {
        "A": (f"def handler(event, context):\n    open({str(runs_of_a)!r}, 'a').write('x')\n    return 1\n",
              [{"op": "invoke", "function": "B"}]),
        "B": (f"import os, time\n\ndef handler(event, context):\n    open({str(started)!r}, 'w').close()\n"
              f"    for _ in range(300):\n        if os.path.exists({str(release)!r}):\n            break\n"
              f"        time.sleep(0.05)\n    return event + 1\n",
              [{"op": "invoke", "function": "C"}]),
        "C": ("def handler(event, context):\n    return event + 40\n", []),
    })
    work = tmp_path / "cwd"
    work.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "builder", "run", str(folder), "--store", table_url,
                             "--workflow-id", "wf-ddb"], cwd=work, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:  # B runs: A committed, B's delivery journaled
            time.sleep(0.05)
        assert started.exists(), "B never started"
        time.sleep(0.2)  # > the journal's batch interval
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    queues = list((work / ".unum").glob("queue-*.db"))
    assert len(queues) == 1, queues
    shown = cli(work, "inspect", "wf-ddb", "--store", table_url)
    assert "interrupted" in shown.stdout, shown.stdout + shown.stderr
    release.touch()
    done = cli(work, "run", folder, "--store", table_url, "--workflow-id", "wf-ddb", "--resume")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 42
    assert "resuming: 1 " in done.stderr, done.stderr
    assert runs_of_a.read_text() == "x", "the resume re-ran the entry instead of the pending delivery"
    shown = cli(work, "inspect", "wf-ddb", "--store", table_url)
    assert json.loads(shown.stdout)["status"] == "succeeded", shown.stdout


def test_a_chain_killed_at_several_instants_on_dynamodb_ends_with_the_fault_free_result(
        tmp_path: Path, table_url: str) -> None:
    """Six steps of 0.2 s; each `run` is SIGKILLed 0.9 s after it started (the interpreter and
    unum take ~0.5 s), until one ends by itself: its result is the fault-free run's."""
    folder = chain(tmp_path / "chain", length=6)
    work = tmp_path / "cwd"
    work.mkdir()
    args = [sys.executable, "-m", "builder", "run", str(folder), "--input", "[]", "--store", table_url,
            "--workflow-id", "wf-chain", "--compact"]
    kills = 0
    for _ in range(12):
        proc = subprocess.Popen(args, cwd=work, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=0.9 + 0.2 * kills)  # later runs get further on a loaded machine
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
            kills += 1
            continue
        assert proc.returncode == 0, err
        break
    else:
        raise AssertionError(f"no run completed after {kills} kills")
    assert json.loads(out) == [f"S{i}" for i in range(6)], err
    assert kills >= 1, "no run was killed: the test checked nothing"
