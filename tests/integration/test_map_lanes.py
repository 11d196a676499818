"""`map` with `max_concurrency` (Step Functions' MaxConcurrency) runs items in lanes: the origin
invokes the first k items and each item, once committed, invokes the item k further on. No
coordinator, and at most k items of the map run at once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.tracing import retention_violations
from unum_entry.local.platform import LocalPlatform
from unum_entry.stores.base import Kind
from unum_entry.stores.file import FileStore
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.integration

LANE_KINDS = frozenset({Kind.RESULT, Kind.CHECKPOINT, Kind.SET})


class ConcurrencyProbe:
    """Wraps the map item's handler and records how many of its executions overlap."""

    def __init__(self, function: str) -> None:
        self.function = function
        self.running = 0
        self.peak = 0
        self.lock = threading.Lock()

    def wrap(self, name, handler):
        if name != self.function:
            return handler

        def probed(event, ctx):
            with self.lock:
                self.running += 1
                self.peak = max(self.peak, self.running)
            try:
                time.sleep(0.02)
                return handler(event, ctx)
            finally:
                with self.lock:
                    self.running -= 1
        return probed


def workflow(tmp_path: Path, limit):
    map_op = {"op": "map", "function": "Square", "items": "$.numbers"}
    if limit is not None:
        map_op["max_concurrency"] = limit
    return write_workflow(tmp_path / "wf", name="lanes", entry="Start", functions={
        "Start": FunctionSource("def handler(event, ctx):\n    return event\n",
                                [{"op": "create_set", "function": "Sum"}, map_op]),
        "Square": FunctionSource("def handler(event, ctx):\n    return event * event\n",
                                 [{"op": "fan_in", "function": "Sum"}]),
        "Sum": FunctionSource("def handler(event, ctx):\n    return {'squares': event, 'total': sum(event)}\n"),
    })


def run(tmp_path: Path, limit, input_value):
    probe = ConcurrencyProbe("Square")
    store = FileStore(tmp_path / "store")
    started = time.time()
    platform = LocalPlatform(workflow(tmp_path, limit), store, workers=16, wrap=probe.wrap)
    try:
        outcome = platform.run(input_value, timeout=60)
    finally:
        platform.close()
    # Nothing is deleted: what stays is the result, every checkpoint and the join's set shards,
    # each until its expiry (docs/coordination.md).
    assert retention_violations(store, outcome.workflow_id, started_at=started, kinds=LANE_KINDS) == []
    return outcome, probe.peak, Counter(r.kind.value for r in store.records(outcome.workflow_id))


@pytest.mark.parametrize("limit", [1, 3, "$.limit"])
def test_lanes_bound_concurrency_and_keep_item_order(tmp_path: Path, limit) -> None:
    numbers = list(range(12))
    outcome, peak, left = run(tmp_path, limit, {"numbers": numbers, "limit": 3})
    assert outcome.failure is None
    assert outcome.result == {"squares": [n * n for n in numbers], "total": sum(n * n for n in numbers)}
    assert 1 <= peak <= (3 if limit != 1 else 1)
    # Start and 12 items committed once each, Sum (no instructions) commits the result record
    # itself; 12 branches join through one 16-slot shard.
    assert left == {"result": 1, "checkpoint": 13, "set": 1}


def test_without_a_limit_items_do_overlap(tmp_path: Path) -> None:
    """The control: the probe does see overlap when nothing bounds it."""
    _, peak, _ = run(tmp_path, None, {"numbers": list(range(12))})
    assert peak > 3


@pytest.mark.parametrize("limit", [0, 50])
def test_a_limit_of_zero_or_above_the_item_count_runs_all_at_once(tmp_path: Path, limit) -> None:
    outcome, peak, _ = run(tmp_path, limit, {"numbers": list(range(12))})
    assert outcome.result["total"] == sum(n * n for n in range(12))
    assert peak > 3


def test_a_compiled_map_state_honours_max_concurrency(tmp_path: Path) -> None:
    import json

    from builder.compiler import compile_state_machine
    from unum_entry.workflow import load_workflow

    (tmp_path / "fns" / "Square").mkdir(parents=True)
    (tmp_path / "fns" / "Square" / "app.py").write_text("def handler(event, context):\n    return event * event\n")
    machine = {"StartAt": "Squares", "States": {"Squares": {
        "Type": "Map", "ItemsPath": "$.numbers", "MaxConcurrencyPath": "$.limit", "End": True,
        "ItemProcessor": {"StartAt": "Square", "States": {"Square": {"Type": "Task", "Resource": "Square", "End": True}}}}}}
    (tmp_path / "sm.json").write_text(json.dumps(machine))
    out = compile_state_machine(tmp_path / "sm.json", tmp_path / "wf", functions=tmp_path / "fns").out
    probe = ConcurrencyProbe("Square")
    platform = LocalPlatform(load_workflow(out), FileStore(tmp_path / "store"), workers=16, wrap=probe.wrap)
    try:
        outcome = platform.run({"numbers": list(range(10)), "limit": 2}, timeout=60)
    finally:
        platform.close()
    assert outcome.result == [n * n for n in range(10)]
    assert 1 <= probe.peak <= 2
