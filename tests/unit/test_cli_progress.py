"""`run`'s progress line, rendered from platform snapshots (builder/commands/progress.py): rate
and ETA, in flight split into running and queued, failed attempts named, and the line fitted to
a (fake) terminal width without wrapping; the Console keeps messages off the status line."""

from __future__ import annotations

import io

import pytest

from builder.commands.console import Console
from builder.commands.progress import Meter, bar, eta, render, widest
from unum_entry.local.platform import FunctionProgress, Progress

pytestmark = pytest.mark.unit

MAP = Progress(committed=1205, in_flight=796, failed=0, retries=3, running=8,
               functions=(FunctionProgress("Split", 1, 0), FunctionProgress("Square", 1204, 796)),
               failures=("Square[3] ValueError", "Square[17] KeyError"))


def metered(*snapshots: tuple[float, Progress]) -> Meter:
    meter = Meter()
    for at, progress in snapshots:
        meter.update(at, progress)
    return meter


def test_a_chain_shows_counts_running_and_queued_and_no_bar() -> None:
    line = render(Progress(committed=2, in_flight=1, failed=0, retries=0, running=1,
                           functions=(FunctionProgress("Hello", 1, 0), FunctionProgress("Shout", 0, 1))), 1.25)
    assert line == "  1.2 s  committed 2  running 1  queued 0  failed 0"


def test_a_map_shows_rate_eta_bar_and_the_failed_items() -> None:
    before = Progress(committed=1005, in_flight=996, failed=0, retries=3, running=8,
                      functions=(FunctionProgress("Split", 1, 0), FunctionProgress("Square", 1004, 996)))
    line = render(MAP, 12.3, meter=metered((10.3, before), (12.3, MAP)), bar_width=10)
    # 200 commits in 2 s: 100/s; Square's 796 left at 100/s: ETA 8 s
    assert line == (" 12.3 s  committed 1205 (100/s)  running 8  queued 788  failed 0  retries 3  "
                    "Square [======>---] 1204/2000 ETA 8 s  errors: Square[3] ValueError, Square[17] KeyError")


@pytest.mark.parametrize("width", [200, 120, 100, 80, 60, 40, 20])
def test_the_line_always_fits_the_terminal_shedding_the_bar_first(width: int) -> None:
    line = render(MAP, 12.3, meter=metered((10.3, MAP), (12.3, MAP)), width=width)
    assert len(line) < width and "\n" not in line
    if width >= 200:
        assert "Square [" in line and "retries 3" in line and "errors: Square[3] ValueError, Square[17] KeyError" in line
    if width == 120:  # the bar and the retries went first, then the older error
        assert "Square 1204/2000" in line and line.endswith("errors: Square[17] KeyError") and "retries" not in line
    if width == 100:  # then the stage: the newest error stays longest
        assert "1204/2000" not in line and line.endswith("errors: Square[17] KeyError")
    if width >= 80:  # the counts always show
        assert "running 8  queued 788  failed 0" in line and not line.endswith("…")
    else:
        assert line.endswith("…")


def test_the_meter_measures_over_its_window_only() -> None:
    def at(n: int) -> Progress:
        return Progress(committed=n, in_flight=0, failed=0, retries=0, functions=(FunctionProgress("W", n, 0),))

    meter = Meter(window=5.0)
    assert meter.rate() is None
    meter.update(0.0, at(0))
    assert meter.rate() is None  # one sample is no rate
    for second in range(1, 11):  # 10/s for 10 s, then nothing for 5 s
        meter.update(float(second), at(10 * second))
    assert meter.rate() == pytest.approx(10.0) and meter.rate("W") == pytest.approx(10.0)
    for second in range(11, 17):
        meter.update(float(second), at(100))
    assert meter.rate() == pytest.approx(0.0)  # the old burst left the window


def test_eta_reads_well() -> None:
    assert (eta(7.6), eta(125), eta(3720)) == ("8 s", "2 min 05 s", "1 h 02 min")


def test_a_warning_lands_on_its_own_line_not_inside_the_status() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    console, logs = Console(screen), Console(screen)  # `run`'s and the log handler's (builder.cli)
    console.status("  1.0 s  committed 1")
    logs.message("warning: something")
    console.status("  1.1 s  committed 2")
    console.clear_status()
    assert screen.getvalue() == ("\r\x1b[K  1.0 s  committed 1\r\x1b[Kwarning: something\n\r\x1b[K  1.1 s  committed 2"
                                 "\r\x1b[K")


def test_the_bar_at_its_ends() -> None:
    assert bar(0, 4, 4) == "[>---] 0/4"
    assert bar(4, 4, 4) == "[====] 4/4"
    assert bar(0, 0, 4) == "[>---] 0/1"  # never divides by zero


def test_the_widest_is_the_one_with_most_in_flight() -> None:
    functions = (FunctionProgress("A", 10, 2), FunctionProgress("B", 0, 5), FunctionProgress("C", 0, 1))
    assert widest(functions).function == "B"
    assert widest((FunctionProgress("C", 0, 1),)) is None  # one invocation: not a fan-out


class _QuietPlatform:
    """Only timers queued (nothing in flight) until `busy_until` calls of wait_idle."""

    def __init__(self, busy_for: int = 0, timers_of: frozenset[str] = frozenset({"wf"})) -> None:
        self.waits = 0
        self.busy_for = busy_for
        self.timers_of = timers_of

    def timer_workflows(self) -> set[str]:
        return set(self.timers_of)

    def wait_idle(self, timeout: float, *, until: float | None = None) -> None:
        import time

        from unum_entry.errors import WorkflowTimeout

        self.waits += 1
        time.sleep(timeout)
        raise WorkflowTimeout("timers queued")

    def progress(self) -> Progress:
        return Progress(committed=0, in_flight=1 if self.waits <= self.busy_for else 0, failed=0, retries=0,
                        functions=())


def test_a_run_left_with_only_timers_returns_once_the_workflow_ended(monkeypatch):
    import time

    from builder.commands import run

    monkeypatch.setattr(run, "TICK", 0.01)
    asked: list[float] = []
    began = time.monotonic()
    platform = _QuietPlatform(busy_for=5)
    run.wait_for_workflow(platform, 30, "wf", lambda: asked.append(time.monotonic()) or True)  # type: ignore[arg-type]
    assert len(asked) == 1 and platform.waits == 6  # not asked while busy; at once when quiet
    assert asked[0] - began < 5


def test_whether_a_quiet_workflow_ended_is_asked_at_doubling_intervals(monkeypatch):
    """`ended()` scans the workflow's records: not at every tick while a far timer is queued."""
    import time

    from builder.commands import run
    from unum_entry.errors import WorkflowTimeout

    monkeypatch.setattr(run, "TICK", 0.01)
    asked: list[float] = []
    platform = _QuietPlatform()
    with pytest.raises(WorkflowTimeout):
        run.wait_for_workflow(platform, 0.6, "wf", lambda: asked.append(time.monotonic()) is not None)  # type: ignore[arg-type]
    assert 3 <= len(asked) <= 8 and platform.waits >= 2 * len(asked)  # +0.02, +0.04, … against a tick of 0.01 s
    assert max(b - a for a, b in zip(asked, asked[1:])) >= 0.08  # (load only stretches the gaps)


def test_a_run_keeps_waiting_for_another_workflows_timer_after_its_own_ended(monkeypatch):
    """A child execution this workflow started (its Wait's timer queued) still runs: wait for it."""
    from builder.commands import run
    from unum_entry.errors import WorkflowTimeout

    monkeypatch.setattr(run, "TICK", 0.01)
    asked: list[bool] = []
    with pytest.raises(WorkflowTimeout):
        run.wait_for_workflow(_QuietPlatform(timers_of=frozenset({"wf", "child"})), 0.2, "wf",  # type: ignore[arg-type]
                              lambda: asked.append(True) or True)
    assert asked == []
