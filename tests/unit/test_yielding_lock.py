"""`YieldingLock` (the memory store's and the embedded engine's mutex): waiters retry instead
of queueing on the lock (its docstring says why); it must still exclude, and work as a
`threading.Condition`'s lock as `threading.Lock` does."""

from __future__ import annotations

import threading
import time

import pytest

from unum_entry.yielding_lock import YieldingLock

pytestmark = pytest.mark.unit


def test_the_yielding_lock_excludes_under_contention() -> None:
    lock, inside, overlaps, total = YieldingLock(), [0], [0], [0]

    def work() -> None:
        for _ in range(2_000):
            with lock:
                inside[0] += 1
                seen = total[0]
                time.sleep(0)  # gives up the GIL while holding the lock: the others run and must wait
                if inside[0] != 1:
                    overlaps[0] += 1
                total[0] = seen + 1  # loses updates without exclusion
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert overlaps[0] == 0 and total[0] == 8 * 2_000


def test_the_yielding_lock_is_released_when_the_block_raises() -> None:
    lock = YieldingLock()
    with pytest.raises(KeyError):
        with lock:
            raise KeyError("x")
    with lock:  # would spin forever if the raise had left it held
        pass


def test_a_held_yielding_lock_refuses_a_non_blocking_or_timed_out_acquire() -> None:
    lock = YieldingLock()
    assert lock.acquire() and lock.locked()
    results: list[bool] = []
    other = threading.Thread(target=lambda: results.extend([lock.acquire(False), lock.acquire(True, 0.05)]))
    other.start()
    other.join(timeout=10)
    assert results == [False, False]
    lock.release()
    assert not lock.locked() and lock.acquire(False)
    lock.release()


def test_a_condition_over_the_yielding_lock_waits_times_out_and_wakes() -> None:
    lock = YieldingLock()
    cv = threading.Condition(lock)  # type: ignore[arg-type]
    with cv:
        assert cv.wait(0.01) is False  # nobody notifies: times out, the lock held again after
        assert lock.locked()
    ready: list[int] = []

    def producer() -> None:
        time.sleep(0.05)
        with cv:
            ready.append(1)
            cv.notify()

    thread = threading.Thread(target=producer)
    thread.start()
    with cv:
        assert cv.wait_for(lambda: ready, timeout=10)
    thread.join(timeout=10)
    assert ready == [1] and not lock.locked()
