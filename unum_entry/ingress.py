"""Ingress: before the handler (seed 003 §3.3).

Skip the handler when this invocation already committed; otherwise gather its input: inline
values as they are, references read from the store in one consistent batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unum_entry import naming
from unum_entry.codec import decode
from unum_entry.conditions import resolve_path
from unum_entry.envelope import Envelope
from unum_entry.errors import EnvelopeError, StaleInvocation
from unum_entry.stores.base import Record, Store


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
    checkpoint, our inputs and the witnesses that tell a late duplicate from a first delivery.

    Raises StaleInvocation when a witness shows this invocation already committed and its own
    checkpoint was collected downstream (re-running it would only repeat work):
    - an input reference is gone: a checkpoint is deleted only after every consumer of it
      committed (inline inputs are checked too: their reference is the same small value;
      map items are not, their reference is the origin's whole list);
    - our slot in the fan-out's GC set is filled, or the set is gone: a branch fills its slot
      after committing and before invoking anyone;
    - we start the workflow and its start marker exists: the entry writes it after committing.
    Egress collects before it invokes, so no consumer can commit while these witnesses still
    say "not yet".
    """
    refs = [d.ref for d in env.inputs if d.ref is not None and (not d.inline or d.item is None)]
    keys = refs + ([env.gc.set] if env.gc.set is not None else [])
    if checkpoint is not None:
        keys.insert(0, checkpoint)
        if env.start:
            keys.append(naming.started_key(env.workflow))
    records = store.read(keys)
    if checkpoint is not None and checkpoint in records and records[checkpoint].value is not None:
        return AlreadyCommitted(records[checkpoint].value)
    reason = _stale_reason(env, refs, records, checkpoint)
    if reason:
        raise StaleInvocation(f"workflow {env.workflow}: {reason}")
    fetched = {key: record.value for key, record in records.items() if record.value is not None}
    return Ready(resolve_inputs(env, fetched))


def _stale_reason(env: Envelope, refs: list[str], records: dict[str, Record], checkpoint: str | None) -> str | None:
    missing = [ref for ref in refs if ref not in records]
    if missing:
        return f"input {missing[0]} is gone (already consumed)"
    if env.gc.set is not None:
        gc_set = records.get(env.gc.set)
        if gc_set is None:
            return "the fan-out's GC set is gone (every branch committed)"
        if env.gc.slot in gc_set.members:
            return f"slot {env.gc.slot} of the fan-out's GC set is filled (this branch committed)"
    if checkpoint is not None and env.start and naming.started_key(env.workflow) in records:
        return "the workflow already started (its entry committed)"
    return None


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
