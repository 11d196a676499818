"""A fan-out's calls wait in the delivery queue as runs (unum_entry.local.queue.CallRun): no
object per call until one is taken, in FIFO order with the deliveries queued around them."""

from __future__ import annotations

import time

import pytest

from unum_entry.envelope import DataRef, Envelope
from unum_entry.local.queue import CallRun, Delivery, FanOut, MemoryQueue
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


def test_pop_calls_takes_one_fan_outs_calls_to_one_function_from_the_head_runs_only() -> None:
    """`pop_calls` (a helper process's larger batch): calls of the head runs while they are of
    the given journaled fan-out and function, in order, counted out of the queue; nothing
    when another delivery or another fan-out's run is first."""
    queue = MemoryQueue()
    same = FanOutCalls(lambda i: Call("F", Envelope(workflow="wf", inputs=(DataRef(value=i),))), range(6),
                       workflow="wf", functions=["F"] * 5 + ["G"])
    ours, theirs = FanOut("wf", "Split", b"", 0, id=1), FanOut("wf", "Split", b"", 0, id=2)
    for run in (CallRun(same, range(0, 3), first_id=10, fan_out=ours), CallRun(same, range(3, 6), first_id=11,
                                                                               fan_out=ours)):
        queue.push_run(run)
    queue.push_run(CallRun(same, range(0, 2), first_id=12, fan_out=theirs))
    assert len(queue) == 8
    assert queue.pop_calls(theirs, "F", 10) == []
    first = queue.pop_due(time.time())
    assert first is not None and first.position == 0
    taken = queue.pop_calls(ours, "F", 3)
    assert [(d.position, d.run.first_id if d.run is not None else None) for d in taken] == [(1, 10), (2, 10), (3, 11)]
    assert len(queue) == 4
    taken = queue.pop_calls(ours, "F", 10)  # stops before the G call
    assert [d.position for d in taken] == [4] and len(queue) == 3
    assert queue.pop_calls(ours, "G", 10)[0].function == "G"
    assert queue.pop_calls(ours, "F", 10) == []  # the other fan-out's run is first now
    assert [d.position for d in (queue.pop_due(time.time()), queue.pop_due(time.time()))] == [0, 1]
    assert len(queue) == 0
