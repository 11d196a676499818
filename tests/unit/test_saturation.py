"""unum_entry.local.saturation: the process's CPU use per window, from the clocks passed in."""

from __future__ import annotations

from unum_entry.local.saturation import Saturation


class Clocks:
    """A wall clock and a CPU clock that move only when told (binary fractions: exact sums)."""

    def __init__(self) -> None:
        self.wall = 64.0
        self.cpu = 8.0

    def run(self, wall: float, cpu: float) -> None:
        self.wall += wall
        self.cpu += cpu


def measured(window: float = 0.5, threshold: float = 0.85) -> tuple[Clocks, Saturation]:
    clocks = Clocks()
    return clocks, Saturation(cpu_clock=lambda: clocks.cpu, clock=lambda: clocks.wall, window=window,
                              threshold=threshold)


def test_nothing_measured_yet_is_not_saturated() -> None:
    clocks, saturation = measured()
    clocks.run(0.25, 0.25)  # within the first window: no answer but the default
    assert saturation.saturated() is False


def test_a_window_spent_on_the_cpu_is_saturated_and_one_spent_waiting_is_not() -> None:
    clocks, saturation = measured()
    clocks.run(0.5, 0.5)
    assert saturation.saturated() is True
    clocks.run(0.25, 0.0)  # the next window has not ended: the last answer stands
    assert saturation.saturated() is True
    clocks.run(0.25, 0.0)  # it ended after 0.5 s without CPU
    assert saturation.saturated() is False


def test_an_idle_spell_counts_whole() -> None:
    clocks, saturation = measured()
    clocks.run(0.5, 0.5)
    assert saturation.saturated() is True
    clocks.run(16.0, 0.5)  # sixteen seconds of waiting, then a burst: 3 % of a CPU over the window
    assert saturation.saturated() is False


def test_the_threshold_is_a_share_of_one_cpu() -> None:
    clocks, saturation = measured(window=1.0, threshold=0.75)
    clocks.run(1.0, 0.5)
    assert saturation.saturated() is False
    clocks.run(1.0, 0.75)
    assert saturation.saturated() is True
