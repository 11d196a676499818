"""A mutex for threads of one process that contend under the GIL (`YieldingLock`): the memory
store's records and the embedded engine's queue."""

from __future__ import annotations

import threading
import time

SPINS = 100  # tries, each after giving up the GIL, before a waiter queues on the lock


class YieldingLock:
    """A mutex whose waiters do not queue on it at first: a thread that finds it held gives up
    the GIL (`time.sleep(0)`) and tries again, SPINS times, before it waits as usual.

    Why: a plain `threading.Lock` hands itself, on release, to a waiter that does not hold the
    GIL; that waiter then holds the lock while it waits up to a switch interval (5 ms) for the
    GIL, the releasing thread blocks on the lock at its next operation, and so on: a convoy in
    which every acquisition costs a context switch. Once formed it lasts a whole run (the memory
    store under a map's workers: 2-3 switches and ~60 µs more per transition; the engine's queue
    lock under 8 workers: a sixth of the run spent taking it). For locks held briefly (no I/O):
    a waiter's retry finds it free after at most one GIL hand-over; one held long (a scan of
    every record) gets queued waiters after SPINS tries.

    A drop-in for `threading.Lock` where a `threading.Condition` uses it: `acquire(blocking,
    timeout)`, `release()`, a context manager; not reentrant."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock; as `threading.Lock.acquire` (the timeout counts from the first queued wait)."""
        acquire = self._lock.acquire
        if acquire(False):
            return True
        if not blocking:
            return False
        for _ in range(SPINS):
            time.sleep(0)
            if acquire(False):
                return True
        return acquire(True, timeout)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        if self._lock.acquire(False):  # a free lock (nearly every time) in one Python frame, not two
            return True
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
