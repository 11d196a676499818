"""The progress line `run` shows on a terminal, from `LocalPlatform.progress()` snapshots:
invocations committed and their rate, deliveries in flight split into running and queued,
workflow failures, handler retries, and while a map or fan-out runs a bar for its widest
function with an ETA; the latest failed attempts by name (`Work[3] ValueError`). The line is
fitted to the terminal's width by shedding detail (the bar first), never wrapped."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from unum_entry.local.platform import FunctionProgress, Progress

BAR_WIDTH = 24
WINDOW = 5.0  # seconds of samples a rate is measured over
_NARROWER = (12, 6, 0)  # bar widths tried after the requested one when the line must fit (0: no bar)


@dataclass(frozen=True)
class _Sample:
    at: float
    committed: int
    by_function: dict[str, int]


class Meter:
    """Commit rates over the last `window` seconds, from the snapshots `update` is given."""

    def __init__(self, window: float = WINDOW) -> None:
        self.window = window
        self._samples: deque[_Sample] = deque()

    def update(self, at: float, progress: Progress) -> None:
        """Add the snapshot taken at `at` (seconds, any monotonic origin)."""
        self._samples.append(_Sample(at, progress.committed, {f.function: f.committed for f in progress.functions}))
        while len(self._samples) > 2 and self._samples[1].at <= at - self.window:
            self._samples.popleft()

    def rate(self, function: str | None = None) -> float | None:
        """Commits per second (of `function`, else of all), or None before two samples."""
        if len(self._samples) < 2:
            return None
        first, last = self._samples[0], self._samples[-1]
        span = last.at - first.at
        if span <= 0:
            return None
        if function is None:
            return (last.committed - first.committed) / span
        return (last.by_function.get(function, 0) - first.by_function.get(function, 0)) / span


def render(progress: Progress, elapsed: float, *, meter: Meter | None = None, width: int | None = None,
           bar_width: int = BAR_WIDTH) -> str:
    """One status line of at most `width - 1` characters (no limit if None), e.g.
    ` 12.3 s  committed 1205 (98/s)  running 8  queued 788  failed 0  retries 3  Square
    [=====>----] 1204/2000 ETA 8 s  errors: Square[3] ValueError`. To fit, it sheds detail in this
    order: the bar's width, the bar, retries, all errors but the newest, the map's stage, the
    newest error; then the line is cut with `…`."""
    rate = meter.rate() if meter is not None else None
    wide = widest(progress.functions)
    variants = [_Detail(bars=bars) for bars in (bar_width, *(b for b in _NARROWER if b < bar_width))]
    variants += [_Detail(0, retries=False), _Detail(0, retries=False, errors=1),
                 _Detail(0, retries=False, errors=1, stage=False), _Detail(0, retries=False, errors=0, stage=False)]
    fitted = ""
    for detail in variants:
        fitted = _line(progress, elapsed, rate, wide, meter, detail)
        if width is None or len(fitted) < width:
            return fitted
    return fitted[:max(1, width - 2)] + "…" if width is not None else fitted


@dataclass(frozen=True)
class _Detail:
    """What one candidate line shows: the bar's width (0: counts only), retries, how many of the
    latest errors (-1: all), the map's stage."""

    bars: int
    retries: bool = True
    errors: int = -1
    stage: bool = True


def _line(progress: Progress, elapsed: float, rate: float | None, wide: FunctionProgress | None,
          meter: Meter | None, detail: _Detail) -> str:
    committed = f"committed {progress.committed}" + (f" ({_per_second(rate)})" if rate is not None else "")
    queued = max(0, progress.in_flight - progress.running)
    parts = [committed, f"running {progress.running}", f"queued {queued}", f"failed {progress.failed}"]
    if progress.retries and detail.retries:
        parts.append(f"retries {progress.retries}")
    if wide is not None and detail.stage:
        total = wide.committed + wide.in_flight
        bars = detail.bars
        stage = f"{wide.function} " + (bar(wide.committed, total, bars) if bars else f"{wide.committed}/{total}")
        wide_rate = meter.rate(wide.function) if meter is not None else None
        if wide_rate:
            stage += f" ETA {eta(wide.in_flight / wide_rate)}"
        parts.append(stage)
    errors = progress.failures if detail.errors < 0 else progress.failures[len(progress.failures) - detail.errors:]
    if errors and detail.errors:
        parts.append("errors: " + ", ".join(errors))
    return f"{elapsed:5.1f} s  " + "  ".join(parts)


def _per_second(rate: float) -> str:
    return f"{rate:.0f}/s" if rate >= 10 else f"{rate:.1f}/s"


def eta(seconds: float) -> str:
    """`8 s`, `2 min 05 s`, `1 h 02 min`."""
    whole = int(seconds + 0.5)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def widest(functions: tuple[FunctionProgress, ...]) -> FunctionProgress | None:
    """The function with the most deliveries in flight, when more than one of its invocations is
    under way or done (a map or fan-out stage); None for a chain."""
    running = [f for f in functions if f.in_flight and f.committed + f.in_flight > 1]
    return max(running, key=lambda f: (f.in_flight, f.function), default=None)


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    """`[=====>----] done/total`, ASCII (any terminal encoding)."""
    total = max(total, done, 1)
    filled = width * done // total
    head = ">" if filled < width else ""
    return "[" + "=" * filled + head + "-" * (width - filled - len(head)) + f"] {done}/{total}"
