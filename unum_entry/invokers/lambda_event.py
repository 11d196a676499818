"""Envelopes as Lambda events: JSON, within Lambda's asynchronous payload limit.

Three forms, chosen by the sender (`to_event`) and understood by the receiver (`from_event`):

- the envelope's wire form itself, when it is exact JSON (str keys, no bytes, finite floats);
- `{"unum_msgpack": "<base64 of the msgpack wire form>"}` when it is not (inline values may be
  bytes, or maps with integer keys, which JSON would silently turn into strings);
- `{"unum_envelope_ref": "e-…", "workflow": "…"}` when the event would exceed `limit` bytes
  (a wide fan-in names every branch checkpoint): the envelope is stored under a key derived
  from its content and the receiver deletes it once the delivery is done.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final

from unum_entry.codec import decode, encode
from unum_entry.envelope import Envelope
from unum_entry.errors import EnvelopeError, StaleInvocation
from unum_entry.frozen import ReadOnly
from unum_entry.retention import Ledger, store_retention
from unum_entry.stores.base import Kind, Store

LAMBDA_ASYNC_LIMIT = 256 * 1024
DEFAULT_EVENT_LIMIT = LAMBDA_ASYNC_LIMIT - 1024  # headroom for the invoke request around it
WRAPPED = "unum_msgpack"
BY_REF = "unum_envelope_ref"


class Delivery(ReadOnly):
    """A decoded event: the envelope, and the stored envelope to delete once it is handled."""

    __slots__ = ("envelope", "stored_key")

    envelope: Final[Envelope]
    stored_key: Final[str | None]

    def __init__(self, envelope: Envelope, stored_key: str | None = None) -> None:
        self.envelope = envelope
        self.stored_key = stored_key


def to_event(wire: Mapping[str, Any], *, store: Store | None, limit: int = DEFAULT_EVENT_LIMIT) -> bytes:
    """The JSON bytes to send as a Lambda event for an envelope's wire form."""
    if json_exact(wire):
        body = json.dumps(wire, separators=(",", ":"), allow_nan=False).encode()
    else:
        import base64  # lazy, here and in from_event: most envelopes are exact JSON

        packed = encode(dict(wire), what="envelope")
        body = json.dumps({WRAPPED: base64.b64encode(packed).decode()}, separators=(",", ":")).encode()
    if len(body) <= limit:
        return body
    if store is None:
        raise EnvelopeError(f"envelope for workflow {wire.get('workflow')!r} is {len(body)} bytes, over the "
                            f"{limit}-byte event limit, and no store is configured to send it by reference")
    packed = encode(dict(wire), what="envelope")
    ledger = Ledger.bounded(str(wire["workflow"]), wire.get("deadline") or 0, store_retention(store))
    key = ledger.envelope(packed)
    ledger.create(store, key, packed, Kind.CHECKPOINT)
    return json.dumps({BY_REF: key, "workflow": wire["workflow"]}).encode()


def from_event(event: Any, *, store: Store) -> Delivery | None:
    """Decode an event made by `to_event`; None when it is not an unum envelope at all (a raw
    workflow input). Raises EnvelopeError when malformed, StaleInvocation when a stored envelope
    is gone (its delivery was already handled and cleaned up)."""
    if not isinstance(event, Mapping):
        return None
    if BY_REF in event:
        key = event[BY_REF]
        if not isinstance(key, str) or not key.startswith("e-"):
            raise EnvelopeError(f"event.{BY_REF}: expected a stored envelope key, found {key!r}")
        packed = store.get(key)
        if packed is None:
            raise StaleInvocation(f"stored envelope {key} is gone: this delivery was already handled")
        return Delivery(Envelope.from_wire(_decode(packed, BY_REF)), stored_key=key)
    if WRAPPED in event:
        import base64

        raw = event[WRAPPED]
        try:
            packed = base64.b64decode(raw, validate=True)
        except (TypeError, ValueError) as exc:
            raise EnvelopeError(f"event.{WRAPPED}: not base64: {exc}") from exc
        return Delivery(Envelope.from_wire(_decode(packed, WRAPPED)))
    if "unum" in event and "workflow" in event:
        return Delivery(Envelope.from_wire(event))
    return None


def json_exact(value: Any) -> bool:
    """True when `json.loads(json.dumps(value))` gives back an equal value of the same types."""
    stack = [value]
    while stack:
        item = stack.pop()
        if item is None or isinstance(item, (bool, int, str)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                return False
            stack.extend(item.values())
        else:  # bytes, tuples, anything else
            return False
    return True


def _decode(packed: bytes, where: str) -> Any:
    try:
        return decode(packed)
    except Exception as exc:  # msgpack raises several unrelated types
        raise EnvelopeError(f"event.{where}: not a msgpack envelope: {type(exc).__name__}: {exc}") from exc
