"""Ingress: before the handler (seed 003 §3.3).

Skip the handler when this invocation already committed; otherwise gather its input: inline
values as they are, references read from the store in one consistent batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unum_entry.codec import decode
from unum_entry.conditions import resolve_path
from unum_entry.envelope import Envelope
from unum_entry.errors import EnvelopeError, StaleInvocation
from unum_entry.stores.base import Store


@dataclass(frozen=True)
class AlreadyCommitted:
    """The checkpoint exists: use its value, do not run the handler."""

    stored: bytes


@dataclass(frozen=True)
class Ready:
    """No checkpoint yet: run the handler on `event`."""

    event: Any


def ingress(env: Envelope, store: Store, checkpoint: str | None) -> AlreadyCommitted | Ready:
    """Decide whether to run the handler and with what, in ONE consistent batch read of our
    checkpoint and our input references.

    Raises StaleInvocation when an input reference is gone: a checkpoint is deleted only after
    every consumer of it committed, and egress collects its inputs before invoking anyone, so
    this invocation committed long ago and its own checkpoint was collected downstream; the
    delivery is a late duplicate and re-running it would only repeat work.

    Inline inputs are checked too (their reference is the same small value), except map items,
    whose reference is the origin's whole list and may be large.
    """
    witnesses = [d.ref for d in env.inputs if d.ref is not None and (not d.inline or d.item is None)]
    keys = ([checkpoint] if checkpoint is not None else []) + witnesses
    fetched = store.get_many(keys) if keys else {}
    if checkpoint is not None and checkpoint in fetched:
        return AlreadyCommitted(fetched[checkpoint])
    missing = [ref for ref in witnesses if ref not in fetched]
    if missing:
        raise StaleInvocation(f"input {missing[0]} of workflow {env.workflow} is gone (already consumed)")
    return Ready(resolve_inputs(env, fetched))


def resolve_inputs(env: Envelope, fetched: dict[str, bytes]) -> Any:
    """The handler's event: one value, or the list of inputs for a gathered (fan-in) call.
    `fetched` holds every referenced checkpoint of a non-inline input."""
    decoded: dict[str, Any] = {}
    values = []
    for i, data in enumerate(env.inputs):
        if data.inline:
            values.append(data.value)
            continue
        if data.ref not in decoded:
            decoded[data.ref] = decode(fetched[data.ref])
        value = decoded[data.ref]
        if data.path is not None:
            value = resolve_path(data.path, value, {})
        if data.item is not None:
            if not isinstance(value, list) or data.item >= len(value):
                raise EnvelopeError(f"envelope.inputs[{i}].item: {data.item} is not an element of {data.ref}")
            value = value[data.item]
        values.append(value)
    return values if env.gathered else values[0]
