"""A fan-out's calls are built when read (unum_entry.plan.FanOutCalls): a wide map's plan holds
no envelope per item, slices are views, and the calls equal the eagerly built ones."""

from __future__ import annotations

import pytest

from unum_entry.codec import encode
from unum_entry.envelope import DataRef, Envelope, Frame
from unum_entry.ir import parse_ir
from unum_entry.plan import Call, Committed, FanOutCalls, plan

pytestmark = pytest.mark.unit


def map_plan(width: int):
    ir = parse_ir({"unum_ir": 1, "function": "F", "handler": "app.handler",
                   "instructions": [{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "W"}]})
    value = list(range(width))
    env = Envelope(workflow="wf", inputs=(DataRef(value=None),))
    return plan(ir, env, Committed(value, len(encode(value)), "c-origin"), invocation="c-origin", inline_limit=1024)


def test_a_million_item_plan_builds_no_call_until_read() -> None:
    built: list[int] = []
    calls = FanOutCalls(lambda i: built.append(i) or Call("W", Envelope(workflow="wf")), range(1_000_000))
    assert len(calls) == 1_000_000 and built == []
    share = calls[1::4]  # a dispatch task's share: a view
    assert isinstance(share, FanOutCalls) and len(share) == 250_000 and built == []
    assert [c.function for c in share[:2]] == ["W", "W"] and built == [1, 5]


def test_the_lazy_calls_are_the_calls_of_each_position() -> None:
    calls = map_plan(5).calls
    assert isinstance(calls, FanOutCalls)
    eager = tuple(calls)
    assert calls == eager and calls[3] == eager[3] and hash(calls) == hash(eager)
    assert [c.envelope.frames[-1] for c in calls] == [Frame(i, 5, 0) for i in range(5)]
    assert calls[4].envelope.inputs == (DataRef(ref="c-origin", value=4, item=4),)
