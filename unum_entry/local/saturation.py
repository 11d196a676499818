"""Whether the embedded engine's process already uses a whole CPU (`Saturation`): then, on a
store whose calls never let go of the GIL, one more worker running quick deliveries adds no
throughput, only GIL hand-overs.

Why: the workers are threads of one process, and Python runs on one of them at a time. On a
store that never waits (the memory store: `Store.holds_gil`), a worker whose deliveries run
quick, CPU-bound handlers keeps the GIL busy by itself; a second such worker only makes the
interpreter hand the GIL over every switch interval (5 ms), and each hand-over is a context
switch or two. Measured on this project's 2-CPU VM (docs/embedded-engine.md, "Round 20"): a
20,000-item map + sum took ~12-20 % more CPU per transition with 8 workers than with 1, and
~17 % less with the switch interval at 100 ms. So the engine measures its own CPU use
(process CPU seconds per wall second over a WINDOW): at SATURATED or more, an extra worker
stands aside while another is at work (unum_entry.local.platform `_crowded`). A handler that
waits on I/O lowers the rate, so the workers spread again within a window.
"""

from __future__ import annotations

import time
from typing import Callable

#: Seconds of wall time over which the process's CPU use is measured.
WINDOW = 0.02
#: CPU seconds per wall second from which the process counts as using a whole CPU.
SATURATED = 0.85


class Saturation:
    """The process's CPU use over the last whole WINDOW, read where workers decide whether to
    take more work (the caller serializes the calls: the platform's lock). One CPU clock read
    per window, so asking costs a monotonic clock read."""

    __slots__ = ("_cpu_clock", "_clock", "_window", "_threshold", "_since", "_cpu_since", "_saturated")

    def __init__(self, *, cpu_clock: Callable[[], float] = time.process_time,
                 clock: Callable[[], float] = time.monotonic, window: float = WINDOW,
                 threshold: float = SATURATED) -> None:
        self._cpu_clock = cpu_clock
        self._clock = clock
        self._window = window
        self._threshold = threshold
        self._since = clock()
        self._cpu_since = cpu_clock()
        self._saturated = False  # nothing measured yet: the workers spread as they always did

    def saturated(self) -> bool:
        """Whether the process used at least `threshold` CPU seconds per second over the last
        window that ended (a window that took longer - an idle spell - counts whole, so the
        answer after one is False)."""
        now = self._clock()
        if now - self._since >= self._window:
            cpu = self._cpu_clock()
            self._saturated = cpu - self._cpu_since >= self._threshold * (now - self._since)
            self._since, self._cpu_since = now, cpu
        return self._saturated
