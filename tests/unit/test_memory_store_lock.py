"""The memory store's mutex (`_YieldingLock`): waiters retry instead of queueing on the lock
(its docstring says why); it must still exclude."""

from __future__ import annotations

import threading
import time

import pytest

from unum_entry.stores.memory import _YieldingLock

pytestmark = pytest.mark.unit


def test_the_yielding_lock_excludes_under_contention() -> None:
    lock, inside, overlaps, total = _YieldingLock(), [0], [0], [0]

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
    lock = _YieldingLock()
    with pytest.raises(KeyError):
        with lock:
            raise KeyError("x")
    with lock:  # would spin forever if the raise had left it held
        pass
