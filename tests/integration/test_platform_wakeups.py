"""The local platform wakes idle workers once per batch of pushed deliveries, and a worker takes
the next due delivery itself (unum_entry.local.platform `_enqueue`, `_work`): what that must not
cost is parallelism. Real platform, real threads, handlers that block."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from unum_entry.local.platform import WAKE_BATCH, LocalPlatform
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration

BLOCK = 0.3  # seconds each item's handler blocks (user code waiting on I/O)


def map_workflow(root: Path, items: int) -> Path:
    sources = {
        "Split": FunctionSource(f"def handler(event, context):\n    return list(range({items}))\n",
                                [{"op": "create_set", "function": "Sum", "shape": "aggregate"},
                                 {"op": "map", "function": "Item"}]),
        "Item": FunctionSource(f"import time\ndef handler(event, context):\n    time.sleep({BLOCK})\n    return event\n",
                               [{"op": "fan_in", "function": "Sum"}]),
        "Sum": FunctionSource("def handler(event, context):\n    return sum(event)\n", []),
    }
    write_workflow(root, name="m", entry="Split", functions=sources)
    return root


@pytest.mark.parametrize("items", [4, WAKE_BATCH + 3])  # the wake-ups owed at the origin's end; a full batch and more
def test_a_fan_out_runs_on_every_worker_while_its_items_block(tmp_path, items):
    workers = 4
    started: list[tuple[float, str]] = []

    def wrap(name, handler):
        def recorded(event, context):
            if name == "Item":
                started.append((time.monotonic(), threading.current_thread().name))
            return handler(event, context)
        return recorded

    with LocalPlatform(load_workflow(map_workflow(tmp_path, items)), MemoryStore(), workers=workers, wrap=wrap) as p:
        began = time.monotonic()
        result = p.run(None, timeout=60)
        took = time.monotonic() - began
    assert result.result == sum(range(items))
    assert len({thread for _, thread in started}) == workers
    rounds = -(-items // workers)
    # One worker at a time would take items * BLOCK; all of them, rounds * BLOCK (+ slack for a loaded machine).
    assert took < rounds * BLOCK + min(1.0, (items - rounds) * BLOCK / 2), (took, rounds)
    first = sorted(t for t, _ in started)[:workers]
    assert first[-1] - first[0] < BLOCK / 2  # the first round started together, not one after another
