"""The embedded engine's worker threads share one CPU while they run unum's own code (`OneCpu`).

Why: the engine's workers are threads of one process, so only one of them runs Python at a time
(the GIL), and every SQLite statement, commit and fsync lets go of the GIL. On a machine with
several CPUs the thread that takes it over runs on another CPU: each hand-over then wakes a
thread there (an inter-processor interrupt, a VM exit on a virtual machine), and the woken
thread often finds the GIL taken back and sleeps again - a convoy that does no work. Measured
on this project's 2-CPU VM (docs/embedded-engine.md, "Cost"), a 5,000-item map + sum on the
durable SQLite store: 3,490-4,710 transitions per second with the whole process on one CPU
(`taskset -c 0`) against 2,460-3,320 spread over two. The memory store, which never lets go of
the GIL, is unaffected.

So each worker pins itself to one CPU (the same for every worker of the process: one of the
process's allowed CPUs, picked by the process id so that several engines spread out) and
unpins while a handler runs (`handler`): user code keeps every CPU the process had - its own
threads, a subprocess it starts (which inherits the mask), a C library that releases the GIL.
Not a handler whose calls are brief (BRIEF_STREAK in a row each within BRIEF seconds, measured
again every RESAMPLE-th call): two `sched_setaffinity` calls cost ~8 µs here, and a map branch
of unum's own work ~150 µs (measured: a 100,000-item durable map + sum 16-27 % faster). Such a
call is too short to use another CPU, and whatever starts a subprocess or runs long C code is
not brief; a thread a brief call starts does inherit the one CPU.
Only on a store that asks for it (`Store.one_cpu`: SQLite, whose calls are brief and start no
threads; a cloud store's client threads, started from a pinned worker, would inherit its one CPU
for good: measured, the Firestore fault schedules took twice as long). Linux only
(`os.sched_setaffinity`); nothing happens with a single allowed CPU, elsewhere, or with
UNUM_ONE_CPU=0.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any, Callable

#: The environment variable that turns the sharing off ("0").
SWITCH = "UNUM_ONE_CPU"
#: Seconds within which a handler call counts as brief: too short for other CPUs to matter.
BRIEF = 0.0002
#: Brief calls in a row after which a handler runs on the engine's CPU (`handler`).
BRIEF_STREAK = 16
#: ... except each RESAMPLE-th call, which runs on every CPU again and is measured.
RESAMPLE = 64


class OneCpu:
    """Pins the calling worker thread to the engine's CPU (`pin`), and lets handlers run on all
    of the process's CPUs (`handler`). Inactive (every method a no-op) where it cannot help."""

    def __init__(self, enabled: bool | None = None, *, cpu: int | None = None) -> None:
        if enabled is None:
            enabled = os.environ.get(SWITCH, "1") != "0"
        allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.active = bool(enabled and len(allowed) > 1 and hasattr(os, "sched_setaffinity"))
        self._all = set(allowed)
        # `cpu`: the engine's CPU when it is one of the allowed (a helper process's: unum_entry.local.helpers).
        self._one = {cpu} if cpu in self._all else {allowed[os.getpid() % len(allowed)]} if allowed else set()
        self._local = threading.local()

    @property
    def cpus(self) -> tuple[list[int], int | None]:
        """(The process's allowed CPUs, the engine's CPU among them or None when inactive)."""
        return sorted(self._all), (next(iter(self._one)) if self.active and self._one else None)

    def pin(self) -> None:
        """Keep the calling thread (a worker, for the rest of its life) on the engine's CPU."""
        if self.active and self._set(self._one):
            self._local.pinned = True

    def handler(self, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        """`handler`, run with every CPU of the process when called from a pinned worker -
        unless its calls are brief: after BRIEF_STREAK calls in a row that each returned within
        BRIEF seconds it runs on the engine's CPU (two `sched_setaffinity` calls, ~8 µs on this
        project's VM, are then a large part of such a call), and every RESAMPLE-th call runs on
        every CPU again and is measured; one call that is not brief ends the streak. A call
        that starts a subprocess or runs long C code is not brief."""
        if not self.active:
            return handler
        streak = [0, 0]  # brief calls in a row, calls since (shared by the workers: counts, not rules)

        @functools.wraps(handler)
        def unpinned(event: Any, context: Any) -> Any:
            if not getattr(self._local, "pinned", False):
                return handler(event, context)
            if streak[0] >= BRIEF_STREAK:
                streak[1] += 1
                if streak[1] % RESAMPLE:
                    return handler(event, context)
            self._set(self._all)
            began = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                streak[0] = streak[0] + 1 if time.perf_counter() - began < BRIEF else 0
                self._set(self._one)

        return unpinned

    def _set(self, cpus: set[int]) -> bool:
        try:
            os.sched_setaffinity(0, cpus)  # 0: the calling thread (Linux)
        except OSError:  # a CPU taken away meanwhile (cgroups, hotplug): leave the thread as it is
            return False
        return True
