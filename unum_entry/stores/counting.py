"""A store wrapper that counts operations by kind: what a transition costs (bench, tests)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable

from unum_entry.stores.base import AppOp, Guard, Kind, Record, SetState, Store, StoreWrapper, Versioned


class CountingStore(StoreWrapper):
    """Delegates to `inner` and counts billed operations: a read per key read, a write per
    create/add, a delete per key deleted (DynamoDB bills per item, not per request)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.ordered_sets = False  # `inner` already says who completed a set (SetState.completed_by)
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _count(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.counts[kind] += n

    def create(self, key: str, value: bytes, *, workflow: str, kind: Kind = Kind.CHECKPOINT,
               expires_at: int) -> tuple[bytes, bool]:
        """Counted as one `create_<kind>` (a value stored by reference also writes its chunks
        inside `inner`; those are not counted here)."""
        self._count(f"create_{kind.value}")
        return self.inner.create(key, value, workflow=workflow, kind=kind, expires_at=expires_at)

    def get(self, key: str) -> bytes | None:
        return self.get_many([key]).get(key)  # counted as one read

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(keys))
        self._count("read", len(wanted))
        return self.inner.get_many(wanted)

    def read(self, keys: Iterable[str]) -> dict[str, Record]:
        wanted = list(dict.fromkeys(keys))
        self._count("read", len(wanted))
        return self.inner.read(wanted)

    def delete(self, keys: Iterable[str]) -> None:
        wanted = list(dict.fromkeys(keys))
        self._count("delete", len(wanted))
        self.inner.delete(wanted)

    def add_to_set(self, key: str, slot: int, member: str, *, size: int, workflow: str,
                   expires_at: int) -> SetState:
        self._count("add_to_set")
        return self.inner.add_to_set(key, slot, member, size=size, workflow=workflow, expires_at=expires_at)

    def sweep(self, now: float | None = None) -> int:
        self._count("sweep")
        return self.inner.sweep(now)

    def app_read(self, table: str, keys: Iterable[str]) -> dict[str, Versioned]:
        wanted = list(dict.fromkeys(keys))
        self._count("read", len(wanted))
        return self.inner.app_read(table, wanted)

    def transact(self, key: str, value: bytes, ops: Iterable[AppOp], *, workflow: str,
                 kind: Kind = Kind.STEP, guards: Iterable[Guard] = (),
                 expires_at: int) -> tuple[bytes, bool]:
        """Counted as one `transact` plus one `transact_item` per item it touches (DynamoDB
        bills transactional writes at twice the normal rate, per item)."""
        ops, guards = list(ops), list(guards)
        self._count("transact")
        self._count("transact_item", 1 + len(ops) + len(guards))
        return self.inner.transact(key, value, ops, workflow=workflow, kind=kind, guards=guards,
                                   expires_at=expires_at)

    def reset(self) -> Counter[str]:
        """Return the counts so far and start again from zero."""
        with self._lock:
            counts, self.counts = self.counts, Counter()
        return counts
