"""Retry back-off and error matching (pure), with an injected sleeper."""

from __future__ import annotations

import pytest

from unum_entry.asl.retry import matches, retry_delay

pytestmark = pytest.mark.unit


def test_backoff_grows_by_the_rate_and_is_capped() -> None:
    retriers = [{"ErrorEquals": ["E"], "IntervalSeconds": 1, "BackoffRate": 2.0, "MaxAttempts": 4, "MaxDelaySeconds": 5}]
    counts = [0]
    delays = [retry_delay(retriers, "E", counts, lambda: 0.5) for _ in range(5)]
    assert delays == [1.0, 2.0, 4.0, 5.0, None]


def test_full_jitter_scales_the_delay_and_defaults_apply() -> None:
    counts = [0]
    assert retry_delay([{"ErrorEquals": ["States.ALL"], "JitterStrategy": "FULL"}], "X", counts, lambda: 0.25) == 0.25
    assert retry_delay([{"ErrorEquals": ["States.ALL"]}], "X", [1], lambda: 0.0) == 2.0
    assert retry_delay([{"ErrorEquals": ["States.ALL"], "MaxAttempts": 0}], "X", [0], lambda: 0.0) is None


def test_first_matching_retrier_decides() -> None:
    retriers = [{"ErrorEquals": ["A"], "MaxAttempts": 1, "IntervalSeconds": 3}, {"ErrorEquals": ["States.ALL"], "IntervalSeconds": 7}]
    counts = [0, 0]
    assert retry_delay(retriers, "B", counts, lambda: 0) == 7.0
    assert retry_delay(retriers, "A", counts, lambda: 0) == 3.0
    assert retry_delay(retriers, "A", counts, lambda: 0) is None  # exhausted: Catch decides
    assert counts == [1, 1]


@pytest.mark.parametrize("equals, error, expected", [
    (["States.ALL"], "CustomError", True),
    (["States.ALL"], "States.Runtime", False),
    (["States.TaskFailed"], "ValueError", True),
    (["States.TaskFailed"], "States.Timeout", False),
    (["States.Timeout"], "States.Timeout", True),
    (["CustomError"], "OtherError", False),
])
def test_error_matching(equals: list[str], error: str, expected: bool) -> None:
    assert matches(equals, error) is expected
