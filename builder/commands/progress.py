"""The progress line `run` shows on a terminal: one line from a `LocalPlatform.progress()`
snapshot — invocations committed, deliveries in flight, failures, handler retries — and, while a
map or fan-out runs, a bar for its widest function (committed of committed + in flight)."""

from __future__ import annotations

from unum_entry.local.platform import FunctionProgress, Progress

BAR_WIDTH = 24


def render(progress: Progress, elapsed: float, *, bar_width: int = BAR_WIDTH) -> str:
    """One status line, e.g. `12.3 s  committed 1204, in flight 796, failed 0  Square
    [==========>-------------] 1204/2000`."""
    parts = [f"committed {progress.committed}", f"in flight {progress.in_flight}", f"failed {progress.failed}"]
    if progress.retries:
        parts.append(f"retries {progress.retries}")
    line = f"{elapsed:5.1f} s  " + ", ".join(parts)
    wide = widest(progress.functions)
    if wide is not None:
        line += f"  {wide.function} {bar(wide.committed, wide.committed + wide.in_flight, bar_width)}"
    return line


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
