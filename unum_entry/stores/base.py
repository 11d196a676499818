"""The store contract: the only coordination point of a workflow (docs/coordination.md).

`Store` holds every rule once (expiry on read, what counts as a full set, values stored by
reference); a backend implements a few small primitives whose docstrings state the contract.
Every write states when its record expires (`expires_at`, required: no store has a default TTL;
the workflow's ledger, unum_entry.retention.Ledger, stamps it by the record's kind). Keys are
short ASCII names made by `unum_entry.naming` (`c-…` checkpoint, `s-…` set shard, `r-…` result,
`f-…` failure, `b-…` chunk of a large value, …); values are opaque bytes (msgpack, encoded by
the runtime).

Consistency the runtime relies on:
- `create` is atomic create-if-absent; a losing writer gets the winner's value.
- `add_to_set` is an atomic upsert (it creates the set when absent) and returns the set *after*
  the add: concurrent adders never lose each other's members, a slot keeps its first member,
  and the adder whose add fills the set sees it full.
- reads are strongly consistent; a record whose expiry has passed reads as absent everywhere
  (and `create`/`add_to_set` treat it as absent) even before the backend removes it.

Large values. A value longer than the backend's `max_value_bytes` (an item or document limit) is
stored by reference, by the rule below, for every backend alike: its bytes go first into
content-addressed chunk records (`b-` + a hash of the key, the value's SHA-256, the expiry and
the chunk's index; each at most `max_value_bytes`, kind CHUNK, same workflow and expiry), then
the record itself is committed holding a manifest: the byte 0xC1 followed by msgpack
`[chunk keys, total length]`. 0xC1 is the one byte msgpack never emits, so a manifest cannot be
mistaken for a runtime value; a value that itself starts with 0xC1 is always stored by
reference, so the rule is unambiguous for any bytes (chunk records hold raw bytes and are never
read as manifests). Every read path (`create`'s winner value,
`get`, `get_many`, `read`, `records`, `transact`) resolves manifests: callers only ever see
whole values. A losing writer's chunks are orphans that expire with their record; `delete` does
not follow manifests (chunks expire or are swept with the record they belong to).
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

import msgpack  # type: ignore[import-untyped]

from unum_entry.errors import StoreError, StoreMisuse
from unum_entry.frozen import ReadOnly

DEFAULT_TTL_SECONDS = 7 * 24 * 3600

MANIFEST_TAG = b"\xc1"  # first byte of a manifest (a value stored by reference); msgpack never emits it
CHUNK_PREFIX = "b-"


class Kind(str, enum.Enum):
    """What a stored object is for; the GC rules differ per kind."""

    CHECKPOINT = "checkpoint"
    SET = "set"
    RESULT = "result"
    FAILURE = "failure"
    MARKER = "marker"
    STEP = "step"                  # a step's recorded result, or an invocation's step manifest
    COMPENSATION = "compensation"  # an entry of a workflow's compensation log
    CHUNK = "chunk"                # a piece of a value stored by reference (see the module docstring)


#: The members of every record that is not a set: one shared read-only mapping, not an empty dict
#: per record (64 B each: a million-branch map's checkpoints, held by a MemoryStore or read at once
#: by a fan-in).
NO_MEMBERS: Mapping[int, str] = MappingProxyType({})


# slots: a million-branch map keeps a million of them in a MemoryStore. Read-only by type
# (Final: mypy refuses a write), not frozen at run time: every store operation builds records,
# and a frozen dataclass's fields are set through their descriptors (about twice the
# instructions of the plain stores here: unum_entry.frozen.ReadOnly says why that counts).
@dataclass(slots=True, init=False, unsafe_hash=True)  # (hashed over its fields, as when it was frozen)
class Record:
    """One stored object. `value` for checkpoints/results/failures; `size`/`members` for sets."""

    key: Final[str]
    kind: Final[Kind]
    workflow: Final[str]
    expires_at: Final[int]
    value: Final[bytes | None]  # (the defaults are __init__'s)
    size: Final[int | None]
    members: Final[Mapping[int, str]]

    def __init__(self, key: str, kind: Kind, workflow: str, expires_at: int, value: bytes | None = None,
                 size: int | None = None, members: Mapping[int, str] | None = None) -> None:
        self.key = key
        self.kind = kind
        self.workflow = workflow
        self.expires_at = expires_at
        self.value = value
        self.size = size
        self.members = NO_MEMBERS if members is None else members


@dataclass(frozen=True)
class Versioned:
    """An application item (transactional steps): its bytes and its version (>= 1; an absent
    item has version 0)."""

    value: bytes
    version: int


@dataclass(frozen=True)
class AppOp:
    """One application item in a step transaction: it must still have version `expected`
    (0 = absent) when the transaction commits; if `write`, it then becomes `value` with version
    `expected + 1` (or is deleted when `value` is None)."""

    table: str
    key: str
    expected: int
    write: bool = False
    value: bytes | None = None


@dataclass(slots=True, init=False, unsafe_hash=True)  # (as Record)
class SetAdd:
    """An `add_to_set` that `Store.create_joining` makes with a create: `member` into `slot` of
    the set `key` (`size` slots), the set expiring at `expires_at`. Read-only by type, as `Record`."""

    key: Final[str]
    slot: Final[int]
    member: Final[str]
    size: Final[int]
    expires_at: Final[int]

    def __init__(self, key: str, slot: int, member: str, size: int, expires_at: int) -> None:
        self.key = key  # (written out as Record's is: every fan-in branch builds one)
        self.slot = slot
        self.member = member
        self.size = size
        self.expires_at = expires_at


class Joining(NamedTuple):
    """One item of `Store.create_joining_many`: a fan-in branch's checkpoint `key` holding
    `value`, and its join's first add."""

    key: str
    value: bytes
    workflow: str
    expires_at: int
    join: SetAdd


@dataclass(frozen=True)
class Guard:
    """A condition on a unum key that a step transaction also requires: `present` (the key
    exists and has not expired) or not; with `slot`, the key is a live set whose `slot` is still
    empty."""

    key: str
    present: bool
    slot: int | None = None


class SetState(ReadOnly):
    """A coordination set right after an add (`size` slots, their `members`): `full` when
    every slot `0..size-1` has a member (decided at init: every add's caller asks, most twice).
    `completed_by`: the slot whose add completed the set, on stores that apply adds in an order
    every reader sees (`Store.ordered_sets`); None where that order is unknown (DynamoDB's map
    of slots). Not compared: two states with the same members are the same set."""

    __slots__ = ("size", "members", "completed_by", "full")
    _compared = ("size", "members")

    def __init__(self, size: int, members: Mapping[int, str], completed_by: int | None = None) -> None:
        self.size: Final = size
        self.members: Final = members
        self.completed_by: Final = completed_by
        # Fewer members than slots: not full, without walking the slots (most adds of a join).
        self.full: Final = len(members) >= size and all(slot in members for slot in range(size))

    def has_slot(self, slot: int) -> bool:
        """False when `slot` lies outside the set: the adder belongs to a different (late,
        divergent) fan-out than the one that created the set."""
        return 0 <= slot < self.size

    def ordered_members(self) -> list[str]:
        """Members of slots 0..size-1 in slot order (only meaningful when full)."""
        return [self.members[slot] for slot in range(self.size)]


#: What `Store.create_joining` returns: (stored value, created?, the set right after the add or None).
Joined = tuple[bytes, bool, SetState | None]


class Tally(NamedTuple):
    """What `Store.tally` read of one workflow: the records asked for, a count of every live
    record by kind (those included), and the latest expiry among them (None: no live record)."""

    records: list[Record]
    counts: dict[Kind, int]
    latest_expiry: int | None


@dataclass(frozen=True)
class WorkflowEntry:
    """One workflow as `Store.workflows` lists it: how many live objects of each kind it has, the
    keys of its result and failure records (their values are not read), and the earliest and
    latest expiry among its objects (its deadline, start + TTL, is the earliest: unum_entry.retention)."""

    workflow: str
    objects: Mapping[Kind, int]
    results: tuple[str, ...]
    failure: str | None
    first_expiry: int
    last_expiry: int


Item = TypeVar("Item")
Prepared = TypeVar("Prepared")
Outcome = TypeVar("Outcome")
Result = TypeVar("Result")


def _in_one_write(items: Sequence[Item], prepare: Callable[[Item], Prepared],
                  write: Callable[[list[Prepared]], Sequence[Outcome | Exception]],
                  finish: Callable[[Item, Outcome], Result]) -> list[Result | Exception]:
    """The rule of a store's batches (`create_joining_many`, `add_to_set_many`): each item
    `prepare`d (a failure there fails that item alone), the prepared ones made in one `write`
    (which answers each, or fails as a whole: then every item it held fails with its error, none
    was made), each answer `finish`ed (a failure there fails that item alone). In order."""
    results: list[Result | Exception | None] = [None] * len(items)
    prepared: list[Prepared] = []
    where: list[int] = []
    for i, item in enumerate(items):
        try:
            prepared.append(prepare(item))
        except Exception as exc:  # this item's own (a bad add, a value that cannot be chunked)
            results[i] = exc
            continue
        where.append(i)
    try:
        made: Sequence[Outcome | Exception] = write(prepared) if prepared else []
    except Exception as exc:  # the write failed: none of its items was made
        made = [exc] * len(prepared)
    for i, outcome in zip(where, made, strict=True):
        if isinstance(outcome, Exception):
            results[i] = outcome
            continue
        try:
            results[i] = finish(items[i], outcome)
        except Exception as exc:  # (e.g. a winner's value whose chunks are gone)
            results[i] = exc
    return results  # type: ignore[return-value]  # every item set above


class Store(ABC):
    """Checkpoints, results and coordination sets over a strongly consistent backend."""

    #: The longest value a backend stores inline in one record; longer values are stored by
    #: reference (module docstring). None: no limit (file, memory).
    max_value_bytes: int | None = None
    #: Whether a set's `members` come back in the order their adds were applied (first entry
    #: per slot), so `add_to_set` can tell which slot completed the set (SetState.completed_by).
    ordered_sets: bool = True
    # Whether `create_joining` makes its set add in the create's own atomic write (`_create_joining`).
    joins_in_create: bool = False
    # Whether `create_joining_many` makes all its creates and adds in one atomic write (`_create_joining_many`).
    joins_in_batches: bool = False
    _last_shard: Record | None = None  # the set record `_joining_records` built last (immutable: shared)

    def __init__(self, ttl_seconds: int = DEFAULT_TTL_SECONDS, clock=time.time) -> None:
        # The deployment's TTL (workflow start + TTL = its deadline) and the store's clock, read by
        # unum_entry.retention.store_retention; never a default expiry: every write states its own.
        self.ttl_seconds = ttl_seconds
        self._clock = clock

    # ---- the public contract (used by ingress/egress) -------------------------------------

    def create(self, key: str, value: bytes, *, workflow: str, kind: Kind = Kind.CHECKPOINT,
               expires_at: int) -> tuple[bytes, bool]:
        """Create `key` holding `value` unless it exists. Returns (stored value, created?).

        The first writer wins; every later writer gets the winner's value back, so all
        executions of one invocation continue with the same output. `expires_at` (epoch
        seconds, required: the writer's ledger stamps it, unum_entry.retention) is when the
        record stops existing; an expired record counts as absent, so a create after its
        expiry creates it afresh.
        """
        expiry = _expiry(key, expires_at)
        stored = self._by_reference(key, bytes(value), workflow, expiry)
        existing = self._create(Record(key, kind, workflow, expiry, stored))
        if existing is None:
            return value, True
        return self._value_of(existing), False

    def create_joining(self, key: str, value: bytes, *, workflow: str, kind: Kind = Kind.CHECKPOINT,
                       expires_at: int, join: SetAdd) -> tuple[bytes, bool, SetState | None]:
        """`create`, and if it created the record, `add_to_set` of `join` in the same atomic
        write: (stored value, created?, the set right after the add). On a backend that cannot
        (`joins_in_create` false: the cloud stores, where a second item costs a second write
        anyway, and every wrapper) it is `create` alone and the state None: nothing was added,
        the caller adds. A fan-in branch's checkpoint and its join in one commit (the embedded
        stores: one transaction, one fsync, instead of two); a loser adds nothing here."""
        if not self.joins_in_create:
            stored, created = self.create(key, value, workflow=workflow, kind=kind, expires_at=expires_at)
            return stored, created, None
        record, set_record = self._joining_records(key, value, workflow, kind, expires_at, join)
        existing, state = self._create_joining(record, set_record, join.slot, join.member)
        return self._joined(value, existing, state)

    def _joining_records(self, key: str, value: bytes, workflow: str, kind: Kind, expires_at: int,
                         join: SetAdd) -> tuple[Record, Record]:
        """The record a joining create writes (its value by reference when too long: chunks
        written here first) and the set record its add upserts; StoreMisuse for a bad add or
        expiry, before anything is written."""
        # The shard's record is the same for each of its SHARD_SLOTS branches in a row: built once.
        set_record = self._last_shard
        if (set_record is None or set_record.key != join.key or set_record.workflow != workflow
                or set_record.size != join.size or set_record.expires_at != join.expires_at
                or type(join.expires_at) is not int):
            set_record = self._last_shard = _set_record(join.key, join.slot, join.size, workflow, join.expires_at)
        else:
            _check_set_add(join.key, join.slot, join.size)
        expiry = _expiry(key, expires_at)
        stored = self._by_reference(key, bytes(value), workflow, expiry)
        return Record(key, kind, workflow, expiry, stored), set_record

    def _joined(self, value: bytes, existing: Record | None, state: SetState | None) -> Joined:
        """What a joining create of `value` returns, from what `_create_joining` answered."""
        if existing is not None:
            return self._value_of(existing), False, None
        return value, True, None if state is None else self._completed(state)

    def create_joining_many(self, creates: Sequence[Joining]) -> list[Joined | Exception]:
        """`create_joining` of each of `creates` (fan-in branches' checkpoints, each with its
        join's add), in one atomic write where the store batches them (`joins_in_batches`: one
        transaction, one fsync, a shard's adds applied together), else one by one. Returns, in
        order, what `create_joining` returns for each, or the exception that failed it; a write
        that fails fails every item it held (none of them was made)."""
        if not self.joins_in_batches:
            return [self._joining_or_error(create) for create in creates]

        def prepare(create: Joining) -> tuple[Record, Record, int, str]:
            record, set_record = self._joining_records(create.key, create.value, create.workflow, Kind.CHECKPOINT,
                                                       create.expires_at, create.join)
            return record, set_record, create.join.slot, create.join.member

        return _in_one_write(creates, prepare, self._create_joining_many,
                             lambda create, outcome: self._joined(create.value, *outcome))

    def add_to_set_many(self, adds: Sequence[SetAdd], *, workflow: str) -> list[SetState | Exception]:
        """`add_to_set` of each of `adds` (the next adds of a batch of fan-in branches' joins:
        unum_entry.runtime), in one atomic write where the store batches joins
        (`joins_in_batches`), else one by one. Returns, in order, the set right after each add
        or the exception that failed it; a write that fails fails every add it held."""
        if not self.joins_in_batches:
            return [self._added_or_error(add, workflow) for add in adds]

        def prepare(add: SetAdd) -> tuple[Record, int, str]:
            return _set_record(add.key, add.slot, add.size, workflow, add.expires_at), add.slot, add.member

        return _in_one_write(adds, prepare, self._add_to_set_many, lambda _, state: self._completed(state))

    def _added_or_error(self, add: SetAdd, workflow: str) -> SetState | Exception:
        try:
            return self.add_to_set(add.key, add.slot, add.member, size=add.size, workflow=workflow,
                                   expires_at=add.expires_at)
        except Exception as exc:
            return exc

    def _joining_or_error(self, create: Joining) -> Joined | Exception:
        try:
            return self.create_joining(create.key, create.value, workflow=create.workflow,
                                       expires_at=create.expires_at, join=create.join)
        except Exception as exc:
            return exc

    def get(self, key: str) -> bytes | None:
        """The value stored under `key`, or None (missing or expired)."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Values of the keys that exist (strongly consistent); missing keys are left out."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        values, manifests = self._get_values(wanted, self._clock())
        if manifests:  # values stored by reference: their chunks, one batch read
            values.update((key, record.value) for key, record in self._resolve(manifests).items()
                          if record.value is not None)
        return values

    def scans_cheaper(self, workflow: str, count: int) -> bool:
        """Whether `scan_values` reads `count` values of `workflow`'s records more cheaply than
        `get_many` would (a wide fan-in's gather: unum_entry.ingress). Default: False; a backend
        that can read a workflow's records in its own order says when (the SQLite store)."""
        return False

    def expect_bulk_writes(self) -> None:
        """A hint: a long run of writes comes (a wide fan-out: unum_entry.local.platform), so the
        store may trade a little of each commit's latency for throughput. Changes nothing any
        write does or guarantees. Default: nothing (the SQLite store: `Database.expect_bulk_writes`)."""

    def scan_values(self, workflow: str) -> Iterator[tuple[str, bytes | None]]:
        """`workflow`'s live value records (no chunks) as (key, value), in the backend's own
        order, read a page at a time (no common snapshot: a record written meanwhile may or may
        not come); None for a value stored by reference (read it with `get_many`). Default:
        nothing, for a backend without such a scan (`scans_cheaper` is False)."""
        return iter(())

    def _get_values(self, keys: list[str], now: float) -> tuple[dict[str, bytes], dict[str, Record]]:
        """(the values of the records among `keys` live at `now`, but those holding a manifest;
        the records holding a manifest): `get_many` before it resolves manifests. Default:
        `_get_many`. A backend may read the values alone (a fan-in reads every branch's)."""
        return live_values(self._get_many(keys).items(), now)

    def read(self, keys: Iterable[str]) -> dict[str, Record]:
        """Live records (values and sets) of the keys that exist, in one consistent batch."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        now = self._clock()
        return self._resolve({key: record for key, record in self._get_many(wanted).items() if record.expires_at > now})

    def delete(self, keys: Iterable[str]) -> None:
        """Delete objects (values or sets); missing keys are fine (deleting is idempotent)."""
        wanted = list(dict.fromkeys(keys))
        if wanted:
            self._delete(wanted)

    def add_to_set(self, key: str, slot: int, member: str, *, size: int, workflow: str,
                   expires_at: int) -> SetState:
        """Put `member` in `slot` of the set `key` and return the set right after the add.

        An upsert: a set that does not exist (or has expired) is created with `size` slots,
        `workflow` and `expires_at` (required, as on every write); a set that exists keeps its
        own size, workflow and expiry. A slot keeps its first member, so adding again (with the
        same or another member) changes nothing. Atomic: concurrent adds to different slots all
        land, and the add that fills the last empty slot sees the set full (others may too).
        A slot outside the set is stored but never counted (see SetState.has_slot). Raises
        StoreError when `key` holds a value.
        """
        return self._completed(self._add_to_set(_set_record(key, slot, size, workflow, expires_at), slot, member))

    def _completed(self, state: SetState) -> SetState:
        """`state` as an add returns it: on a store with ordered sets, a full set says which
        slot completed it (`SetState.completed_by`)."""
        if self.ordered_sets and state.full:
            return SetState(state.size, state.members, _completer(state))  # `replace`, at a fraction of its cost
        return state

    def sweep(self, now: float | None = None) -> int:
        """Delete every record that has expired by `now` (default: the store's clock) and return
        how many were deleted. A record replaced by a fresh one meanwhile is kept. DynamoDB and
        Firestore also delete expired records by themselves (their TTL); the file store relies
        on this (`python -m builder gc`)."""
        return self._sweep(self._clock() if now is None else now)

    def app_read(self, table: str, keys: Iterable[str]) -> dict[str, Versioned]:
        """Application items of `table` (strongly consistent); absent keys are left out.
        Application tables hold the user's own data next to unum's (transactional steps)."""
        wanted = list(dict.fromkeys(keys))
        return self._app_read(table, wanted) if wanted else {}

    def transact(self, key: str, value: bytes, ops: Iterable[AppOp], *, workflow: str,
                 kind: Kind = Kind.STEP, guards: Iterable[Guard] = (),
                 expires_at: int) -> tuple[bytes, bool]:
        """Create `key` holding `value` (until `expires_at`, required as on every write) AND
        apply the application writes in `ops`, atomically:
        all or nothing, even if the caller dies half-way. Returns (stored value, created?).

        If `key` already exists nothing is written and its value comes back (created=False):
        the step was recorded by an earlier execution. Otherwise, if any op's item no longer has
        its expected version, nothing is written and TransactionConflict is raised (re-read and
        retry); if a guard does not hold, nothing is written and GuardFailed is raised.
        """
        expiry = _expiry(key, expires_at)
        stored = self._by_reference(key, bytes(value), workflow, expiry)
        record = Record(key=key, kind=kind, workflow=workflow, expires_at=expiry, value=stored)
        existing = self._transact(record, list(ops), list(guards))
        if existing is None:
            return value, True
        return self._value_of(existing), False

    def records(self, workflow: str | None = None) -> Iterator[Record]:
        """Every live object (of one workflow if given), chunks included, values resolved. For
        inspect, tests and cleanup; one pass over the store (O(records))."""
        now = self._clock()
        for record in self._scan(workflow):
            if record.expires_at > now:
                if is_manifest(record):
                    record = self._resolve({record.key: record})[record.key]
                yield record

    def tally(self, workflow: str, kinds: Collection[Kind], keys: Collection[str] = ()) -> Tally:
        """One workflow's live records of `kinds` or named in `keys` (values resolved), with a
        count of all its live records by kind and the latest expiry among them: what a
        workflow's outcome is read from (unum_entry.outcome.read_outcome). One consistent pass
        over the workflow's records (O(records)); a backend that can count and filter on its
        side reads only the records asked for (`_tally`)."""
        now = self._clock()
        kept, counts, latest = self._tally(workflow, frozenset(kinds), frozenset(keys), now)
        resolved = self._resolve({record.key: record for record in kept})  # (one batch read of any chunks)
        return Tally([resolved[record.key] for record in kept], counts, latest)

    def _tally(self, workflow: str, kinds: frozenset[Kind], keys: frozenset[str],
               now: float) -> tuple[list[Record], dict[Kind, int], int | None]:
        """`tally` over the records live at `now`, values not yet resolved. Default: one `_scan`."""
        return tally_records(self._scan(workflow), workflow, kinds, keys, now)

    # ---- listing workflows (tools: `python -m builder list`, the web page) ---------------

    def workflows(self) -> list[WorkflowEntry]:
        """Every workflow that has live objects, in one pass over the store (O(records), like
        `records`; values are not read where the backend can leave them out: `_scan_keys`).
        For tools, never the runtime. Sorted by workflow id."""
        counted, named = self._workflow_counts(self._clock())
        found: dict[str, dict] = {}
        for workflow, kind, count, first, last in counted:
            entry = found.setdefault(workflow, {"objects": {}, "results": [], "failure": None,
                                                "first": first, "last": last})
            entry["objects"][kind] = count
            entry["first"] = min(entry["first"], first)
            entry["last"] = max(entry["last"], last)
        for workflow, kind, key in named:
            if kind is Kind.RESULT:
                found[workflow]["results"].append(key)
            else:
                found[workflow]["failure"] = key  # (the last one met)
        return [WorkflowEntry(workflow=workflow, objects=e["objects"], results=tuple(sorted(e["results"])),
                              failure=e["failure"], first_expiry=e["first"], last_expiry=e["last"])
                for workflow, e in sorted(found.items())]

    def _workflow_counts(self, now: float) -> tuple[list[tuple[str, Kind, int, int, int]],
                                                    list[tuple[str, Kind, str]]]:
        """What `workflows` is built from, over the records live at `now`: (workflow, kind, how
        many, earliest expiry, latest expiry) per workflow and kind, and (workflow, kind, key) of
        every result and failure record, in the order they were made where the backend knows it.
        Default: one pass over `_scan_keys`; a backend may count on its side."""
        counts: dict[tuple[str, Kind], list[int]] = {}
        named: list[tuple[str, Kind, str]] = []
        for record in self._scan_keys():
            if record.expires_at <= now:
                continue
            counted = counts.get((record.workflow, record.kind))
            if counted is None:
                counts[(record.workflow, record.kind)] = [1, record.expires_at, record.expires_at]
            else:
                counted[0] += 1
                counted[1] = min(counted[1], record.expires_at)
                counted[2] = max(counted[2], record.expires_at)
            if record.kind is Kind.RESULT or record.kind is Kind.FAILURE:
                named.append((record.workflow, record.kind, record.key))
        return [(workflow, kind, n, first, last) for (workflow, kind), (n, first, last) in counts.items()], named

    def _scan_keys(self) -> Iterable[Record]:
        """Like `_scan(None)`, except that records may come without their value and set members
        (a backend that can project leaves them out). Default: `_scan(None)`."""
        return self._scan(None)

    # ---- backend primitives --------------------------------------------------------------

    @abstractmethod
    def _create(self, record: Record) -> Record | None:
        """Atomically store `record` if its key is absent (or expired) and return None;
        otherwise store nothing and return the existing record (as stored: not resolved)."""

    @abstractmethod
    def _get_many(self, keys: list[str]) -> dict[str, Record]:
        """Strongly consistent read of the given keys (values and sets, with their members);
        absent keys are left out. Expired records may be returned (the caller filters)."""

    @abstractmethod
    def _delete(self, keys: list[str]) -> None:
        """Delete the keys; absent keys are not an error."""

    def _create_joining_many(self, items: list[tuple[Record, Record, int, str]]
                             ) -> list[tuple[Record | None, SetState | None] | Exception]:
        """For a backend with `joins_in_batches`: `_create_joining` of each item, all in one
        atomic write; raises when that write fails (then nothing was made)."""
        raise NotImplementedError(f"{type(self).__name__} does not join in batches")

    def _add_to_set_many(self, items: list[tuple[Record, int, str]]) -> list[SetState | Exception]:
        """For a backend with `joins_in_batches`: `_add_to_set` of each (set record, slot,
        member), all in one atomic write; an item whose set refuses it (a key holding a value)
        fails alone. Raises when that write fails (then nothing was made)."""
        raise NotImplementedError(f"{type(self).__name__} does not join in batches")

    def _create_joining(self, record: Record, set_record: Record, slot: int,
                        member: str) -> tuple[Record | None, SetState | None]:
        """For a backend with `joins_in_create`: atomically `_create(record)` and, if that
        created it, `_add_to_set(set_record, slot, member)`; returns (what `_create` returns,
        the set's state when added)."""
        raise NotImplementedError(f"{type(self).__name__} does not join in its creates")

    @abstractmethod
    def _add_to_set(self, record: Record, slot: int, member: str) -> SetState:
        """Atomically: if `record.key` is absent or expired, create the set `record` describes
        (kind SET, its size, workflow and expiry, no members); then, unless `slot` already has a
        member, make `member` its member. Return the set's state right after this update.
        Raise StoreError if the key holds a live value."""

    @abstractmethod
    def _scan(self, workflow: str | None) -> Iterable[Record]:
        """All records (optionally of one workflow), in no particular order; expired ones may
        be included (the caller filters). Linear in the number of records."""

    @abstractmethod
    def _sweep(self, now: float) -> int:
        """Delete every record with `expires_at <= now`, but never one that a concurrent writer
        replaced by a live record meanwhile; return how many were deleted."""

    # Transactional steps (unum_entry.steps). Optional: a backend without multi-item
    # transactions keeps these defaults, and only `ctx.transact` is unavailable on it.

    def _app_read(self, table: str, keys: list[str]) -> dict[str, Versioned]:
        """Strongly consistent read of application items; absent keys are left out."""
        raise StoreError(f"{type(self).__name__} has no application tables: transactional steps need "
                         "a store with multi-item transactions (file, memory, dynamodb, firestore)")

    def _transact(self, record: Record, ops: list[AppOp], guards: list[Guard]) -> Record | None:
        """Atomically (crash-safe, isolated from concurrent callers): if `record.key` exists
        (and has not expired) return that record and write nothing; else if a guard does not
        hold raise GuardFailed, or if some op's item has a version other than `op.expected`
        raise TransactionConflict, writing nothing; else store `record`, apply every `write`
        op (version `expected + 1`, or delete when `value` is None) and return None. Check the
        record first and the guards after it (a collector deletes witnesses before records)."""
        raise StoreError(f"{type(self).__name__} cannot run transactional steps (no multi-item transactions)")

    def close(self) -> None:  # noqa: B027 - a default: most stores hold nothing to release
        """Release clients and handles. Idempotent."""

    # ---- helpers -------------------------------------------------------------------------

    def _by_reference(self, key: str, value: bytes, workflow: str, expires_at: int) -> bytes:
        """What the record `key` stores for `value`: the value itself, or (too long, or starting
        with MANIFEST_TAG) a manifest of chunk records written here first."""
        limit = self.max_value_bytes
        if not value.startswith(MANIFEST_TAG) and (limit is None or len(value) <= limit):
            return value
        step = limit or len(value)
        digest = hashlib.sha256(value).digest()
        keys: list[str] = []
        for index, start in enumerate(range(0, len(value), step)):
            chunk_key = chunk_key_of(key, digest, expires_at, index)
            # Create-if-absent: an existing chunk of this name holds these very bytes (the name
            # hashes the whole value), e.g. written by an earlier attempt of the same writer.
            self._create(Record(key=chunk_key, kind=Kind.CHUNK, workflow=workflow, expires_at=expires_at,
                                value=value[start:start + step]))
            keys.append(chunk_key)
        manifest = MANIFEST_TAG + msgpack.packb([keys, len(value)])
        if limit is not None and len(manifest) > limit:
            raise StoreError(f"value of {key!r} ({len(value)} bytes) is too large even by reference: its "
                             f"manifest of {len(keys)} chunks exceeds {limit} bytes")
        return manifest

    def _value_of(self, record: Record) -> bytes:
        if record.value is None:
            raise StoreMisuse(f"store key {record.key!r} holds a {record.kind.value}, not a value")
        return self._resolve({record.key: record})[record.key].value or b""

    def _resolve(self, records: dict[str, Record]) -> dict[str, Record]:
        """`records` with every manifest replaced by the whole value (one batch read of all the
        chunks). A missing chunk of a live manifest is a StoreError: chunks expire with their
        record, so only a deletion behind the store's back can cause it."""
        manifests = {key: _manifest(record) for key, record in records.items() if is_manifest(record)}
        if not manifests:
            return records
        wanted = list(dict.fromkeys(chunk for chunks, _ in manifests.values() for chunk in chunks))
        now = self._clock()
        chunks = {key: record.value for key, record in self._get_many(wanted).items()
                  if record.expires_at > now and record.value is not None}
        resolved = dict(records)
        for key, (names, length) in manifests.items():
            missing = [name for name in names if name not in chunks]
            if missing:
                raise StoreError(f"value of {key!r} is stored by reference but its chunk(s) {missing[:3]} "
                                 f"are missing ({len(missing)} of {len(names)})")
            value = b"".join(chunks[name] for name in names)
            if len(value) != length:
                raise StoreError(f"value of {key!r} is stored by reference: its chunks hold {len(value)} "
                                 f"bytes, its manifest says {length}")
            resolved[key] = replace(records[key], value=value)
        return resolved


_ClientStoreT = TypeVar("_ClientStoreT", bound="ClientStore")


class ClientStore(Store):
    """A store over a cloud SDK client (DynamoDB, Firestore): who owns the client, closing it
    once, and turning the SDK's errors into StoreError — once, for every such backend.

    A client passed in stays the caller's: `close()` only closes a client that `_open` built.
    A backend names its SDK's error base in `_client_errors` and says what failed in `_failed`.
    """

    #: The SDK's exceptions that `_mapped` turns into StoreError.
    _client_errors: tuple[type[BaseException], ...] = ()

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client = client
        self._owns_client = False
        self._closed = False

    @classmethod
    def _open(cls: type[_ClientStoreT], client: Any, build: Callable[[], Any], *args: Any,
              **kwargs: Any) -> _ClientStoreT:
        """`cls(client, *args, **kwargs)`, building the client with `build()` when `client` is
        None; a client built here is the store's, closed by `close()`."""
        store = cls(build() if client is None else client, *args, **kwargs)
        store._owns_client = client is None
        return store

    def close(self) -> None:
        """Close the client if the store built it (`_open`); a passed-in client stays open.
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self.client.close()

    @contextlib.contextmanager
    def _mapped(self, operation: str, key: str | None = None) -> Iterator[None]:
        """Turn the SDK's errors escaping the block into StoreError (`_failed`) naming the
        operation and, where given, the key."""
        try:
            yield
        except self._client_errors as exc:
            raise self._failed(operation, exc, key) from exc

    @abstractmethod
    def _failed(self, operation: str, exc: BaseException, key: str | None = None) -> StoreError:
        """The StoreError for `exc`, raised by the SDK in `operation` (on `key`, if given):
        it names the backend, its table or collection, and what the SDK said."""

    @abstractmethod
    def location(self) -> str:
        """A URL naming the data this store reaches — its table or collection on its endpoint —
        the same in every process that opens that data (`run` keys its local delivery queue
        file by it: unum_entry.local.runs.queue_path). Makes no request."""


class StoreWrapper(Store):
    """Delegates every public operation to `inner`; subclasses intercept some (counting,
    fault injection, tracing). The backend primitives are never reached."""

    def __init__(self, inner: Store) -> None:
        super().__init__(ttl_seconds=inner.ttl_seconds, clock=inner._clock)
        self.inner = inner
        self.max_value_bytes = inner.max_value_bytes  # informational: `inner` stores by reference

    def create(self, key: str, value: bytes, *, workflow: str, kind: Kind = Kind.CHECKPOINT,
               expires_at: int) -> tuple[bytes, bool]:
        return self.inner.create(key, value, workflow=workflow, kind=kind, expires_at=expires_at)

    def get(self, key: str) -> bytes | None:
        return self.inner.get(key)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        return self.inner.get_many(keys)

    def read(self, keys: Iterable[str]) -> dict[str, Record]:
        return self.inner.read(keys)

    def delete(self, keys: Iterable[str]) -> None:
        self.inner.delete(keys)

    def add_to_set(self, key: str, slot: int, member: str, *, size: int, workflow: str,
                   expires_at: int) -> SetState:
        return self.inner.add_to_set(key, slot, member, size=size, workflow=workflow, expires_at=expires_at)

    def sweep(self, now: float | None = None) -> int:
        return self.inner.sweep(now)

    def app_read(self, table: str, keys: Iterable[str]) -> dict[str, Versioned]:
        return self.inner.app_read(table, keys)

    def transact(self, key: str, value: bytes, ops: Iterable[AppOp], *, workflow: str,
                 kind: Kind = Kind.STEP, guards: Iterable[Guard] = (),
                 expires_at: int) -> tuple[bytes, bool]:
        return self.inner.transact(key, value, ops, workflow=workflow, kind=kind, guards=guards,
                                   expires_at=expires_at)

    def records(self, workflow: str | None = None) -> Iterator[Record]:
        return self.inner.records(workflow)

    def tally(self, workflow: str, kinds: Collection[Kind], keys: Collection[str] = ()) -> Tally:
        return self.inner.tally(workflow, kinds, keys)

    def workflows(self) -> list[WorkflowEntry]:
        return self.inner.workflows()

    def close(self) -> None:
        self.inner.close()

    # The primitives are never reached: every public method delegates above.
    def _create(self, record: Record) -> Record | None:  # pragma: no cover
        raise NotImplementedError

    def _get_many(self, keys: list[str]) -> dict[str, Record]:  # pragma: no cover
        raise NotImplementedError

    def _delete(self, keys: list[str]) -> None:  # pragma: no cover
        raise NotImplementedError

    def _add_to_set(self, record: Record, slot: int, member: str) -> SetState:  # pragma: no cover
        raise NotImplementedError

    def _scan(self, workflow: str | None) -> Iterable[Record]:  # pragma: no cover
        raise NotImplementedError

    def _sweep(self, now: float) -> int:  # pragma: no cover
        raise NotImplementedError


def chunk_key_of(key: str, digest: bytes, expires_at: int, index: int) -> str:
    """The name of chunk `index` of a value of `key` whose SHA-256 is `digest`, stored until
    `expires_at` (the expiry is part of the name so a chunk never outlives or predeceases its
    manifest: a writer with another expiry writes chunks of its own)."""
    payload = msgpack.packb(["chunk", key, digest, expires_at, index], use_bin_type=True)
    return CHUNK_PREFIX + hashlib.blake2b(payload, digest_size=16).hexdigest()


def tally_records(records: Iterable[Record], workflow: str, kinds: frozenset[Kind], keys: frozenset[str],
                  now: float, keep: Callable[[Record], Record] = lambda record: record
                  ) -> tuple[list[Record], dict[Kind, int], int | None]:
    """`Store._tally`'s pass over `records`: those of `workflow` live at `now` counted by kind,
    their latest expiry, and `keep(record)` of each of `kinds` or named in `keys`."""
    kept: list[Record] = []
    counts: dict[Kind, int] = {}
    latest: int | None = None
    for record in records:
        if record.workflow != workflow or record.expires_at <= now:
            continue
        counts[record.kind] = counts.get(record.kind, 0) + 1
        if latest is None or record.expires_at > latest:
            latest = record.expires_at
        if record.kind in kinds or record.key in keys:
            kept.append(keep(record))
    return kept, counts, latest


def _set_record(key: str, slot: int, size: int, workflow: str, expires_at: int) -> Record:
    """The set record an add at `slot` upserts (`Store.add_to_set`); StoreMisuse for a bad add
    or expiry, before anything is written."""
    _check_set_add(key, slot, size)
    return Record(key, Kind.SET, workflow, _expiry(key, expires_at), None, size)


def _check_set_add(key: str, slot: int, size: int) -> None:
    """StoreMisuse for an add to a set of no slots or at a negative slot."""
    if size < 1:
        raise StoreMisuse(f"set {key!r} needs a size >= 1, got {size}")
    if slot < 0:
        raise StoreMisuse(f"set {key!r}: slot {slot} is negative")


def _expiry(key: str, expires_at: int) -> int:
    """A write's expiry (epoch seconds); StoreMisuse for anything else (None included: every
    write states its expiry, unum_entry.retention)."""
    if type(expires_at) is int:  # every write's case, so it costs one check (the hot path's)
        return expires_at
    if isinstance(expires_at, bool) or not isinstance(expires_at, (int, float)):
        raise StoreMisuse(f"write of {key!r}: expires_at must be epoch seconds, got {expires_at!r}")
    return int(expires_at)


def live_values(found: Iterable[tuple[str, Record | None]], now: float) -> tuple[dict[str, bytes], dict[str, Record]]:
    """`Store._get_values` of the (key, record or None) pairs `found`: the values of the records
    live at `now` that hold one, but those holding a manifest; and the records holding a manifest."""
    values: dict[str, bytes] = {}
    manifests: dict[str, Record] = {}
    for key, record in found:
        if record is not None and record.expires_at > now and record.value is not None:
            if is_manifest(record):
                manifests[key] = record
            else:
                values[key] = record.value
    return values, manifests


def is_manifest(record: Record) -> bool:
    """Does `record` hold a manifest? (Chunks hold raw bytes, whatever their first byte.)"""
    return record.value is not None and record.value[:1] == MANIFEST_TAG and record.kind is not Kind.CHUNK


def _manifest(record: Record) -> tuple[list[str], int]:
    try:
        names, length = msgpack.unpackb(record.value[1:], raw=False)  # type: ignore[index]
        return [str(name) for name in names], int(length)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise StoreError(f"value of {record.key!r} starts with the manifest byte 0xC1 but is not a "
                         f"manifest ({type(exc).__name__}: {exc})") from exc


def _completer(state: SetState) -> int | None:
    """The slot whose add filled the last empty slot, walking the members in apply order."""
    seen: set[int] = set()
    for slot in state.members:
        if state.has_slot(slot):
            seen.add(slot)
            if len(seen) == state.size:
                return slot
    return None
