"""A fan-out's calls wait in the delivery queue as runs (unum_entry.local.queue.CallRun): no
object per call until one is taken, in FIFO order with the deliveries queued around them."""

from __future__ import annotations

import time

import pytest

from unum_entry.envelope import DataRef, Envelope
from unum_entry.local.queue import CallRun, Delivery, MemoryQueue
from unum_entry.plan import Call, FanOutCalls

pytestmark = pytest.mark.unit


def calls(n: int) -> FanOutCalls:
    return FanOutCalls(lambda i: Call(f"F{i % 2}", Envelope(workflow="wf", inputs=(DataRef(value=i),))),
                       range(n), workflow="wf", functions=[f"F{i % 2}" for i in range(n)])


def test_runs_are_taken_call_by_call_in_order_with_the_deliveries_around_them() -> None:
    queue = MemoryQueue()
    fan_out = calls(5)
    before, after = Delivery("wf", "Before", b"x"), Delivery("wf", "After", b"y")
    queue.push(before, time.time())
    for run in (CallRun(fan_out, range(0, 3)), CallRun(fan_out, range(3, 5))):
        queue.journal_run(run, None)
        queue.push_run(run)
    queue.push(after, time.time())
    assert len(queue) == 7
    assert [(d.function, d.position) for _, d in queue.snapshot()][1:6] == [
        ("F0", 0), ("F1", 1), ("F0", 2), ("F1", 3), ("F0", 4)]
    taken = []
    while (delivery := queue.pop_due(time.time())) is not None:
        taken.append(delivery)
        assert len(queue) == 7 - len(taken)
    assert taken[0] is before and taken[-1] is after
    branches = taken[1:-1]
    assert [(d.function, d.position, d.payload, d.id) for d in branches] == [
        ("F0", 0, b"", 0), ("F1", 1, b"", 0), ("F0", 2, b"", 0), ("F1", 3, b"", 0), ("F0", 4, b"", 0)]
    assert all(d.source is fan_out for d in branches)
    assert queue.next_due() is None and queue.snapshot() == []
