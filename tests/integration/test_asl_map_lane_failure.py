"""A Map with MaxConcurrency 1 runs its items strictly one after another, as Step Functions does:
after item 0 fails (no tolerance, Retry or Catch) item 1 never starts, so the failure reported is
always item 0's (unum_entry/egress.py: a lane goes on only past an item that did not fail the
workflow), through the real `python -m builder run`. On the embedded engine the race rarely shows
(the queued item finds the failure recorded), so the last test widens it: the failure record takes
0.3 s to write, and before the fix items 1-4 all ran in that window."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 4  # each round is a fresh run: the race it guards against showed in some runs, not all
WORK = '''import os


def handler(event, context):
    with open(os.environ["MAP_RAN_LOG"], "a") as log:
        log.write(f"{event}\\n")
    if event in (0, 2):
        raise ValueError(f"item {event} is bad")
    return event
'''


def machine(tmp: Path, **map_fields: object) -> Path:
    (tmp / "functions" / "Work").mkdir(parents=True)
    (tmp / "functions" / "Work" / "app.py").write_text(WORK)
    (tmp / "statemachine.json").write_text(json.dumps({"StartAt": "Each", "States": {"Each": {
        "Type": "Map", "ItemsPath": "$.items", "End": True, **map_fields,
        "ItemProcessor": {"StartAt": "Work", "States": {"Work": {"Type": "Task", "Resource": "Work", "End": True}}}}}}))
    return tmp / "statemachine.json"


def run(definition: Path, round_: int) -> tuple[subprocess.CompletedProcess, list[int]]:
    log = definition.parent / f"ran-{round_}.log"
    done = subprocess.run([sys.executable, "-m", "builder", "run", str(definition), "--input",
                           json.dumps({"items": [0, 1, 2, 3, 4]}), "--store", str(definition.parent / f"s{round_}.db"),
                           "--timeout", "120"], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MAP_RAN_LOG": str(log)})
    return done, [int(line) for line in log.read_text().split()] if log.exists() else []


def test_max_concurrency_1_never_starts_the_item_after_a_failed_one(tmp_path: Path) -> None:
    definition = machine(tmp_path, MaxConcurrency=1)
    for round_ in range(ROUNDS):
        done, ran = run(definition, round_)
        assert done.returncode == 1, done.stderr
        last = done.stderr.splitlines()[-1]
        assert "item 0 is bad" in last and "item 2" not in last, last
        assert ran == [0], f"round {round_}: items {ran} ran; only item 0 may (it failed)"


def test_a_tolerated_failure_lets_the_lane_go_on_in_order(tmp_path: Path) -> None:
    """The control: with a tolerance the failed items do not end the lane, every item runs, in order."""
    done, ran = run(machine(tmp_path, MaxConcurrency=1, ToleratedFailureCount=2), 0)
    assert done.returncode == 0, done.stderr
    assert ran == [0, 1, 2, 3, 4]
    result = json.loads(done.stdout)
    assert [r["Error"] if isinstance(r, dict) else r for r in result] == ["ValueError", 1, "ValueError", 3, 4]


class SlowFailureWrites:
    """A real store whose failure-record writes take `delay` s (a store over a slow network):
    the window in which a lane's next item, had it been sent, would start."""

    def __init__(self, store, delay: float) -> None:
        self._store, self._delay = store, delay

    def create(self, key, value, *, workflow, kind=None, **rest):
        from unum_entry.stores.base import Kind

        if kind is Kind.FAILURE:
            time.sleep(self._delay)
        return self._store.create(key, value, workflow=workflow, **({"kind": kind} if kind is not None else {}), **rest)

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_the_next_item_is_not_sent_even_while_the_failure_is_being_written(tmp_path: Path, monkeypatch) -> None:
    """The same rule where the race is wide open: the failure record takes 0.3 s to write and 4
    workers are idle; an item 1 sent by item 0 would run in that window (it did before the fix)."""
    from builder.compiler import compile_state_machine
    from unum_entry.local.platform import local_platform
    from unum_entry.stores import open_store
    from unum_entry.workflow import load_workflow

    definition = machine(tmp_path, MaxConcurrency=1)
    out = compile_state_machine(definition, tmp_path / "wf", functions=tmp_path / "functions").out
    log = tmp_path / "ran.log"
    monkeypatch.setenv("MAP_RAN_LOG", str(log))
    store = open_store(str(tmp_path / "store.db"))
    with local_platform(load_workflow(out), SlowFailureWrites(store, 0.3), workers=4) as platform:
        outcome = platform.run({"items": [0, 1, 2, 3, 4]}, timeout=60)
    store.close()
    assert outcome.failure is not None and "item 0 is bad" in str(outcome.failure), outcome.failure
    assert [int(line) for line in log.read_text().split()] == [0]
