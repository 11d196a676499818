"""The store contract: the only coordination point of a workflow.

`Store` holds every rule once (TTL stamping, expiry on read, what counts as a full set); a
backend implements five small primitives whose docstrings state the contract. Keys are short
ASCII names made by `unum_entry.naming` (`c-…` checkpoint, `s-…` set, `r-…` result,
`f-…` failure); values are opaque bytes (msgpack, encoded by the runtime).

Consistency the runtime relies on (seed 003 §3.3-3.4): `create` is atomic create-if-absent and a
losing writer gets the winner's value; `add_to_set` is atomic and returns the members *after* the
add; reads are strongly consistent.
"""

from __future__ import annotations

import enum
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from unum_entry.errors import StoreError

DEFAULT_TTL_SECONDS = 7 * 24 * 3600


class Kind(str, enum.Enum):
    """What a stored object is for; the GC rules differ per kind."""

    CHECKPOINT = "checkpoint"
    SET = "set"
    RESULT = "result"
    FAILURE = "failure"
    MARKER = "marker"
    STEP = "step"                  # a step's recorded result, or an invocation's step manifest
    COMPENSATION = "compensation"  # an entry of a workflow's compensation log


@dataclass(frozen=True)
class Record:
    """One stored object. `value` for checkpoints/results/failures; `size`/`members` for sets."""

    key: str
    kind: Kind
    workflow: str
    expires_at: int
    value: bytes | None = None
    size: int | None = None
    members: Mapping[int, str] = field(default_factory=dict)


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


@dataclass(frozen=True)
class Guard:
    """A condition on a unum key that a step transaction also requires: `present` (the key
    exists) or not; with `slot`, the key is a set that exists and whose `slot` is still empty."""

    key: str
    present: bool
    slot: int | None = None


@dataclass(frozen=True)
class SetState:
    """A coordination set right after an add: full when every slot `0..size-1` has a member."""

    size: int
    members: Mapping[int, str]

    def has_slot(self, slot: int) -> bool:
        """False when `slot` lies outside the set: the adder belongs to a different (late,
        divergent) fan-out than the one that created the set."""
        return 0 <= slot < self.size

    @property
    def full(self) -> bool:
        return all(slot in self.members for slot in range(self.size))

    def ordered_members(self) -> list[str]:
        """Members of slots 0..size-1 in slot order (only meaningful when full)."""
        return [self.members[slot] for slot in range(self.size)]


class Store(ABC):
    """Checkpoints, results and coordination sets over a strongly consistent backend."""

    def __init__(self, ttl_seconds: int = DEFAULT_TTL_SECONDS, clock=time.time) -> None:
        self.ttl_seconds = ttl_seconds
        self._clock = clock

    # ---- the public contract (used by ingress/egress) -------------------------------------

    def create(self, key: str, value: bytes, *, workflow: str, kind: Kind = Kind.CHECKPOINT) -> tuple[bytes, bool]:
        """Create `key` holding `value` unless it exists. Returns (stored value, created?).

        The first writer wins; every later writer gets the winner's value back, so all
        executions of one invocation continue with the same output.
        """
        record = Record(key=key, kind=kind, workflow=workflow, expires_at=self._expiry(), value=value)
        existing = self._create(record)
        if existing is None:
            return value, True
        if existing.value is None:
            raise TypeError(f"store key {key!r} holds a {existing.kind.value}, not a value")
        return existing.value, False

    def get(self, key: str) -> bytes | None:
        """The value stored under `key`, or None (missing or expired)."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """Values of the keys that exist (strongly consistent); missing keys are left out."""
        return {key: record.value for key, record in self.read(keys).items() if record.value is not None}

    def read(self, keys: Iterable[str]) -> dict[str, Record]:
        """Live records (values and sets) of the keys that exist, in one consistent batch."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        now = self._clock()
        return {key: record for key, record in self._get_many(wanted).items() if record.expires_at > now}

    def delete(self, keys: Iterable[str]) -> None:
        """Delete objects (checkpoints or sets); missing keys are fine (GC is idempotent)."""
        wanted = list(dict.fromkeys(keys))
        if wanted:
            self._delete(wanted)

    def create_set(self, key: str, size: int, *, workflow: str) -> bool:
        """Create an empty set with `size` slots unless it exists. True if this call created it."""
        if size < 1:
            raise ValueError(f"set {key!r} needs a size >= 1, got {size}")
        record = Record(key=key, kind=Kind.SET, workflow=workflow, expires_at=self._expiry(), size=size)
        return self._create(record) is None

    def add_to_set(self, key: str, slot: int, member: str) -> SetState:
        """Put `member` in `slot` (idempotent) and return the set after the add.

        Raises SetGone when the set does not exist: it was collected, so whoever saw it full
        has already acted and the caller has nothing to coordinate. A slot keeps its first
        member. A slot outside the set is stored but never counted (see SetState.has_slot).
        """
        return self._add_to_set(key, slot, member)

    def app_read(self, table: str, keys: Iterable[str]) -> dict[str, Versioned]:
        """Application items of `table` (strongly consistent); absent keys are left out.
        Application tables hold the user's own data next to unum's (transactional steps)."""
        wanted = list(dict.fromkeys(keys))
        return self._app_read(table, wanted) if wanted else {}

    def transact(self, key: str, value: bytes, ops: Iterable[AppOp], *, workflow: str,
                 kind: Kind = Kind.STEP, guards: Iterable[Guard] = ()) -> tuple[bytes, bool]:
        """Create `key` holding `value` AND apply the application writes in `ops`, atomically:
        all or nothing, even if the caller dies half-way. Returns (stored value, created?).

        If `key` already exists nothing is written and its value comes back (created=False):
        the step was recorded by an earlier execution. Otherwise, if any op's item no longer has
        its expected version, nothing is written and TransactionConflict is raised (re-read and
        retry); if a guard does not hold, nothing is written and GuardFailed is raised.
        """
        record = Record(key=key, kind=kind, workflow=workflow, expires_at=self._expiry(), value=value)
        existing = self._transact(record, list(ops), list(guards))
        if existing is None:
            return value, True
        if existing.value is None:
            raise TypeError(f"store key {key!r} holds a {existing.kind.value}, not a value")
        return existing.value, False

    def records(self, workflow: str | None = None) -> Iterator[Record]:
        """Every live object (of one workflow if given). For inspect, tests and cleanup; O(table)."""
        now = self._clock()
        for record in self._scan(workflow):
            if record.expires_at > now:
                yield record

    # ---- backend primitives --------------------------------------------------------------

    @abstractmethod
    def _create(self, record: Record) -> Record | None:
        """Atomically store `record` if its key is absent (or expired) and return None;
        otherwise store nothing and return the existing record."""

    @abstractmethod
    def _get_many(self, keys: list[str]) -> dict[str, Record]:
        """Strongly consistent read of the given keys (values and sets, with their members);
        absent keys are left out."""

    @abstractmethod
    def _delete(self, keys: list[str]) -> None:
        """Delete the keys; absent keys are not an error."""

    @abstractmethod
    def _add_to_set(self, key: str, slot: int, member: str) -> SetState:
        """Atomically set `members[slot] = member` on an existing set and return the state
        after the update. Raise SetGone if the set does not exist."""

    @abstractmethod
    def _scan(self, workflow: str | None) -> Iterable[Record]:
        """All records (optionally of one workflow), in no particular order."""

    # Transactional steps (unum_entry.steps). Optional: a backend without multi-item
    # transactions keeps these defaults, and only `ctx.transact` is unavailable on it.

    def _app_read(self, table: str, keys: list[str]) -> dict[str, Versioned]:
        """Strongly consistent read of application items; absent keys are left out."""
        raise StoreError(f"{type(self).__name__} has no application tables: transactional steps need "
                         "a store with multi-item transactions (file, memory, dynamodb)")

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

    def _expiry(self) -> int:
        return int(self._clock()) + self.ttl_seconds
