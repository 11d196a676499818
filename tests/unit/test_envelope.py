"""The request envelope: wire round trip and errors naming the field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unum_entry.envelope import FAILURE_TEXT, FAILURES_KEPT, DataRef, Envelope, Frame, Gather, is_envelope
from unum_entry.errors import EnvelopeError

pytestmark = pytest.mark.unit

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                           max_leaves=8)


@given(value=json_values, index=st.integers(0, 9), attempt=st.integers(0, 5))
def test_round_trip(value, index, attempt):
    env = Envelope(workflow="wf-1", frames=(Frame(), Frame(index, 10, 2)),
                   inputs=(DataRef(ref="c-1", value=value, item=3, path="$.xs"),),
                   deadline=1_700_000_000 + index, redelivered=bool(attempt % 2), attempt=attempt)
    wire = env.to_wire()
    assert is_envelope(wire)
    assert Envelope.from_wire(wire) == env


def test_gathered_inputs_and_refs_without_values():
    env = Envelope(workflow="w", inputs=(DataRef(ref="c-1"), DataRef(ref="c-2")), gathered=True)
    back = Envelope.from_wire(env.to_wire())
    assert back.gathered and [d.inline for d in back.inputs] == [False, False]


def good():
    return {"unum": 2, "workflow": "w", "frames": [[0, 1, 0]], "inputs": [{"value": 1}]}


@pytest.mark.parametrize("mutate, field", [
    (lambda w: w.update(unum=9), "envelope.unum"),
    (lambda w: w.update(workflow=""), "envelope.workflow"),
    (lambda w: w.update(frames=[]), "envelope.frames"),
    (lambda w: w.update(frames=[[0, 1]]), "envelope.frames[0]"),
    (lambda w: w.update(frames=[[2, 2, 0]]), "envelope.frames[0]"),
    (lambda w: w.update(frames=[[0, 1, -1]]), "envelope.frames[0]"),
    (lambda w: w.update(inputs="x"), "envelope.inputs"),
    (lambda w: w.update(inputs=[]), "envelope.inputs"),
    (lambda w: w.update(inputs=[{}]), "envelope.inputs[0]"),
    (lambda w: w.update(inputs=[{"ref": 5}]), "envelope.inputs[0].ref"),
    (lambda w: w.update(inputs=[{"ref": "c", "item": -1}]), "envelope.inputs[0].item"),
    (lambda w: w.update(inputs=[{"ref": "c", "path": "xs"}]), "envelope.inputs[0].path"),
    (lambda w: w.update(inputs=[{"value": 1, "junk": 2}]), "envelope.inputs[0].junk"),
    (lambda w: w.update(gathered="yes"), "envelope.gathered"),
    (lambda w: w.update(attempt=True), "envelope.attempt"),
    (lambda w: w.update(lanes=-2), "envelope.lanes"),
    (lambda w: w.update(gather=[]), "envelope.gather"),
    (lambda w: w.update(gather={"set": "s-1", "width": 0}), "envelope.gather"),
    (lambda w: w.update(gathered=True, inputs=[], gather={"set": "s-1"}), "envelope.gather"),
    (lambda w: w.update(gather={"set": "s-1", "width": 2}), "envelope.gather: needs gathered"),
    (lambda w: w.update(deadline=-1), "envelope.deadline"),
    (lambda w: w.update(redelivered="yes"), "envelope.redelivered"),
])
def test_malformed_envelopes_name_the_field(mutate, field):
    wire = good()
    mutate(wire)
    with pytest.raises(EnvelopeError) as caught:
        Envelope.from_wire(wire)
    assert str(caught.value).startswith(field)


def test_not_an_object():
    with pytest.raises(EnvelopeError, match="expected an object"):
        Envelope.from_wire([1])
    assert not is_envelope({"name": "ada"})


def test_a_fan_in_targets_envelope_names_its_join_set_not_its_members():
    env = Envelope(workflow="w", gathered=True, gather=Gather("s-1", 100_000), deadline=7)
    wire = env.to_wire()
    assert wire["gather"] == {"set": "s-1", "width": 100_000} and len(repr(wire)) < 200
    assert Envelope.from_wire(wire) == env


def test_the_trace_field_is_optional_and_validated() -> None:
    """`trace` (unum_entry.tracing): a W3C traceparent, absent in older envelopes."""
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    wire = {"unum": 2, "workflow": "wf-1", "frames": [[0, 1, 0]], "inputs": [{"value": 1}]}
    assert Envelope.from_wire(wire).trace is None and "trace" not in Envelope.from_wire(wire).to_wire()
    assert Envelope.from_wire({**wire, "trace": parent}).to_wire()["trace"] == parent
    assert Envelope.from_wire({**wire, "trace": parent}).next_attempt().trace == parent  # a retry keeps it
    for bad in ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", 7, "",
                "00-00000000000000000000000000000000-b7ad6b7169203331-01",
                "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"):
        with pytest.raises(EnvelopeError, match=r"^envelope\.trace: expected a W3C traceparent"):
            Envelope.from_wire({**wire, "trace": bad})


def test_a_retry_carries_the_failed_attempts_bounded_and_they_round_trip():
    env = Envelope(workflow="wf", inputs=(DataRef(value=1),))
    assert "failures" not in env.to_wire()  # the fault-free path carries nothing
    for n in range(FAILURES_KEPT + 2):
        env = env.next_attempt(1700000000.0 + n, f"Boom: attempt {n}" + "x" * FAILURE_TEXT)
    assert env.attempt == FAILURES_KEPT + 2 and len(env.failures) == FAILURES_KEPT
    assert env.failures[0][0] == 1700000002000 and all(len(text) == FAILURE_TEXT for _, text in env.failures)
    assert Envelope.from_wire(env.to_wire()) == env
    with pytest.raises(EnvelopeError, match=r"^envelope.failures: expected at most"):
        Envelope.from_wire({**env.to_wire(), "failures": [["soon", "Boom"]]})
