"""unum_entry.local.cpu: the engine's workers pinned to one CPU, handlers run on all of them."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from unum_entry.local.cpu import SWITCH, OneCpu

pytestmark = pytest.mark.unit
several = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                             reason="needs Linux and at least two allowed CPUs")


def in_thread(fn: Any) -> Any:
    """`fn()` on a fresh thread (pinning changes the calling thread only), its result here."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join(10)
    return out[0]


def test_switched_off_it_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SWITCH, "0")
    cpu = OneCpu()
    handler = lambda event, context: event  # noqa: E731
    assert not cpu.active and cpu.handler(handler) is handler
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cpu.pin()
    assert (os.sched_getaffinity(0) if before is not None else None) == before


@several
def test_a_pinned_worker_runs_on_one_cpu_and_its_handlers_on_all() -> None:
    cpu, everything = OneCpu(enabled=True), os.sched_getaffinity(0)
    seen = cpu.handler(lambda event, context: os.sched_getaffinity(0))

    def worker() -> tuple[set[int], set[int], set[int]]:
        cpu.pin()
        pinned = os.sched_getaffinity(0)
        return pinned, seen(None, None), os.sched_getaffinity(0)

    pinned, in_handler, after = in_thread(worker)
    assert len(pinned) == 1 and pinned <= everything
    assert in_handler == everything  # user code keeps every CPU (its subprocesses inherit the mask)
    assert after == pinned
    assert in_thread(lambda: seen(None, None)) == everything  # not a worker: left alone
    assert os.sched_getaffinity(0) == everything  # the test's own thread was never touched


@several
def test_a_handler_that_raises_leaves_its_worker_pinned() -> None:
    cpu = OneCpu(enabled=True)

    def fails(event: Any, context: Any) -> Any:
        raise ValueError("user code")

    wrapped = cpu.handler(fails)

    def worker() -> set[int]:
        cpu.pin()
        with pytest.raises(ValueError):
            wrapped(None, None)
        return os.sched_getaffinity(0)

    assert len(in_thread(worker)) == 1
