"""On a store that never lets go of the GIL, the local platform runs quick deliveries on one
worker while its process uses a whole CPU, and spreads them while it does not
(unum_entry.local.saturation, `LocalPlatform._crowded`). Real platform, real threads, the
memory store. The CPU use is the real measurement where it decides robustly (items that wait:
other processes can only lower it), and a CPU clock that says "a whole CPU" or "none" where the
machine's other load would decide (CI runs two test processes on two CPUs)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from unum_entry.local.platform import LocalPlatform
from unum_entry.local.saturation import Saturation
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration

WORKERS = 4


def map_workflow(root: Path, items: int, item_code: str) -> Path:
    sources = {
        "Split": FunctionSource(f"def handler(event, context):\n    return list(range({items}))\n",
                                [{"op": "create_set", "function": "Sum", "shape": "aggregate"},
                                 {"op": "map", "function": "Item"}]),
        "Item": FunctionSource(item_code, [{"op": "fan_in", "function": "Sum"}]),
        "Sum": FunctionSource("def handler(event, context):\n    return sum(event)\n", []),
    }
    write_workflow(root, name="m", entry="Split", functions=sources)
    return root


def run_recorded(root: Path, items: int, item_code: str,
                 saturation: Saturation | None = None) -> list[tuple[str, int]]:
    """Run the map; for each Item in the order they started, its worker thread and how many
    Items ran at that instant (itself included)."""
    started: list[tuple[str, int]] = []
    running = [0]
    lock = threading.Lock()

    def wrap(name, handler):
        def recorded(event, context):
            if name != "Item":
                return handler(event, context)
            with lock:
                running[0] += 1
                started.append((threading.current_thread().name, running[0]))
            try:
                return handler(event, context)
            finally:
                with lock:
                    running[0] -= 1
        return recorded

    with LocalPlatform(load_workflow(map_workflow(root, items, item_code)), MemoryStore(), workers=WORKERS,
                       wrap=wrap, saturation=saturation) as platform:
        result = platform.run(None, timeout=120)
    assert result.result == sum(range(items))
    return started


BUSY = "def handler(event, context):\n    n = 0\n    for i in range(1500):\n        n += i\n    return event\n"


def busiest_share(started: list[tuple[str, int]]) -> float:
    """The share of the items after the first quarter (the first windows spread: nothing
    measured yet) that the busiest worker ran; about 1 / WORKERS when spread evenly."""
    later = [thread for thread, _ in started[len(started) // 4:]]
    return Counter(later).most_common(1)[0][1] / len(later)


def test_quick_items_run_on_one_worker_while_the_process_uses_a_whole_cpu(tmp_path: Path) -> None:
    assert busiest_share(run_recorded(tmp_path, 4000, BUSY, Saturation(cpu_clock=time.monotonic))) >= 0.9


def test_quick_items_spread_while_the_process_uses_less(tmp_path: Path) -> None:
    assert busiest_share(run_recorded(tmp_path, 4000, BUSY, Saturation(cpu_clock=lambda: 0.0))) < 0.6


def test_quick_items_that_wait_keep_every_worker(tmp_path: Path) -> None:
    items = 400
    waits = "import time\ndef handler(event, context):\n    time.sleep(0.002)\n    return event\n"
    later = run_recorded(tmp_path, items, waits)[items // 4:]  # (as above: once the rate is measured)
    assert len({thread for thread, _ in later}) == WORKERS
    at_once = sorted(running for _, running in later)
    # Most Items start while the others' run: on one worker at a time, every one would start alone.
    assert at_once[len(at_once) // 2] >= WORKERS - 1, Counter(at_once)


def test_a_long_cpu_bound_item_keeps_no_quick_item_waiting_for_it(tmp_path: Path) -> None:
    """Item 0 runs pure Python for a second, the process using a whole CPU all along: the
    workers it crowded out take the rest within two settle intervals, not once it ended."""
    items, long = 400, 1.0
    code = ("import time\ndef handler(event, context):\n"
            f"    until = time.monotonic() + ({long} if event == 0 else 0.0001)\n"
            "    while time.monotonic() < until:\n        pass\n    return event\n")
    ended: dict[int, float] = {}

    def wrap(name, handler):
        def recorded(event, context):
            value = handler(event, context)
            if name == "Item":
                ended[event] = time.monotonic()
            return value
        return recorded

    with LocalPlatform(load_workflow(map_workflow(tmp_path, items, code)), MemoryStore(), workers=WORKERS,
                       wrap=wrap, saturation=Saturation(cpu_clock=time.monotonic)) as platform:
        assert platform.run(None, timeout=120).result == sum(range(items))
    # (Those that item 0's worker took ahead in its batch wait for it, as they always did.)
    before = sum(1 for item, at in ended.items() if item and at < ended[0])
    assert before >= (items - 1) // 2, before
