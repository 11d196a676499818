"""Redrive of a state machine whose Map items run on timers (a Wait in the iterator, a Wait after
the failed state; every ASL time scaled by UNUM_ASL_TIME_SCALE) and whose TimeoutSeconds is set
(issue 45): the failure after the Map's join is redriven through the real CLI while readers poll
(`read_outcome` continuously, `inspect` and `list --json` as subprocesses): every reader's
sequence moves failed -> running (or waiting on the Wait's timer) -> succeeded only, never back;
the Map items are not run again, and the history ends with one ExecutionSucceeded. A failure
inside such a Map is refused in one line and every reader keeps saying failed."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:"
PHASE = {"failed": 0, "running": 1, "waiting": 1, "interrupted": 1, "succeeded": 2}


def cli(*args: Any, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "UNUM_ASL_TIME_SCALE": "0.01"})


def machine(root: Path, *, fail_in_map: bool = False) -> Path:
    """Each (a Map of Wait 1 s -> Work, counted per item) -> Sum -> Finish (fails until the file
    `fixed` exists) -> After (Wait 1 s); TimeoutSeconds 30 s. `fail_in_map`: Work of item 2 fails."""
    code = root / "functions"
    for name in ("Work", "Sum", "Finish"):
        (code / name).mkdir(parents=True)
    (code / "Work" / "app.py").write_text(
        "from pathlib import Path\nRUNS = Path(%r)\n"
        "def handler(event, context):\n"
        "    RUNS.mkdir(exist_ok=True)\n"
        "    with open(RUNS / str(event['item']), 'a') as out:\n        out.write('x')\n"
        "    if %r and event['item'] == 2:\n        raise RuntimeError('item 2 fails')\n"
        "    return {'value': event['item'] * 10}\n" % (str(root / "runs"), fail_in_map))
    (code / "Sum" / "app.py").write_text("def handler(event, context):\n"
                                         "    return {'total': sum(r['value'] for r in event)}\n")
    (code / "Finish" / "app.py").write_text(
        "from pathlib import Path\nFIXED = Path(%r)\n"
        "def handler(event, context):\n"
        "    if not FIXED.exists():\n        raise RuntimeError('not fixed yet')\n"
        "    return event\n" % str(root / "fixed"))
    path = root / "statemachine.json"
    path.write_text(json.dumps({"StartAt": "Each", "TimeoutSeconds": 3000, "States": {
        "Each": {"Type": "Map", "ItemsPath": "$.items", "ItemSelector": {"item.$": "$$.Map.Item.Value"},
                 "ItemProcessor": {"StartAt": "Pause", "States": {
                     "Pause": {"Type": "Wait", "Seconds": 100, "Next": "Work"},
                     "Work": {"Type": "Task", "Resource": LAMBDA + "Work", "End": True}}},
                 "Next": "Sum"},
        "Sum": {"Type": "Task", "Resource": LAMBDA + "Sum", "Next": "Finish"},
        "Finish": {"Type": "Task", "Resource": LAMBDA + "Finish", "Next": "After"},
        "After": {"Type": "Wait", "Seconds": 100, "End": True}}}))
    return path


class Readers:
    """Polls the workflow's status until stopped: read_outcome every 20 ms, inspect and list as
    fast as they run; each reader's statuses in order."""

    def __init__(self, root: Path, store: Path) -> None:
        self.root, self.store = root, store
        self.seen: dict[str, list[str]] = {"read_outcome": [], "inspect": [], "list": []}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._outcome), threading.Thread(target=self._cli)]

    def __enter__(self) -> Readers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _outcome(self) -> None:
        from unum_entry.outcome import read_outcome
        from unum_entry.stores import open_store

        store = open_store(str(self.store))
        try:
            while not self._stop.is_set():
                self.seen["read_outcome"].append(str(read_outcome(store, "w").status))
                time.sleep(0.02)
        finally:
            store.close()

    def _cli(self) -> None:
        while not self._stop.is_set():
            self.seen["inspect"].append(json.loads(cli("inspect", "w", "--store", self.store,
                                                       cwd=self.root).stdout)["status"])
            rows = json.loads(cli("list", "--json", "--store", self.store, cwd=self.root).stdout)
            self.seen["list"].append({r["workflow"]: r["status"] for r in rows}["w"])


def monotone(seen: list[str]) -> bool:
    return all(s in PHASE for s in seen) and all(PHASE[a] <= PHASE[b] for a, b in zip(seen, seen[1:]))


def test_a_redrive_after_a_map_on_timers_is_seen_monotone_by_every_reader(tmp_path: Path) -> None:
    path = machine(tmp_path)
    store = tmp_path / "unum.db"
    failed = cli("run", path, "--workflow-id", "w", "--input", '{"items": [1, 2, 3]}', "--store", store, cwd=tmp_path)
    assert failed.returncode == 1 and "not fixed yet" in failed.stderr, failed.stderr
    (tmp_path / "fixed").write_text("yes")
    with Readers(tmp_path, store) as readers:
        began = time.monotonic()
        while not all(readers.seen.values()) and time.monotonic() - began < 60:  # each has read it failed
            time.sleep(0.05)
        done = cli("redrive", "w", "--workflow", path, "--store", store, cwd=tmp_path)
        began = time.monotonic()
        settled = len(readers.seen["list"]) + 1  # one more read by the CLI readers after the end
        while len(readers.seen["list"]) <= settled and time.monotonic() - began < 60:
            time.sleep(0.05)
    assert done.returncode == 0 and json.loads(done.stdout) == {"total": 60}, done.stderr
    for reader, seen in readers.seen.items():
        assert seen and monotone(seen), (reader, seen)
        assert seen[0] == "failed" and seen[-1] == "succeeded", (reader, seen)
    assert {"running", "waiting", "interrupted"} & set(readers.seen["read_outcome"]), readers.seen["read_outcome"]
    assert {p.name: p.read_text() for p in (tmp_path / "runs").iterdir()} == {"1": "x", "2": "x", "3": "x"}
    types = [e["type"] for e in json.loads(cli("inspect", "w", "--store", store, "--history", "--json",
                                                cwd=tmp_path).stdout)["events"]]
    assert types.count("ExecutionSucceeded") == 1 and types[-1] == "ExecutionSucceeded", types


def test_a_failure_inside_a_map_on_timers_is_refused_and_stays_failed(tmp_path: Path) -> None:
    path = machine(tmp_path, fail_in_map=True)
    store = tmp_path / "unum.db"
    failed = cli("run", path, "--workflow-id", "w", "--input", '{"items": [1, 2, 3]}', "--store", store, cwd=tmp_path)
    assert failed.returncode == 1 and "item 2 fails" in failed.stderr, failed.stderr
    refused = cli("redrive", "w", "--workflow", path, "--store", store, cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert refused.stderr.strip().splitlines()[-1].startswith("error: workflow w failed inside a Map or Parallel")
    shown = cli("inspect", "w", "--store", store, cwd=tmp_path)
    assert shown.returncode == 1 and json.loads(shown.stdout)["status"] == "failed"
    assert (tmp_path / "runs" / "2").read_text() == "x"  # item 2 ran (and failed) once; nothing re-ran it
