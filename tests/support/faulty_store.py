"""Store wrappers for the fault suites: `FaultyStore` (over the library's delegating base,
`unum_entry.stores.base.StoreWrapper`, importable from here too), which makes store operations
fail transiently the nastiest ways a real backend can.

`FaultyStore` raises `InjectedStoreError` (a plain `StoreError`: the delivery policy redelivers)
when the run's `FaultInjector.store_fault` says so:

- "before": nothing happened;
- "after": the operation happened — a create committed, a set add landed, a transaction applied
  its writes, a read returned — and the caller sees an error instead of the answer;
- "partial": a multi-key read (`read`, `get_many`) read only its first k keys, a multi-key
  `delete` deleted only its first k keys, then the error.

`records`, `sweep` and `close` never fail: they are what the checks use.

`partial_batches` makes a DynamoDB store's backend answer part of its BatchGetItem /
BatchWriteItem calls with `UnprocessedKeys` / `UnprocessedItems`, as DynamoDB does under
throttling (the store must resubmit the rest).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from unum_entry.errors import StoreError
from unum_entry.local.faults import FaultInjector
from unum_entry.stores.base import AppOp, Guard, Kind, Record, SetState, Store, StoreWrapper, Versioned

T = TypeVar("T")


class InjectedStoreError(StoreError):
    """A transient store error injected by the test (not a SetGone/TransactionConflict/GuardFailed)."""


def innermost(store: Store) -> Store:
    """The backend under any stack of wrappers (anything with an `inner` store)."""
    while isinstance(getattr(store, "inner", None), Store):
        store = store.inner
    return store


def raw_records(store: Store, workflow: str) -> list[Record]:
    """Every record the backend holds for `workflow`, expired or not, as stored (manifests not
    resolved): what `records` would hide — a record without an expiry, or one already expired."""
    return list(innermost(store)._scan(workflow))


class FaultyStore(StoreWrapper):
    """Injects transient store errors (module docstring) as `faults.store_fault` decides."""

    def __init__(self, inner: Store, faults: FaultInjector) -> None:
        super().__init__(inner)
        self.faults = faults

    def _op(self, name: str, run: Callable[[], T], keys: int = 1,
            partial: Callable[[int], Any] | None = None) -> T:
        fault = self.faults.store_fault(name, keys)
        if fault is None:
            return run()
        mode, done = fault
        if mode == "before":
            raise InjectedStoreError(f"injected store error before {name}")
        if mode == "partial" and partial is not None:
            partial(done)
            raise InjectedStoreError(f"injected store error in {name} after {done} of {keys} keys")
        run()
        raise InjectedStoreError(f"injected store error after {name} happened")

    def create(self, key: str, value: bytes, *, workflow: str, kind: Kind = Kind.CHECKPOINT,
               expires_at: int) -> tuple[bytes, bool]:
        return self._op(f"create_{kind.value}", lambda: self.inner.create(
            key, value, workflow=workflow, kind=kind, expires_at=expires_at))

    def get(self, key: str) -> bytes | None:
        return self._op("read", lambda: self.inner.get(key))

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(keys))
        return self._op("read", lambda: self.inner.get_many(wanted), len(wanted),
                        lambda k: self.inner.get_many(wanted[:k]))

    def read(self, keys: Iterable[str]) -> dict[str, Record]:
        wanted = list(dict.fromkeys(keys))
        return self._op("read", lambda: self.inner.read(wanted), len(wanted),
                        lambda k: self.inner.read(wanted[:k]))

    def delete(self, keys: Iterable[str]) -> None:
        wanted = list(dict.fromkeys(keys))
        self._op("delete", lambda: self.inner.delete(wanted), len(wanted),
                 lambda k: self.inner.delete(wanted[:k]))

    def add_to_set(self, key: str, slot: int, member: str, *, size: int, workflow: str,
                   expires_at: int) -> SetState:
        return self._op("add_to_set", lambda: self.inner.add_to_set(
            key, slot, member, size=size, workflow=workflow, expires_at=expires_at))

    def app_read(self, table: str, keys: Iterable[str]) -> dict[str, Versioned]:
        wanted = list(dict.fromkeys(keys))
        return self._op("app_read", lambda: self.inner.app_read(table, wanted), len(wanted),
                        lambda k: self.inner.app_read(table, wanted[:k]))

    def transact(self, key: str, value: bytes, ops: Iterable[AppOp], *, workflow: str,
                 kind: Kind = Kind.STEP, guards: Iterable[Guard] = (),
                 expires_at: int) -> tuple[bytes, bool]:
        ops, guards = list(ops), list(guards)
        return self._op("transact", lambda: self.inner.transact(
            key, value, ops, workflow=workflow, kind=kind, guards=guards, expires_at=expires_at))


class _UnprocessedBatches:
    """A boto3 DynamoDB client whose batch calls sometimes process only their first k items
    and hand the rest back as unprocessed (every other call passes through)."""

    def __init__(self, client: Any, faults: FaultInjector) -> None:
        self._client = client
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def batch_get_item(self, *, RequestItems: dict[str, Any], **kwargs: Any) -> dict[str, Any]:  # noqa: N803
        return self._split(self._client.batch_get_item, RequestItems, kwargs, "UnprocessedKeys",
                           lambda spec: spec["Keys"], lambda spec, keys: {**spec, "Keys": keys})

    def batch_write_item(self, *, RequestItems: dict[str, Any], **kwargs: Any) -> dict[str, Any]:  # noqa: N803
        return self._split(self._client.batch_write_item, RequestItems, kwargs, "UnprocessedItems",
                           lambda spec: spec, lambda spec, items: items)

    def _split(self, call, request, kwargs, leftover, items_of, with_items) -> dict[str, Any]:
        (table, spec), = request.items()  # the store sends one table per call
        items = items_of(spec)
        k = self._faults.unprocessed_split(len(items))
        if k is None:
            return call(RequestItems=request, **kwargs)
        if k:
            response = dict(call(RequestItems={table: with_items(spec, items[:k])}, **kwargs))
        else:
            response = {"Responses": {table: []}} if leftover == "UnprocessedKeys" else {}
        response[leftover] = {table: with_items(spec, items[k:])}
        return response


@contextlib.contextmanager
def partial_batches(store: Store, faults: FaultInjector) -> Iterator[None]:
    """While the block runs, the DynamoDB backend under `store` (if it is one, and the rates ask
    for it) processes batches only partly, as `faults.unprocessed_split` decides."""
    backend = innermost(store)
    client = getattr(backend, "client", None)
    if not faults.rates.unprocessed or client is None or not hasattr(client, "batch_get_item"):
        yield
        return
    backend.client = _UnprocessedBatches(client, faults)
    try:
        yield
    finally:
        backend.client = client
