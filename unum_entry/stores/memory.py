"""In-process store: a dict guarded by one lock. No I/O, so it measures the runtime's own CPU
(bench) and gives unit tests a store without a file system. Objects live as long as the store
(or until they expire: an expired object counts as absent everywhere, `sweep` drops them).

Sets are kept as a `Record(kind=SET, size, members)` whose members dict is private to the store
(an add puts its member in it in place); every record and set state handed out carries a copy,
so callers never see later adds. `max_value_bytes` is None (no limit); tests set it on an
instance to exercise values stored by reference.
"""

from __future__ import annotations

from collections.abc import Iterable

from unum_entry.errors import GuardFailed, StoreError, TransactionConflict
from unum_entry.stores.base import (AppOp, Guard, Kind, Record, SetState, Store, Versioned,
                                     live_values, tally_records)
from unum_entry.yielding_lock import YieldingLock


class MemoryStore(Store):
    """Store over an in-process dict; atomic because every primitive holds `_lock`."""

    joins_in_create = True  # a create and a set add under one hold of the lock (`_create_joining`)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._records: dict[str, Record] = {}
        self._app: dict[tuple[str, str], Versioned] = {}
        self._lock = YieldingLock()  # unum_entry.yielding_lock says why

    # ---- primitives ----------------------------------------------------------------------

    def _create(self, record: Record) -> Record | None:
        with self._lock:
            existing = self._live(record.key)
            if existing is not None:
                return _snapshot(existing)
            self._records[record.key] = record
            return None

    def _get_many(self, keys: list[str]) -> dict[str, Record]:
        with self._lock:
            records = self._records
            # (a set is copied, `_snapshot`; any other record is handed out as it is: a wide join reads 20,000 at once)
            return {key: record if record.kind is not Kind.SET else _snapshot(record)
                    for key in keys if (record := records.get(key)) is not None}

    def _get_values(self, keys: list[str], now: float) -> tuple[dict[str, bytes], dict[str, Record]]:
        # One pass under the lock, no record copied (a set holds no value): a fan-in reads every branch's.
        with self._lock:
            records = self._records
            return live_values(((key, records.get(key)) for key in keys), now)

    def _delete(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                self._records.pop(key, None)

    def _create_joining(self, record: Record, set_record: Record, slot: int,
                        member: str) -> tuple[Record | None, SetState | None]:
        with self._lock:
            existing = self._live(record.key)
            if existing is not None:
                return _snapshot(existing), None
            state = self._add_locked(set_record, slot, member)  # first: it raises before it changes anything
            self._records[record.key] = record
            return None, state

    def _add_to_set(self, record: Record, slot: int, member: str) -> SetState:
        with self._lock:
            return self._add_locked(record, slot, member)

    def _add_locked(self, record: Record, slot: int, member: str) -> SetState:
        """`_add_to_set` with the lock held."""
        current = self._live(record.key)
        if current is None:
            current = Record(record.key, record.kind, record.workflow, record.expires_at, None, record.size, {})
            self._records[record.key] = current
        elif current.kind is not Kind.SET or current.size is None:
            raise StoreError(f"store key {record.key!r} holds a {current.kind.value}, not a set")
        members = current.members
        if slot not in members:  # a slot keeps its first member (idempotent add)
            if type(members) is dict:  # the store's own (made here): no record handed out holds it (`_snapshot`)
                members[slot] = member
            else:
                current = Record(current.key, current.kind, current.workflow, current.expires_at, current.value,
                                 current.size, {**members, slot: member})
                self._records[record.key] = current
        return SetState(current.size if current.size is not None else record.size or 0, dict(current.members))

    def _sweep(self, now: float) -> int:
        with self._lock:
            expired = [key for key, record in self._records.items() if record.expires_at <= now]
            for key in expired:
                del self._records[key]
        return len(expired)

    def _app_read(self, table: str, keys: list[str]) -> dict[str, Versioned]:
        with self._lock:
            return {key: self._app[(table, key)] for key in keys if (table, key) in self._app}

    def _transact(self, record: Record, ops: list[AppOp], guards: list[Guard]) -> Record | None:
        with self._lock:
            existing = self._live(record.key)
            if existing is not None:
                return _snapshot(existing)
            for guard in guards:
                found = self._live(guard.key)
                holds = (found is not None) == guard.present
                if holds and guard.slot is not None:
                    holds = found is not None and found.kind is Kind.SET and guard.slot not in found.members
                if not holds:
                    raise GuardFailed(f"step {record.key!r}: guard on {guard.key!r} does not hold")
            for op in ops:
                current = self._app.get((op.table, op.key))
                if (current.version if current else 0) != op.expected:
                    raise TransactionConflict(f"application item {op.table}/{op.key} changed since it was read")
            self._records[record.key] = record
            for op in ops:
                if not op.write:
                    continue
                if op.value is None:
                    self._app.pop((op.table, op.key), None)
                else:
                    self._app[(op.table, op.key)] = Versioned(op.value, op.expected + 1)
            return None

    def _tally(self, workflow: str, kinds: frozenset[Kind], keys: frozenset[str],
               now: float) -> tuple[list[Record], dict[Kind, int], int | None]:
        # The pass under the lock, copying only the records kept: `_scan` copies every set, and a
        # workflow's outcome is read once it ends (a map's 20,000 branches: 12 -> 4 ms).
        with self._lock:
            return tally_records(self._records.values(), workflow, kinds, keys, now, keep=_snapshot)

    def _scan(self, workflow: str | None) -> Iterable[Record]:
        with self._lock:
            found = [_snapshot(r) for r in self._records.values() if workflow is None or r.workflow == workflow]
        return found

    # ---- helpers -------------------------------------------------------------------------

    def _live(self, key: str) -> Record | None:
        """The record under `key` unless missing or expired (an expired one is dropped, as TTL
        would). Call with `_lock` held."""
        record = self._records.get(key)
        if record is not None and record.expires_at <= self._clock():
            del self._records[key]
            return None
        return record


def _snapshot(record: Record) -> Record:
    """A record safe to hand out: sets get a copy of their members."""
    if record.kind is not Kind.SET:
        return record
    return Record(key=record.key, kind=record.kind, workflow=record.workflow, expires_at=record.expires_at,
                  value=record.value, size=record.size, members=dict(record.members))
