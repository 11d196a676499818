"""The list of a store's runs that `python -m builder ui` pages through, kept between requests.

Listing the runs is a pass over every object of the store (`Store.workflows`): about 0.2 s for
10,000 runs on SQLite, more on a busy machine, and the page asks for its list every second. So
the server keeps the list (builder.ui.pages.index_runs, newest first) and serves every request
from it at once; a request that finds it older than `max_age` seconds starts one read in the
background, which replaces it when done. A new run thus appears in the list at most `max_age`
seconds plus one read after it started; the statuses of the runs a page shows are read on each
request (they change), so they are never stale. The first read starts with the server (`prime`);
a request that comes before it ends waits for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from unum_entry.errors import UnumError

T = TypeVar("T")
READ_TIMEOUT = 60.0  # seconds a request waits for the first list


class RunIndex(Generic[T]):
    """`read()`'s latest list: `runs()` returns it at once and reads it again in the background
    when it is older than `max_age` seconds (one read at a time). What a read raised is raised
    once, to the next request (then the one after it reads again)."""

    def __init__(self, read: Callable[[], Sequence[T]], *, max_age: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._read = read
        self._max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._runs: Sequence[T] | None = None
        self._at = 0.0
        self._reading: threading.Event | None = None  # set when the read in progress ends
        self._error: Exception | None = None

    def prime(self) -> None:
        """Start the first read now (the server starts), so that the first page finds it done."""
        with self._lock:
            if self._runs is None and self._reading is None:
                self._start()

    def runs(self) -> Sequence[T]:
        """The latest list; waits only when there is none yet."""
        with self._lock:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            if self._runs is not None:
                if self._reading is None and self._clock() - self._at > self._max_age:
                    self._start()
                return self._runs
            reading = self._reading or self._start()
        if not reading.wait(timeout=READ_TIMEOUT):
            raise UnumError(f"ui: listing the store's runs took more than {READ_TIMEOUT:.0f} s")
        with self._lock:
            if self._runs is not None:
                return self._runs
            failed, self._error = self._error, None
        raise failed if failed is not None else UnumError("ui: the list of runs could not be read")

    def _start(self) -> threading.Event:
        """Start one background read (the caller holds the lock)."""
        done = threading.Event()
        self._reading = done
        threading.Thread(target=self._refresh, args=(done,), name="unum-ui-runs", daemon=True).start()
        return done

    def _refresh(self, done: threading.Event) -> None:
        began = self._clock()
        try:
            found = self._read()
        except Exception as exc:  # noqa: BLE001 - handed to the request that asks next
            with self._lock:
                self._error, self._reading = exc, None
        else:
            with self._lock:
                self._runs, self._at, self._reading = found, began, None
        finally:
            done.set()
