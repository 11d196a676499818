"""The embedded engine's hot path (issue 19, speed): what the shortcuts must keep.

- By default the local platform sends a fan-out's calls from the invoking worker, one after
  another (an invoke is a queue push); a configured `dispatch_workers`, an invoke latency or a
  fault injector keeps the concurrent dispatch.
- A wide join's target gets every branch's output in slot order (its ingress builds the event
  straight from the join's members), the same as through the general input path.
- A duplicate of every delivery (the platform delivering each one twice) changes no result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from unum_entry.local.faults import FaultInjector, FaultRates
from unum_entry.local.platform import LocalPlatform
from unum_entry.runtime import RuntimeConfig
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration


def map_sum(root: Path) -> Path:
    """Split (n) → map of Item (x → [x, x * x]) → Gather (the list of every item's output)."""
    write_workflow(root, name="m", entry="Split", functions={
        "Split": FunctionSource("def handler(event, context):\n    return list(range(event))\n",
                                [{"op": "create_set", "function": "Gather", "shape": "aggregate"},
                                 {"op": "map", "function": "Item"}]),
        "Item": FunctionSource("def handler(event, context):\n    return [event, event * event]\n",
                               [{"op": "fan_in", "function": "Gather"}]),
        "Gather": FunctionSource("def handler(event, context):\n    return event\n", []),
    })
    return root


def dispatch_workers(platform: LocalPlatform) -> set[int]:
    return {runtime._egress.dispatch_workers for runtime in platform.runtimes.values()}


def test_a_default_platform_dispatches_from_the_worker_and_a_configured_one_as_configured(tmp_path: Path) -> None:
    workflow = load_workflow(map_sum(tmp_path / "m"))
    with LocalPlatform(workflow, MemoryStore(), workers=2) as platform:
        assert dispatch_workers(platform) == {1}
        assert platform.run(300, timeout=60).result == [[i, i * i] for i in range(300)]
    with LocalPlatform(workflow, MemoryStore(), workers=2, config=RuntimeConfig(dispatch_workers=8)) as platform:
        assert dispatch_workers(platform) == {8}
    with LocalPlatform(workflow, MemoryStore(), workers=2, invoke_latency=0.0001) as platform:
        assert dispatch_workers(platform) == {RuntimeConfig().dispatch_workers}


@pytest.mark.parametrize("width", [1, 17, 16 * 16 + 3])
def test_a_wide_join_gets_every_output_in_slot_order_also_when_every_delivery_is_duplicated(
        tmp_path: Path, width: int) -> None:
    workflow = load_workflow(map_sum(tmp_path / "m"))
    expected = [[i, i * i] for i in range(width)]
    faults = FaultInjector(FaultRates(duplicate=1.0, concurrent_duplicate=1.0), seed=width)
    with LocalPlatform(workflow, MemoryStore(), workers=4, faults=faults) as platform:
        assert dispatch_workers(platform) == {RuntimeConfig().dispatch_workers}  # faults: concurrent, as before
        outcome = platform.run(width, timeout=120)
        assert outcome.result == expected
        assert platform.stats["committed"] == width + 2  # each invocation committed once
