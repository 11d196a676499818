"""A store wrapper for schedules of two actors: `InterleavingStore` numbers every store operation
its caller makes and runs `injected` (once, on the store underneath) right before operation
number `at` — `at` equal to the number of operations the caller makes puts it after the last
one. A dry run with `at=None` counts them (`ops`): a schedule is then every `at` in
`range(len(ops) + 1)`, so the other actor's write lands at each point of the caller's reads and
writes in turn, deterministically (no threads, no timing)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from typing import TypeVar

from unum_entry.stores.base import AppOp, Guard, Kind, Record, Store, StoreWrapper, Tally, WorkflowEntry

T = TypeVar("T")


class InterleavingStore(StoreWrapper):
    """Runs `injected(inner)` before operation number `at` of this wrapper (module docstring);
    `ops` names every operation made, in order. `close` is left to the test (the caller under
    test may close its store: the same store is read afterwards)."""

    def __init__(self, inner: Store, injected: Callable[[Store], object] | None = None, at: int | None = None) -> None:
        super().__init__(inner)
        self.injected, self.at = injected, at
        self.ops: list[str] = []
        self.fired = False

    def finish(self) -> None:
        """Run the injection now if the caller made fewer than `at` operations (`at` past its last)."""
        if self.injected is not None and self.at is not None and not self.fired:
            self._fire()

    def _fire(self) -> None:
        self.fired = True
        assert self.injected is not None
        self.injected(self.inner)

    def _op(self, name: str, run: Callable[[], T]) -> T:
        if self.injected is not None and self.at == len(self.ops) and not self.fired:
            self._fire()
        self.ops.append(name)
        return run()

    def create(self, key: str, value: bytes, *, workflow: str, kind: Kind = Kind.CHECKPOINT,
               expires_at: int) -> tuple[bytes, bool]:
        return self._op(f"create_{kind.value}", lambda: self.inner.create(
            key, value, workflow=workflow, kind=kind, expires_at=expires_at))

    def get(self, key: str) -> bytes | None:
        return self._op("get", lambda: self.inner.get(key))

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        wanted = list(keys)
        return self._op("get_many", lambda: self.inner.get_many(wanted))

    def read(self, keys: Iterable[str]) -> dict[str, Record]:
        wanted = list(keys)
        return self._op("read", lambda: self.inner.read(wanted))

    def transact(self, key: str, value: bytes, ops: Iterable[AppOp], *, workflow: str,
                 kind: Kind = Kind.STEP, guards: Iterable[Guard] = (),
                 expires_at: int) -> tuple[bytes, bool]:
        ops, guards = list(ops), list(guards)
        return self._op(f"transact_{kind.value}", lambda: self.inner.transact(
            key, value, ops, workflow=workflow, kind=kind, guards=guards, expires_at=expires_at))

    def records(self, workflow: str | None = None) -> Iterator[Record]:
        return iter(self._op("records", lambda: list(self.inner.records(workflow))))

    def tally(self, workflow: str, kinds: Collection[Kind], keys: Collection[str] = ()) -> Tally:
        return self._op("tally", lambda: self.inner.tally(workflow, kinds, keys))

    def workflows(self) -> list[WorkflowEntry]:
        return self._op("workflows", self.inner.workflows)

    def delete(self, keys: Iterable[str]) -> None:
        wanted = list(keys)
        self._op("delete", lambda: self.inner.delete(wanted))

    def close(self) -> None:
        """Nothing: the test closes the store underneath."""
