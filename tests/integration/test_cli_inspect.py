"""`python -m builder inspect`: what a workflow left, through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_inspect_a_finished_workflow(tmp_path):
    store = str(tmp_path / "store")
    assert cli("run", "images/chain", "--input", '{"name": "ada"}', "--store", store, "--workflow-id", "wf-1").returncode == 0
    shown = cli("inspect", "wf-1", "--store", store)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["status"] == "succeeded"
    assert report["results"][0]["greeting"] == "HELLO, ADA!"
    # every function's checkpoint is retained (docs/coordination.md), until a stated time
    # Hello, Shout (Sign commits the result itself), and run's start record (builder/runs/start_record.py)
    assert report["retained_objects"] == {"checkpoint": 2, "marker": 1}
    assert report["retained_until"].endswith("Z")


def test_gc_sweeps_only_what_expired(tmp_path):
    """Nothing of a fresh workflow is expired; the same store read 8 days later (the default
    TTL is 7) is swept clean by `gc`, results included."""
    import time

    from unum_entry.stores.file import FileStore

    store = str(tmp_path / "store")
    assert cli("run", "images/chain", "--input", '{"name": "ada"}', "--store", store, "--workflow-id", "wf-1").returncode == 0
    swept = cli("gc", "--store", store)
    assert swept.returncode == 0 and "swept 0 expired" in swept.stderr
    later = FileStore(store, clock=lambda: time.time() + 8 * 24 * 3600)
    assert later.sweep() == 4  # two checkpoints, the start record and the result
    assert list(FileStore(store).records()) == []


def test_gc_keeps_a_clock_skew_margin(tmp_path):
    """`gc` deletes only what expired `--clock-skew` seconds ago by its clock (default 300), so a
    host whose clock runs fast cannot sweep what a running workflow still uses; a bad value is
    one line."""
    import time

    from unum_entry.stores.file import FileStore

    store = FileStore(tmp_path / "store")
    now = int(time.time())
    for key, expired_ago in (("c-long-ago", 3600), ("c-a-minute-ago", 60), ("c-live", -3600)):
        store.create(key, b"", workflow="wf", expires_at=now - expired_ago)
    swept = cli("gc", "--store", str(tmp_path / "store"))
    assert swept.returncode == 0 and "swept 1 expired object(s)" in swept.stderr and "300 s" in swept.stderr, swept.stderr
    swept = cli("gc", "--store", str(tmp_path / "store"), "--clock-skew", "0")
    assert swept.returncode == 0 and "swept 1 expired object(s)" in swept.stderr, swept.stderr
    assert [r.key for r in FileStore(tmp_path / "store").records()] == ["c-live"]
    bad = cli("gc", "--store", str(tmp_path / "store"), "--clock-skew", "-5")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--clock-skew" in bad.stderr, bad.stderr
    assert "expected seconds >= 0" in bad.stderr and "Traceback" not in bad.stderr


def test_inspect_a_failed_workflow(tmp_path):
    folder = tmp_path / "wf"
    (folder / "A").mkdir(parents=True)
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "f", "entry": "A"}))
    (folder / "A" / "app.py").write_text("def handler(event, context):\n    raise KeyError('missing field')\n")
    (folder / "A" / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": "A", "handler": "app.handler", "max_attempts": 1}))
    store = str(tmp_path / "store")
    assert cli("run", str(folder), "--store", store, "--workflow-id", "wf-2").returncode == 1
    shown = cli("inspect", "wf-2", "--store", store)
    report = json.loads(shown.stdout)
    assert shown.returncode == 1 and report["status"] == "failed"
    assert report["failure"]["Function"] == "A" and report["failure"]["Error"] == "KeyError"


def test_inspect_an_unknown_workflow(tmp_path):
    """A mistyped id is an error (exit 2, one line), not an "unknown" report."""
    store = tmp_path / "store"
    assert cli("run", "images/chain", "--input", '{"name": "ada"}', "--store", str(store)).returncode == 0
    shown = cli("inspect", "wf-nope", "--store", str(store))
    assert shown.returncode == 2 and shown.stdout == ""
    assert shown.stderr.splitlines() == [f"error: no workflow 'wf-nope' in store {store} (mistyped, another --store, "
                                         f"or expired and collected)"]
