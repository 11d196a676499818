"""`run`'s progress line, rendered from platform snapshots (builder/commands/progress.py)."""

from __future__ import annotations

import pytest

from builder.commands.progress import bar, render, widest
from unum_entry.local.platform import FunctionProgress, Progress

pytestmark = pytest.mark.unit


def test_a_chain_shows_counts_and_no_bar() -> None:
    line = render(Progress(committed=2, in_flight=1, failed=0, retries=0,
                           functions=(FunctionProgress("Hello", 1, 0), FunctionProgress("Shout", 0, 1))), 1.25)
    assert line == "  1.2 s  committed 2, in flight 1, failed 0"


def test_a_map_shows_a_bar_for_its_widest_function() -> None:
    progress = Progress(committed=1205, in_flight=796, failed=0, retries=3,
                        functions=(FunctionProgress("Split", 1, 0), FunctionProgress("Square", 1204, 796)))
    line = render(progress, 12.3, bar_width=10)
    assert line == " 12.3 s  committed 1205, in flight 796, failed 0, retries 3  Square [======>---] 1204/2000"


def test_the_bar_at_its_ends() -> None:
    assert bar(0, 4, 4) == "[>---] 0/4"
    assert bar(4, 4, 4) == "[====] 4/4"
    assert bar(0, 0, 4) == "[>---] 0/1"  # never divides by zero


def test_the_widest_is_the_one_with_most_in_flight() -> None:
    functions = (FunctionProgress("A", 10, 2), FunctionProgress("B", 0, 5), FunctionProgress("C", 0, 1))
    assert widest(functions).function == "B"
    assert widest((FunctionProgress("C", 0, 1),)) is None  # one invocation: not a fan-out
