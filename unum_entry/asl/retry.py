"""Step Functions error matching and Retry back-off (pure; the runner sleeps).

Matching follows the States Language: `States.ALL` matches every error except `States.Runtime`
(which can be neither retried nor caught) and `States.DataLimitExceeded` (a terminal error
that only its own name matches); `States.TaskFailed` matches every error except
`States.Timeout` and `States.Runtime`; any other name matches itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

UNCATCHABLE = "States.Runtime"
TERMINAL = "States.DataLimitExceeded"  # matched only by its own name, not by States.ALL


def matches(error_equals: Sequence[str], error: str) -> bool:
    """Whether a Retrier's or Catcher's `ErrorEquals` covers `error`."""
    if error == UNCATCHABLE:
        return False
    if error == TERMINAL:
        return TERMINAL in error_equals
    for name in error_equals:
        if name == error or name == "States.ALL":
            return True
        if name == "States.TaskFailed" and error != "States.Timeout":
            return True
    return False


def retry_delay(retriers: Sequence[Mapping[str, Any]], error: str, counts: list[int],
                random: Callable[[], float]) -> float | None:
    """Seconds to wait before the next attempt after `error`, or None when no Retrier applies
    or the first one that matches is exhausted (then Catch decides). `counts[i]` counts the
    retries Retrier i already granted and is incremented here.

    Delay n (from 1) = IntervalSeconds (1) x BackoffRate (2.0) ** (n - 1), capped at
    MaxDelaySeconds; JitterStrategy FULL draws uniformly from [0, delay).
    """
    for i, retrier in enumerate(retriers):
        if not matches(retrier.get("ErrorEquals", ()), error):
            continue
        if counts[i] >= retrier.get("MaxAttempts", 3):
            return None
        counts[i] += 1
        delay = float(retrier.get("IntervalSeconds", 1)) * float(retrier.get("BackoffRate", 2.0)) ** (counts[i] - 1)
        if "MaxDelaySeconds" in retrier:
            delay = min(delay, float(retrier["MaxDelaySeconds"]))
        if retrier.get("JitterStrategy") == "FULL":
            delay *= random()
        return delay
    return None
