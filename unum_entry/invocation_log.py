"""One structured JSON line per invocation, written by the function images (Lambda, Cloud Run).

Lambda sends a function's stdout to CloudWatch Logs and Cloud Run to Cloud Logging; both parse a
line that is a JSON object into fields, so users can query, e.g. in CloudWatch Logs Insights

    filter log = "unum.invocation" and outcome = "failed" | stats count(*) by function

or in Cloud Logging `jsonPayload.log="unum.invocation" AND jsonPayload.outcome="failed"`.
The line (`line()`), keys always present:

    {"log": "unum.invocation", "severity": "INFO", "message": "Hello wf-1 attempt 1: done in 12.3 ms",
     "workflow_id": "wf-1", "function": "Hello", "invocation": "c-…", "attempt": 1,
     "duration_ms": 12.3, "outcome": "done", "error": null}

`attempt` counts from 1 (the failure record's "Attempts"); `outcome` is the delivery policy's
verdict (`DeliveryStatus` value: done, dropped, retry_handler, redeliver, failed); `error` is
`"Type: message"` or null; `severity` (Cloud Logging's key) is INFO, WARNING for a retry or
redelivery, ERROR for a failed workflow. Set `UNUM_INVOCATION_LOG=0` to turn the lines off.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from unum_entry.envelope import Envelope

LOG_NAME = "unum.invocation"
ENV_SWITCH = "UNUM_INVOCATION_LOG"
ERROR_TEXT = 1000  # at most this many characters of the error in a line

_SEVERITY = {"done": "INFO", "dropped": "INFO", "retry_handler": "WARNING", "redeliver": "WARNING",
             "failed": "ERROR"}


@dataclass(frozen=True)
class InvocationRecord:
    """What one delivery of one invocation came to."""

    workflow_id: str
    function: str
    invocation: str          # the invocation's name (its checkpoint key)
    attempt: int             # from 1
    duration_ms: float
    outcome: enum.Enum       # a DeliveryStatus
    error: BaseException | None = None


    @classmethod
    def of(cls, function: str, env: Envelope, outcome: enum.Enum, error: BaseException | None,
           duration_ms: float) -> InvocationRecord:
        """The record of one delivery of `env` to `function`."""
        from unum_entry.naming import checkpoint_key

        return cls(workflow_id=env.workflow, function=function,
                   invocation=checkpoint_key(env.workflow, function, env.frames), attempt=env.attempt + 1,
                   duration_ms=duration_ms, outcome=outcome, error=error)


def line(record: InvocationRecord) -> str:
    """The record as one JSON line (no newline; see the module docstring for the keys)."""
    outcome = str(record.outcome.value)
    error = None if record.error is None else f"{type(record.error).__name__}: {record.error}"[:ERROR_TEXT]
    duration = round(record.duration_ms, 1)
    message = f"{record.function} {record.workflow_id} attempt {record.attempt}: {outcome} in {duration} ms"
    if error is not None:
        message += f" ({error})"
    return json.dumps({"log": LOG_NAME, "severity": _SEVERITY.get(outcome, "INFO"), "message": message,
                       "workflow_id": record.workflow_id, "function": record.function,
                       "invocation": record.invocation, "attempt": record.attempt, "duration_ms": duration,
                       "outcome": outcome, "error": error}, default=str)


@dataclass(frozen=True)
class InvocationLog:
    """Writes `line(record)` to `stream` (default: stdout at the time of writing), unless off."""

    stream: TextIO | None = None
    enabled: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> InvocationLog:
        """On unless `UNUM_INVOCATION_LOG` is 0, false, no or off."""
        raw = environ.get(ENV_SWITCH, "1").strip().lower()
        return cls(enabled=raw not in ("0", "false", "no", "off"))

    def write(self, record: InvocationRecord) -> None:
        """Never raises: a log line must not fail a delivery."""
        if not self.enabled:
            return
        try:
            stream = self.stream if self.stream is not None else sys.stdout
            stream.write(line(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stream loses the line, not the delivery
            pass
