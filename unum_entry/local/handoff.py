"""An envelope handed from one execution to the next in this process, without the wire.

On a wire every delivery is a private copy: the sender encodes it, the receiver decodes its own.
The embedded platform may instead hand the `Envelope` object itself to the next execution
(`LocalPlatform.submit_envelope`), keeping that guarantee at a lower price: an envelope's fields
are immutable, and so are inline values that are scalars (str, int, float, bool, None, bytes),
which therefore travel as they are; any other inline value (a dict, a list) is *sealed* - kept
as its msgpack bytes - and every opening decodes a fresh copy. So no handler ever receives an
object that another execution (the sender, a Parallel's other branch, a retry or redelivery of
the same delivery) holds or can mutate, and the values received equal the ones a wire would
carry (a tuple arrives as a list, as it would from msgpack).

A fan-out is handed over as (its `FanOutCalls`, a position) per call (`open_call`): each call is
built when a worker takes it, from the values the plan holds - decoded from the committed
checkpoint, so no handler holds them - and opened as a sealed envelope would be. A durable
queue journals such a call in its wire form (`call_wire`), and keeps only the position in memory.
"""

from __future__ import annotations

from typing import Any

from unum_entry.codec import MSGPACK_INTS, decode, encode
from unum_entry.envelope import DataRef, Envelope, or_by_reference
from unum_entry.plan import FanOutCalls

# Immutable values a wire round trip returns unchanged (ints: within msgpack's range).
_SCALARS = frozenset((str, float, bool, type(None), bytes))


class Sealed:
    """An inline value kept as its msgpack bytes inside a sealed envelope (never handed out)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def _shareable(data: DataRef) -> bool:
    """Whether `data` may be handed to any number of executions as it is."""
    value = data.value
    kind = type(value)
    return kind in _SCALARS or (kind is int and value in MSGPACK_INTS) or not data.inline


def is_plain(env: Envelope) -> bool:
    """Whether every inline value of `env` is an immutable scalar (`env` needs no sealing)."""
    inputs = env.inputs
    return _shareable(inputs[0]) if len(inputs) == 1 else all(_shareable(data) for data in inputs)


def seal(env: Envelope) -> Envelope:
    """`env` with each inline value that is not an immutable scalar replaced by its `Sealed`
    bytes; `env` itself when there is none. Raises what encoding it for a wire raises
    (UnencodableValue, ValueError, RecursionError), so a sender's fallback works the same way.
    A sealed envelope is for `open_sealed` only: it has no wire form."""
    if is_plain(env):
        return env
    sealed = tuple(data if _shareable(data)
                   else DataRef(ref=data.ref, value=Sealed(encode(data.value, what="envelope")), item=data.item,
                                path=data.path)
                   for data in env.inputs)
    return _with_inputs(env, sealed)


def open_sealed(env: Envelope) -> Envelope:
    """The envelope a handler may own: `env` (sealed by `seal`) with a fresh copy of each sealed
    value; `env` itself when nothing was sealed. Each call returns new copies."""
    inputs = env.inputs
    if type(inputs[0].value) is not Sealed if len(inputs) == 1 else not any(
            type(data.value) is Sealed for data in inputs):
        return env
    opened = tuple(DataRef(ref=data.ref, value=decode(data.value.data), item=data.item, path=data.path)
                   if type(data.value) is Sealed else data for data in inputs)
    return _with_inputs(env, opened)


def _with_inputs(env: Envelope, inputs: tuple[DataRef, ...]) -> Envelope:
    """`dataclasses.replace(env, inputs=inputs)`, at a fraction of its cost (every field
    positionally: tests/unit/test_handoff.py checks that none is left out)."""
    return Envelope(env.workflow, env.frames, inputs, env.gathered, env.gather, env.attempt, env.start, env.deadline,
                    env.redelivered, env.lanes, env.watchdog, env.trace, env.failures)


def open_call(calls: FanOutCalls, position: int) -> Envelope:
    """The envelope of the call at `position` of `calls`, the handler's own (a fresh copy of
    every value that is not an immutable scalar, as `open_sealed(seal(...))` gives). A value
    that a wire could not carry travels by reference to its checkpoint, as egress sends it
    (unum_entry.egress._invoke)."""
    env = calls.build(position).envelope
    if is_plain(env):
        return env
    return or_by_reference(env, lambda sent: open_sealed(seal(sent)))


def call_wire(calls: FanOutCalls, position: int) -> bytes:
    """The wire form (encoded envelope) of the call at `position` of `calls`: what egress would
    have sent, a value the wire cannot carry by reference to its checkpoint (as `open_call`)."""
    return envelope_wire(calls.build(position).envelope)


def envelope_wire(env: Envelope) -> bytes:
    """The wire form (encoded envelope) of a call egress built: what it would have sent, a value
    the wire cannot carry by reference to its checkpoint (unum_entry.egress._invoke)."""
    return or_by_reference(env, lambda sent: encode(sent.to_wire(), what="envelope"))
