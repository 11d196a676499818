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


class FakeClock:
    """`time` for unum_entry.local.cpu: `perf_counter` moves only when a test says (no timing noise)."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@several
def test_a_brief_handler_runs_on_the_engines_cpu_after_a_streak_and_is_measured_again_now_and_then(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from unum_entry.local import cpu as cpu_module
    from unum_entry.local.cpu import BRIEF_STREAK, RESAMPLE

    monkeypatch.setattr(cpu_module, "time", FakeClock())  # every call takes no time: brief
    cpu, everything = OneCpu(enabled=True), os.sched_getaffinity(0)
    seen = cpu.handler(lambda event, context: os.sched_getaffinity(0))

    def worker() -> list[set[int]]:
        cpu.pin()
        return [seen(None, None) for _ in range(BRIEF_STREAK + 2 * RESAMPLE)]

    masks = in_thread(worker)
    unpinned = [i for i, mask in enumerate(masks) if mask == everything]
    assert unpinned[:BRIEF_STREAK] == list(range(BRIEF_STREAK))  # measured while the streak builds
    # then on one CPU, but for each RESAMPLE-th call
    assert unpinned[BRIEF_STREAK:] == [BRIEF_STREAK + RESAMPLE - 1, BRIEF_STREAK + 2 * RESAMPLE - 1]
    assert all(len(masks[i]) == 1 for i in range(len(masks)) if i not in unpinned)


@several
def test_a_handler_that_is_not_brief_keeps_every_cpu_and_a_slow_call_ends_a_streak(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from unum_entry.local import cpu as cpu_module
    from unum_entry.local.cpu import BRIEF, BRIEF_STREAK, RESAMPLE

    clock = FakeClock()
    monkeypatch.setattr(cpu_module, "time", clock)
    cpu, everything = OneCpu(enabled=True), os.sched_getaffinity(0)
    streak_from = 2 * BRIEF_STREAK  # the first calls never make a streak: every BRIEF_STREAK-th one is slow
    resample = streak_from + BRIEF_STREAK + RESAMPLE - 1  # the first call measured again once pinned
    slow = {BRIEF_STREAK - 1, 2 * BRIEF_STREAK - 1, resample}  # the resample finds it slow: the streak ends
    calls = [0]

    def handler(event: Any, context: Any) -> set[int]:
        if calls[0] in slow:
            clock.now += BRIEF * 2
        calls[0] += 1
        return os.sched_getaffinity(0)

    wrapped = cpu.handler(handler)

    def worker() -> list[set[int]]:
        cpu.pin()
        return [wrapped(None, None) for _ in range(2 * BRIEF_STREAK + 2 * RESAMPLE)]

    masks = in_thread(worker)
    unpinned = [i for i, mask in enumerate(masks) if mask == everything]
    assert unpinned == [*range(streak_from + BRIEF_STREAK), *range(resample, resample + BRIEF_STREAK + 1)]
