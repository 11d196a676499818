"""Transactional steps' reads and writes on application tables (`ctx.transact`)."""

from __future__ import annotations

from typing import Any

from unum_entry.codec import UnencodableValue, decode, encode
from unum_entry.errors import StepError
from unum_entry.stores.base import AppOp, Store


class Transaction:
    """Reads and writes of one transactional step on application tables; committed (or not)
    together with the step record by `Store.transact`. Values are JSON-like data."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._versions: dict[tuple[str, str], int] = {}
        self._values: dict[tuple[str, str], Any] = {}
        self._writes: dict[tuple[str, str], bytes | None] = {}

    def get(self, table: str, key: str, default: Any = None) -> Any:
        """The item's value as of this transaction (its own writes included), or `default`."""
        item = (table, key)
        if item not in self._versions:
            self._read(table, key)
        value = self._values.get(item)
        return default if value is None else value

    def put(self, table: str, key: str, value: Any) -> None:
        item = (table, key)
        if item not in self._versions:
            self._read(table, key)
        try:
            self._writes[item] = encode(value, what=f"application item {table}/{key}")
        except UnencodableValue as exc:
            raise StepError(str(exc)) from exc
        self._values[item] = value

    def delete(self, table: str, key: str) -> None:
        item = (table, key)
        if item not in self._versions:
            self._read(table, key)
        self._writes[item] = None
        self._values[item] = None

    def ops(self) -> list[AppOp]:
        """Every item read (version check) or written (conditional write)."""
        return [AppOp(table, key, expected, write=(table, key) in self._writes, value=self._writes.get((table, key)))
                for (table, key), expected in self._versions.items()]

    def _read(self, table: str, key: str) -> None:
        found = self._store.app_read(table, [key]).get(key)
        self._versions[(table, key)] = found.version if found else 0
        self._values[(table, key)] = decode(found.value) if found else None
