"""builder.ui.run_index.RunIndex: the UI's list of runs served at once from the latest read, read
again in the background (one read at a time) once older than `max_age`; errors raised once."""

from __future__ import annotations

import threading
import time

import pytest

from builder.ui.run_index import RunIndex
from unum_entry.errors import StoreError, UnumError

pytestmark = pytest.mark.unit


class Reads:
    """A `read` that returns ["v1"], ["v2"]... and can be held until released."""

    def __init__(self) -> None:
        self.count = 0
        self.release = threading.Event()
        self.release.set()
        self.started = threading.Semaphore(0)
        self.fail_next: Exception | None = None

    def __call__(self) -> list[str]:
        self.count += 1
        self.started.release()
        assert self.release.wait(timeout=10)
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        return [f"v{self.count}"]


def wait_until(check, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.005)


def test_the_first_request_waits_for_the_first_read_then_the_list_is_kept() -> None:
    reads, now = Reads(), [0.0]
    index = RunIndex(reads, max_age=1.0, clock=lambda: now[0])
    assert index.runs() == ["v1"]
    now[0] = 0.9
    assert index.runs() == ["v1"] and reads.count == 1  # fresh: no read


def test_prime_reads_before_anyone_asks() -> None:
    reads = Reads()
    index = RunIndex(reads, max_age=1.0, clock=lambda: 0.0)
    index.prime()
    index.prime()  # one read, however often
    assert reads.started.acquire(timeout=10)
    assert index.runs() == ["v1"] and reads.count == 1


def test_a_stale_list_is_served_at_once_while_one_read_runs_in_the_background() -> None:
    reads, now = Reads(), [0.0]
    index = RunIndex(reads, max_age=1.0, clock=lambda: now[0])
    assert index.runs() == ["v1"]
    now[0] = 5.0
    reads.release.clear()  # the next read hangs until released
    assert index.runs() == ["v1"]  # stale, returned without waiting; a read started
    assert reads.started.acquire(timeout=10) and reads.started.acquire(timeout=10)  # v1's and the new one
    for _ in range(5):
        assert index.runs() == ["v1"]  # still reading: no second read
    assert reads.count == 2
    reads.release.set()
    wait_until(lambda: index.runs() == ["v2"])
    assert reads.count == 2


def test_a_failed_read_is_raised_once_then_read_again() -> None:
    reads, now = Reads(), [0.0]
    index = RunIndex(reads, max_age=1.0, clock=lambda: now[0])
    reads.fail_next = StoreError("store s.db: unreachable")
    with pytest.raises(StoreError, match="unreachable"):
        index.runs()  # the first read failed: nothing to serve
    assert index.runs() == ["v2"]  # the next request reads again
    now[0] = 5.0
    reads.fail_next = StoreError("store s.db: gone")
    assert index.runs() == ["v2"]  # stale: served, a background read fails
    wait_until(lambda: index._reading is None)
    with pytest.raises(UnumError, match="gone"):
        index.runs()  # said once
    assert index.runs() == ["v2"]  # and then read again in the background
    wait_until(lambda: index.runs() == ["v4"])
