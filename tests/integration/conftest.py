"""Fixtures for integration tests: real emulators over loopback HTTP.

`moto_server` starts one moto server process per session; `dynamodb_store` gives each test a
fresh table on it (created through `open_store(..., create=1)`, deleted afterwards); `race`
runs calls on many threads released at the same instant.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest

from builder.local_stack.process import MotoServer
from unum_entry.stores import open_store

T = TypeVar("T")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


@pytest.fixture
def dynamodb_store(moto_server: MotoServer):
    name = f"unum-test-{uuid.uuid4().hex[:12]}"
    store = open_store(f"dynamodb://{name}?endpoint={moto_server.endpoint}&create=1")
    try:
        yield store
    finally:
        try:
            store.client.delete_table(TableName=name)
        finally:
            store.close()


def _race(count: int, work: Callable[[int], T]) -> list[T]:
    """Run `work(i)` for i in 0..count-1 on `count` threads released at once; results in order."""
    barrier = threading.Barrier(count)

    def run(i: int) -> T:
        barrier.wait(timeout=30)
        return work(i)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


@pytest.fixture
def race() -> Callable[[int, Callable[[int], T]], list[T]]:
    return _race
