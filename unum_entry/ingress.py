"""Ingress: before the handler.

Gather the invocation's input: inline values as they are; references (large values, fan-in
members) read from the store in consistent batches (a join wider than 4,096 branches: a group of
members at a time, `_gather`). Whenever ingress reads anyway — and when
asked to (`ingress_check` in the IR, or a request sent by a duplicate) — it reads the
invocation's own checkpoint in the same batch and skips the handler when it exists. A first
delivery of a chain hop reads nothing: the commit detects duplicates (unum_entry.checkpoint).

A fan-out item or branch (a Map item, a Parallel branch) whose ingress reads anyway also reads
the workflow's two ending records (unum_entry.outcome.Ending) in the same batch, and when the
workflow has ended (failed, stopped, timed out) and the item has not committed, its handler does
not run (`Ended`; the runtime drops the delivery): no request is added, only two keys to a
batch read already made; an item's retry (`attempt` > 0, a fault path) reads them too. Which
items read anyway: docs/history.md ("Stop").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from unum_entry import fanin
from unum_entry.checkpoint import reads_checkpoint_first
from unum_entry.codec import decode, decode_many
from unum_entry.conditions import resolve_path
from unum_entry.envelope import Envelope, Gather
from unum_entry.errors import EnvelopeError, RetentionExpired
from unum_entry.frozen import ReadOnly
from unum_entry.outcome import Ending
from unum_entry.stores.base import Store

#: Leaf shards (of fanin.SHARD_SLOTS members each) a join's target reads per group (`_gather`):
#: bounds the shards and records held at once; a join this wide or narrower reads as before, its
#: leaves with the checkpoint, then its members' checkpoints.
GATHER_LEAVES = 4096 // fanin.SHARD_SLOTS
#: Rows, and bytes of their values, that `_gather_scanning` keeps after the scan brought them
#: before their member's turn: a map's rows come about in slot order (a few thousand apart at
#: most); past either bound, members are read by key.
SCAN_AHEAD = 65536
SCAN_AHEAD_BYTES = 64 << 20
_UNSEEN: Any = object()


class AlreadyCommitted(ReadOnly):
    """The checkpoint exists: use its value, do not run the handler."""

    __slots__ = ("stored",)

    stored: Final[bytes]

    def __init__(self, stored: bytes) -> None:
        self.stored = stored


class Ended(ReadOnly):
    """A fan-out item of a workflow that has ended: do not run the handler, drop the delivery."""

    __slots__ = ()

    def __init__(self) -> None:
        pass


class Ready(ReadOnly):
    """No checkpoint seen: run the handler on `event`."""

    __slots__ = ("event",)

    def __init__(self, event: Any) -> None:
        self.event: Final = event


def ingress(env: Envelope, store: Store, checkpoint: str | None, *,
            check_first: bool = False) -> AlreadyCommitted | Ready | Ended:
    """Decide whether to run the handler and with what (Ended: not at all, module docstring).

    `check_first`: read the checkpoint even when no input has to be read. Raises
    RetentionExpired when an input or a join set is gone: nothing is deleted before its expiry,
    so the workflow outlived its retention (unum_entry.retention)."""
    if len(env.inputs) == 1 and env.inputs[0].inline and env.gather is None and not (
            check_first or env.redelivered or (env.attempt > 0 and len(env.frames) > 1)):
        # The common hop (one inline input, nothing to read): what the general path below returns.
        return Ready([env.inputs[0].value] if env.gathered else env.inputs[0].value)
    refs = [d.ref for d in env.inputs if d.ref is not None and not d.inline]
    # A join's first group of leaves (a wider join's others: read by `_gather`, a group at a time).
    gather = env.gather
    first_group = range(min(GATHER_LEAVES, fanin.leaf_count(gather.width))) if gather is not None else range(0)
    keys = refs + (fanin.leaf_keys(gather.set, gather.width, first_group) if gather is not None else [])
    item = len(env.frames) > 1  # a fan-out item or branch; its retry (a fault path) reads too
    if checkpoint is not None and reads_checkpoint_first(env, reads_anyway=bool(keys) or (item and env.attempt > 0),
                                                         ingress_check=check_first):
        keys.insert(0, checkpoint)
    if not keys:
        return Ready(resolve_inputs(env, {}))
    ending = Ending.of(env.workflow) if item else None
    records = store.read(keys if ending is None else [*keys, *ending.keys])
    committed = records[checkpoint].value if checkpoint is not None and checkpoint in records else None
    if committed is not None:
        return AlreadyCommitted(committed)
    if ending is not None and ending.reached(records):
        return Ended()
    fetched = {key: record.value for key, record in records.items() if record.value is not None}
    missing = [ref for ref in refs if ref not in fetched]
    if missing:
        raise RetentionExpired(f"workflow {env.workflow}: input {missing[0]} is gone (expired)")
    if gather is not None:
        first = fanin.members(records, gather.set, gather.width, first_group)
        del records, fetched  # a wide join's shards: not held while its inputs are read
        event = _gather(env.workflow, store, gather, first)
        return Ready(event if env.gathered else event[0])
    return Ready(resolve_inputs(env, fetched))


def _gather(workflow: str, store: Store, gather: Gather, first: list[str]) -> list[Any]:
    """The decoded checkpoints of a join's members, in slot order: the event `resolve_inputs`
    makes of one reference per member, without an input object per member. A group of
    GATHER_LEAVES leaf shards at a time: its members (`first`: the first group's, read with the
    checkpoint), then their checkpoints, so that a million-branch join holds the decoded values
    and one group's shards and records, not every shard, member name and record at once. Groups
    need no common snapshot: a full leaf and a checkpoint never change. Raises RetentionExpired
    when a leaf or a checkpoint is gone."""
    if fanin.leaf_count(gather.width) > GATHER_LEAVES and store.scans_cheaper(workflow, gather.width):
        return _gather_scanning(workflow, store, gather, first)
    event: list[Any] = []
    for members in _member_groups(store, gather, first):
        event += decode_many(_read_by_key(workflow, store, members, [None] * len(members)))
    return event


def _gather_scanning(workflow: str, store: Store, gather: Gather, first: list[str]) -> list[Any]:
    """`_gather` for a store that reads a workflow's records in its own order more cheaply than
    key by key (`Store.scan_values`; SQLite: the order they were written, which for a map is
    about its slot order). The members come a group at a time, as in `_gather`; each member's
    value is the row the scan brought ahead, or the scan goes on until it brings it, keeping
    the rows it passes (at most SCAN_AHEAD of them and SCAN_AHEAD_BYTES of their values). A
    member the scan did not bring within that - written late, of another workflow, stored by
    reference, or a workflow whose other rows filled the window - is read by key, as `_gather`
    reads every one. Same event, same errors; holds one group and the window, not every name
    or value."""
    rows: Iterator[tuple[str, bytes | None]] | None = store.scan_values(workflow)
    ahead: dict[str, bytes | None] = {}  # rows the scan brought before their member's turn
    ahead_bytes = 0  # ... the length of their values
    read_by_key: set[str] = set()  # members read by key: their rows, if the scan meets them, are not kept
    event: list[Any] = []
    for members in _member_groups(store, gather, first):
        values: list[bytes | None] = []
        for member in members:
            value = ahead.pop(member, _UNSEEN)
            if value is not _UNSEEN:
                ahead_bytes -= len(value or b"")
            while (value is _UNSEEN and rows is not None and len(ahead) < SCAN_AHEAD
                   and ahead_bytes < SCAN_AHEAD_BYTES):
                key, scanned = next(rows, (None, None))
                if key is None:
                    rows = None
                elif key == member:
                    value = scanned
                elif key not in read_by_key:
                    ahead[key] = scanned
                    ahead_bytes += len(scanned or b"")
            values.append(None if value is _UNSEEN else value)
        read_by_key.update(member for member, value in zip(members, values, strict=True) if value is None)
        event += decode_many(_read_by_key(workflow, store, members, values))
    return event


def _member_groups(store: Store, gather: Gather, first: list[str]) -> Iterator[list[str]]:
    """A join's members in slot order, a group of GATHER_LEAVES leaf shards at a time: `first`
    (the first group's, read with the checkpoint), then each later group's, its leaves read
    here. Raises RetentionExpired when a leaf is gone or not full (`fanin.members`)."""
    yield first
    leaves = fanin.leaf_count(gather.width)
    for start in range(GATHER_LEAVES, leaves, GATHER_LEAVES):
        group = range(start, min(start + GATHER_LEAVES, leaves))
        yield fanin.members(store.read(fanin.leaf_keys(gather.set, gather.width, group)), gather.set, gather.width,
                            group)


def _read_by_key(workflow: str, store: Store, members: list[str], values: list[bytes | None]) -> list[bytes]:
    """`values` (one per member, in order) with each None filled by the member's checkpoint,
    read in one `get_many`. Raises RetentionExpired when one is gone."""
    missing = [member for member, value in zip(members, values, strict=True) if value is None]
    if missing:
        fetched = store.get_many(missing)
        for position, member in enumerate(members):
            if values[position] is None:
                value = fetched.get(member)
                if value is None:
                    raise RetentionExpired(f"workflow {workflow}: fan-in input {member} is gone (expired)")
                values[position] = value
    return values  # type: ignore[return-value]  # (every None was filled above)


def resolve_inputs(env: Envelope, fetched: dict[str, bytes]) -> Any:
    """The handler's event: one value, or the list of inputs for a gathered (fan-in) call.
    `fetched` holds every referenced checkpoint of a non-inline input."""
    decoded: dict[str, Any] = {}
    values = []
    for i, data in enumerate(env.inputs):
        if data.inline:
            values.append(data.value)
            continue
        ref = data.ref
        if ref is None:  # Envelope validation makes every non-inline input a reference
            raise EnvelopeError(f"envelope.inputs[{i}]: neither a value nor a ref")
        if ref not in decoded:
            decoded[ref] = decode(fetched[ref])
        value = decoded[ref]
        if data.path is not None:
            value = resolve_path(data.path, value, {})
        if data.item is not None:
            if not isinstance(value, list) or data.item >= len(value):
                raise EnvelopeError(f"envelope.inputs[{i}].item: {data.item} is not an element of {data.ref}")
            value = value[data.item]
        values.append(value)
    return values if env.gathered else values[0]
