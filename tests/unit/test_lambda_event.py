"""Envelopes as Lambda events: exact JSON when possible, msgpack-wrapped when not, by reference
when over the size limit; and the way back."""

from __future__ import annotations

import json

import pytest

from unum_entry.envelope import DataRef, Envelope
from unum_entry.errors import EnvelopeError, StaleInvocation
from unum_entry.invokers.lambda_event import BY_REF, WRAPPED, from_event, json_exact, to_event
from unum_entry.stores.memory import MemoryStore

pytestmark = pytest.mark.unit


def envelope(value) -> Envelope:
    return Envelope(workflow="wf-1", inputs=(DataRef(ref="c-1", value=value),))


@pytest.mark.parametrize("value, exact", [
    ({"a": [1, 2.5, "x", None, True]}, True),
    ({"a": b"\x00"}, False),
    ({1: "int key"}, False),
    ([float("nan")], False),
    ({"deep": [[[{"k": b""}]]]}, False),
])
def test_json_exact(value, exact) -> None:
    assert json_exact(value) is exact


@pytest.mark.parametrize("value", [{"text": "hi", "n": [1, 2]}, {"blob": b"\x00\xff"}, {3: "three"}, [float("inf")]])
def test_round_trip_keeps_values_and_types(value) -> None:
    store = MemoryStore()
    body = to_event(envelope(value).to_wire(), store=store)
    event = json.loads(body)  # what Lambda hands the handler
    delivery = from_event(event, store=store)
    assert delivery is not None and delivery.stored_key is None
    got = delivery.envelope.inputs[0].value
    assert got == value or (got != got and value != value)  # NaN-free comparison
    assert type(got) is type(value)
    assert (WRAPPED in event) is (not json_exact(value))


def test_oversized_envelope_goes_by_reference_and_comes_back() -> None:
    store = MemoryStore()
    wire = envelope("x" * 5000).to_wire()
    body = to_event(wire, store=store, limit=1000)
    assert len(body) < 200
    event = json.loads(body)
    assert set(event) == {BY_REF, "workflow"}
    delivery = from_event(event, store=store)
    assert delivery.envelope.to_wire() == wire
    assert delivery.stored_key == event[BY_REF]
    # the same envelope sent again (a sender's replay) reuses the same stored key
    assert json.loads(to_event(wire, store=store, limit=1000)) == event


def test_stored_envelope_gone_means_stale() -> None:
    store = MemoryStore()
    event = json.loads(to_event(envelope("y" * 3000).to_wire(), store=store, limit=1000))
    store.delete([event[BY_REF]])
    with pytest.raises(StaleInvocation):
        from_event(event, store=store)


def test_oversized_without_store_is_a_clear_error() -> None:
    with pytest.raises(EnvelopeError, match="over the 100-byte event limit"):
        to_event(envelope("z" * 500).to_wire(), store=None, limit=100)


@pytest.mark.parametrize("event, message", [
    ({WRAPPED: "not base64!"}, "not base64"),
    ({WRAPPED: "AAAA"}, "envelope"),
    ({BY_REF: 17}, "stored envelope key"),
    ({"unum": 2, "workflow": "w", "frames": [], "inputs": []}, "envelope.frames"),
])
def test_malformed_events_name_the_field(event, message) -> None:
    with pytest.raises(EnvelopeError, match=message):
        from_event(event, store=MemoryStore())


@pytest.mark.parametrize("event", [{"name": "raw input"}, [1, 2], "text", None])
def test_raw_inputs_are_not_envelopes(event) -> None:
    assert from_event(event, store=MemoryStore()) is None
