"""The retention rule: how long a workflow's objects live, and when a workflow has outlived them.

Nothing the runtime writes is deleted by the runtime, and every write says when its object
expires (`expires_at` is a required argument of every store write: stores have no default
TTL). One `Ledger` per workflow makes every store key (through `unum_entry.naming`) and stamps
every expiry by the object's kind (`Ledger.expires_at`), with two formulas:

- a join's set shard (Kind.SET) expires at the workflow's *deadline*: only a running workflow
  adds to or reads a set, and no execution starts after `deadline - margin` (see `check`);
- every other object (checkpoints, results, the failure record, callback records, step
  records, compensations, markers, envelopes stored by reference, `run`'s start record; chunks
  follow their record) expires at `max(deadline, now + redelivery)`:

- the workflow's *deadline* (its start plus the TTL) keeps every object of a running workflow
  readable while the workflow may still need it;
- `now + redelivery` (the platform's longest redelivery window: Lambda's maximum event age of
  6 h plus its maximum timeout) keeps an object written late in a workflow alive as long as a
  duplicate of the invocation that wrote it can still arrive.

So the create-if-absent commit alone answers every duplicate: slow, concurrent or late.

An execution that would start after `deadline - margin` (margin: the longest a function may
run) could read objects that expire under it; it does not run, and the workflow ends with the
failure `Unum.RetentionExpired` instead of stalling silently (see `check`). An add to a set shard
at or after the shard's expiry is refused the same way (`Ledger.check_join`): the shard has
expired (or vanished with it), and recreating it would leave a join that never fills. (A shard
deleted *before* its expiry, which nothing of unum's does, cannot be told from a first add
without another request per branch; the deadline watchdog, unum_entry.watchdog, ends such a
workflow at its deadline.)

Clocks differ between hosts. `python -m builder gc` sweeps only what expired `GC_SKEW_SECONDS`
(default 5 min) before its own clock, so a host whose clock runs fast by less than that cannot
sweep a set shard that a running workflow may still add to (`sweep_horizon`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Final, TYPE_CHECKING

from unum_entry import naming
from unum_entry.errors import RetentionExpired
from unum_entry.frozen import ReadOnly
from unum_entry.stores.base import Joining, Kind

if TYPE_CHECKING:
    from unum_entry.envelope import Envelope, Frame
    from unum_entry.stores.base import AppOp, Guard, SetAdd, SetState, Store

DEFAULT_TTL_SECONDS = 7 * 24 * 3600
DEFAULT_REDELIVERY_SECONDS = 6 * 3600 + 15 * 60   # Lambda: max event age + max function timeout
DEFAULT_MARGIN_SECONDS = 15 * 60                   # Lambda: max function timeout
GC_SKEW_SECONDS = 5 * 60                           # gc: how far a sweeping host's clock may run fast


class Retention(ReadOnly):
    """The retention settings of one deployment (every function of a workflow must agree)."""

    __slots__ = ("ttl_seconds", "redelivery_seconds", "margin_seconds", "clock")

    ttl_seconds: Final[int]
    redelivery_seconds: Final[int]
    margin_seconds: Final[int]
    clock: Final[Callable[[], float]]

    def __init__(self, ttl_seconds: int = DEFAULT_TTL_SECONDS, redelivery_seconds: int = DEFAULT_REDELIVERY_SECONDS,
                 margin_seconds: int = DEFAULT_MARGIN_SECONDS, clock: Callable[[], float] = time.time) -> None:
        self.ttl_seconds = ttl_seconds
        self.redelivery_seconds = redelivery_seconds
        self.margin_seconds = margin_seconds
        self.clock = clock

    def deadline(self) -> int:
        """The deadline of a workflow that starts now."""
        return int(self.clock()) + self.ttl_seconds

    def expires_at(self, deadline: int) -> int:
        """When an object written now by a workflow with `deadline` may be deleted."""
        return max(deadline, int(self.clock()) + self.redelivery_seconds)

    def check(self, workflow: str, deadline: int) -> None:
        """Raise RetentionExpired when an execution must not start any more (see module doc)."""
        now = self.clock()
        if now >= deadline - min(self.margin_seconds, self.ttl_seconds // 2):
            raise RetentionExpired(
                f"workflow {workflow} outlived its retention: its objects expire at {deadline} "
                f"(start + TTL {self.ttl_seconds} s) and this execution started at {int(now)}; "
                "raise the store's TTL for workflows that run this long")


def store_retention(store: Store) -> Retention:
    """The retention rule over a store's TTL and clock."""
    return Retention(ttl_seconds=store.ttl_seconds, clock=getattr(store, "_clock", time.time))


def sweep_horizon(now: float, skew_seconds: int = GC_SKEW_SECONDS) -> float:
    """What a sweep at `now` (the sweeping host's clock) may delete: objects expired by
    `now - skew_seconds`. A host whose clock runs fast by less than `skew_seconds` thus never
    deletes an object before its expiry on a correct clock (module docstring)."""
    if skew_seconds < 0:
        raise ValueError(f"clock-skew margin must be >= 0 seconds, got {skew_seconds}")
    return now - skew_seconds


class Ledger(ReadOnly):
    """One workflow's keys and expiries: every store write of the runtime takes its key and its
    `expires_at` from here (module docstring). `deadline` is the workflow's (start + TTL, from
    its envelopes); building one does no I/O."""

    __slots__ = ("workflow", "deadline", "retention")

    workflow: Final[str]
    deadline: Final[int]
    retention: Final[Retention]

    def __init__(self, workflow: str, deadline: int, retention: Retention) -> None:
        self.workflow = workflow
        self.deadline = int(deadline)
        self.retention = retention

    @classmethod
    def of(cls, env: Envelope, retention: Retention) -> Ledger:
        """The ledger of the workflow `env` belongs to (its deadline must be set)."""
        return cls(env.workflow, env.deadline, retention)

    @classmethod
    def bounded(cls, workflow: str, deadline: int | None, retention: Retention) -> Ledger:
        """A ledger where the deadline may not be known (0/None): a workflow that started no
        later than now has a deadline no later than `now + TTL`, so that bound stamps expiries
        that outlive every object of the workflow (never shorter ones)."""
        return cls(workflow, deadline or retention.deadline(), retention)

    # ---- expiries --------------------------------------------------------------------------

    def expires_at(self, kind: Kind) -> int:
        """When an object of `kind` written now by this workflow expires (module docstring)."""
        if kind is Kind.SET:
            return self.deadline
        return self.retention.expires_at(self.deadline)

    def check_join(self, set_key: str, shard_key: str) -> None:
        """Raise RetentionExpired when an add to the shard `shard_key` of join set `set_key`
        would come at or after the shard's expiry: the shard has expired (or vanished), and an
        upsert would silently recreate it with this one member, a join that never fills."""
        now = self.retention.clock()
        if now >= self.deadline:
            raise RetentionExpired(
                f"workflow {self.workflow}: join set {set_key} (shard {shard_key}) expired at its deadline "
                f"{self.deadline}; this branch joined at {int(now)}, too late to ever complete the join")

    # ---- keys (unum_entry.naming) ------------------------------------------------------------

    def checkpoint(self, function: str, frames: Sequence[Frame]) -> str:
        return naming.checkpoint_key(self.workflow, function, frames)

    def result(self, frames: Sequence[Frame]) -> str:
        return naming.result_key(self.workflow, frames)

    def failure(self) -> str:
        return naming.failure_key(self.workflow)

    def start(self) -> str:
        return naming.start_key(self.workflow)

    def compensation(self, index: int) -> str:
        return naming.compensation_key(self.workflow, index)

    def timer(self, purpose: str, *parts: object) -> str:
        return naming.timer_name(self.workflow, purpose, *parts)

    @staticmethod
    def step(invocation: str, seq: int) -> str:
        return naming.step_key(invocation, seq)

    @staticmethod
    def callback(invocation: str, nonce: str) -> str:
        return naming.callback_key(invocation, nonce)

    @staticmethod
    def envelope(packed: bytes) -> str:
        return naming.envelope_key(packed)

    # ---- writes: the key's record, stamped -------------------------------------------------

    def create(self, store: Store, key: str, value: bytes, kind: Kind = Kind.CHECKPOINT) -> tuple[bytes, bool]:
        """`store.create` of this workflow's object `key`, stamped with its kind's expiry."""
        return store.create(key, value, workflow=self.workflow, kind=kind, expires_at=self.expires_at(kind))

    def create_joining(self, store: Store, key: str, value: bytes, join: SetAdd,
                       kind: Kind = Kind.CHECKPOINT) -> tuple[bytes, bool, SetState | None]:
        """`store.create_joining`: `create`, and the set add `join` (built by
        `unum_entry.fanin.leaf_add`, which checked and stamped it) in the same write."""
        return store.create_joining(key, value, workflow=self.workflow, kind=kind, expires_at=self.expires_at(kind),
                                    join=join)

    def joining(self, key: str, value: bytes, join: SetAdd) -> Joining:
        """The item of `store.create_joining_many` that `create_joining` of a checkpoint would write."""
        return Joining(key, value, self.workflow, self.expires_at(Kind.CHECKPOINT), join)

    def add_to_set(self, store: Store, set_key: str, shard_key: str, slot: int, member: str, *,
                   size: int) -> SetState:
        """`store.add_to_set` on a shard of the join set `set_key`, refused once the shard has
        expired (`check_join`), stamped with the deadline."""
        self.check_join(set_key, shard_key)
        return store.add_to_set(shard_key, slot, member, size=size, workflow=self.workflow,
                                expires_at=self.expires_at(Kind.SET))

    def transact(self, store: Store, key: str, value: bytes, ops: Iterable[AppOp], *,
                 guards: Iterable[Guard] = ()) -> tuple[bytes, bool]:
        """`store.transact` recording the step `key` of this workflow, stamped as a STEP."""
        return store.transact(key, value, ops, workflow=self.workflow, kind=Kind.STEP, guards=guards,
                              expires_at=self.expires_at(Kind.STEP))
