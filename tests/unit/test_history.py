"""The history stamp a commit carries (unum_entry.history) and the events numbered from it."""

from __future__ import annotations

import msgpack
import pytest

from unum_entry import codec
from unum_entry.codec import decode, decode_many, encode
from unum_entry.envelope import DataRef, Envelope, Frame, Gather
from unum_entry.history import History, Step, events, split, stamp

pytestmark = pytest.mark.unit


def test_a_stamped_value_decodes_as_the_value_and_splits_back():
    env = Envelope(workflow="wf-1", frames=(Frame(), Frame(2, 5, 0)), attempt=1,
                   inputs=(DataRef(ref="c-" + "a" * 32, item=2, value=7),))
    stored = encode({"out": [1, 2]}) + stamp("Item", env, started=10.0, committed=10.25)
    assert decode(stored) == {"out": [1, 2]}
    own, meta = split(stored)
    assert own == encode({"out": [1, 2]})
    assert meta == {"f": "Item", "p": [[0, 1, 0], [2, 5, 0]], "a": 1, "s": 10000, "c": 10250,
                    "i": [["c-" + "a" * 32, 2, None]]}



def test_decode_many_decodes_stamped_plain_and_long_values_as_decode_does_and_raises_as_it_does(monkeypatch):
    env = Envelope(workflow="wf-1", frames=(Frame(), Frame(2, 5, 0)))
    stamped = [encode(i) + stamp("Item", env, started=1.0, committed=2.0) for i in range(300)]
    odd = [encode({"k": "v" * 70_000}) + stamp("Item", env, started=None, committed=2.0),  # a 16-bit str and ext
           encode([1, 2]), encode(None) + msgpack.packb(msgpack.ExtType(72, b"x" * 300)), encode(7) + b"\xd4\x01\x02"]
    datas = stamped[:100] + odd + stamped[100:]
    assert decode_many(datas) == [decode(d) for d in datas]
    assert decode_many(datas)[100:102] == [{"k": "v" * 70_000}, [1, 2]]
    monkeypatch.setattr(codec, "_BUFFER", 8)  # longer than the Unpacker's buffer: by `decode`
    assert decode_many(datas[:110]) == [decode(d) for d in datas[:110]]
    monkeypatch.undo()
    for bad, raised in ((encode(1) + b"\xc1", msgpack.ExtraData), (encode([1, 2])[:-1], ValueError),
                        (b"", ValueError)):
        with pytest.raises(raised):
            decode(bad)
        with pytest.raises(raised):  # after good values (the Unpacker's buffer is not reused wrongly)
            decode_many([stamped[0], bad, stamped[1]])
        assert decode_many([stamped[0]]) == [0]

def test_the_entry_records_the_workflow_input_and_a_fan_in_its_join_set():
    entry = stamp("A", Envelope(workflow="wf", inputs=(DataRef(value={"x": 1}),), start=True), started=None,
                  committed=1.0)
    assert split(encode(None) + entry)[1] == {"f": "A", "c": 1000, "w": {"x": 1}}
    join = stamp("J", Envelope(workflow="wf", gather=Gather("s-" + "b" * 32, 3), gathered=True), started=1.0,
                 committed=2.0)
    assert split(encode(None) + join)[1]["g"] == ["s-" + "b" * 32, 3]


def test_an_input_msgpack_cannot_encode_is_left_out_not_fatal():
    meta = split(encode(1) + stamp("A", Envelope(workflow="wf", inputs=(DataRef(value={1j}),), start=True),
                                   started=1.0, committed=1.0))[1]
    assert meta is not None and "w" not in meta


def test_unstamped_and_foreign_bytes_are_left_alone():
    assert split(encode([1])) == (encode([1]), None)
    other = encode(1) + msgpack.packb(msgpack.ExtType(5, b"x"))
    assert split(other) == (other, None)
    with pytest.raises(msgpack.ExtraData):
        decode(encode(1) + encode(2))  # trailing data that is not an ext object is still an error


def _step(key, function, start, end, *, inputs=(), position=((0, 1, 0),), error=None):
    return Step(key=key, function=function, position=position, attempts=1, started_ms=start, ended_ms=end,
                inputs=tuple((r, None, None) for r in inputs), gathered=(), output=key, error=error)


def test_events_are_numbered_by_time_from_execution_started_and_point_at_their_cause():
    a = _step("c-a", "A", 100, 110)
    b = _step("c-b", "B", 120, 130, inputs=["c-a"], position=((0, 1, 0), (0, 2, 0)))
    c = _step("c-c", "C", 115, 140, inputs=["c-a"], position=((0, 1, 0), (1, 2, 0)))
    history = History(workflow="wf", input={"x": 1}, started_ms=100, ended_ms=140, steps=(a, c, b), input_known=True)
    numbered = events(history, "succeeded")
    assert [(e["id"], e["type"], e.get("function")) for e in numbered] == [
        (1, "ExecutionStarted", None), (2, "LambdaFunctionStarted", "A"), (3, "LambdaFunctionSucceeded", "A"),
        (4, "LambdaFunctionStarted", "C"), (5, "LambdaFunctionStarted", "B"), (6, "LambdaFunctionSucceeded", "B"),
        (7, "LambdaFunctionSucceeded", "C"), (8, "ExecutionSucceeded", None)]
    assert [e["previousEventId"] for e in numbered] == [0, 1, 2, 3, 3, 5, 4, 7]
    assert numbered[4]["index"] == 0 and numbered[4]["size"] == 2


def test_a_consumer_is_never_numbered_before_its_producer_even_with_a_skewed_clock():
    a = _step("c-a", "A", 100, 200)
    b = _step("c-b", "B", 150, 160, inputs=["c-a"])   # another machine's clock runs behind
    numbered = events(History(workflow="wf", input=None, started_ms=100, ended_ms=200, steps=(a, b)), "running")
    order = [e["function"] for e in numbered[1:]]
    assert order == ["A", "A", "B", "B"] and numbered[-1]["type"] == "LambdaFunctionSucceeded"


def test_state_machine_steps_are_wrapped_in_state_events_and_a_stop_ends_aborted():
    a = _step("c-a", "Fn", 100, 110)
    history = History(workflow="wf", input=None, started_ms=100, ended_ms=110, steps=(a,))
    numbered = events(history, "stopped", states={"Fn": [("Prep", "Pass", "both"), ("Work", "Task", "both")]},
                      failure={"Error": "E", "Cause": "C"})
    assert [(e["type"], e.get("state")) for e in numbered] == [
        ("ExecutionStarted", None), ("PassStateEntered", "Prep"), ("TaskStateEntered", "Work"),
        ("LambdaFunctionStarted", None), ("LambdaFunctionSucceeded", None), ("TaskStateExited", "Work"),
        ("PassStateExited", "Prep"), ("ExecutionAborted", None)]
    assert numbered[-1]["details"] == {"error": "E", "cause": "C"}


def test_a_large_workflow_input_is_not_copied_into_the_stamp():
    big = "x" * 20_000
    meta = split(encode(1) + stamp("A", Envelope(workflow="wf", inputs=(DataRef(value=big),), start=True),
                                   started=1.0, committed=1.0))[1]
    assert meta is not None and meta["w"]["$omitted"] > 20_000
