"""One structured JSON line per invocation, written by the function images (Lambda, Cloud Run).

Lambda sends a function's stdout to CloudWatch Logs and Cloud Run to Cloud Logging; both parse a
line that is a JSON object into fields, so users can query, e.g. in CloudWatch Logs Insights

    filter log = "unum.invocation" and outcome = "failed" | stats count(*) by function

or in Cloud Logging `jsonPayload.log="unum.invocation" AND jsonPayload.outcome="failed"`.
The line (`line()`), keys always present:

    {"log": "unum.invocation", "severity": "INFO", "message": "Hello wf-1 attempt 1: done in 12.3 ms",
     "workflow_id": "wf-1", "function": "Hello", "invocation": "c-…", "attempt": 1,
     "duration_ms": 12.3, "outcome": "done", "error": null, "error_type": null,
     "request_id": "8f1c…", "state": "Hello", "version": "v0123456789abcdef"}

`attempt` counts from 1 (the failure record's "Attempts"); `outcome` is the delivery policy's
verdict (`DeliveryStatus` value: done, dropped, retry_handler, redeliver, failed); `error` is
`"Type: message"` (the user's when the handler raised) or null; `error_type` the type alone — the user's exception type when the
handler raised (`ValueError`, not `HandlerFailed`), else unum's error class; `request_id` the
platform's id of the request (Lambda's `aws_request_id`, the CloudEvent / Pub/Sub message id)
or null; `state` the Step Functions state a compiled function starts at (its Task, or the
Pass/Map/Parallel/Choice it runs first; from its `unum-asl.json`) or null; `severity` (Cloud Logging's key) is INFO, WARNING for a retry or
redelivery, ERROR for a failed workflow; `version` the version the workflow runs (docs/versions.md:
the pinned version's id on the embedded engine, `UNUM_WORKFLOW_VERSION` in a function image) or
null when unknown. Set `UNUM_INVOCATION_LOG=0` to turn the lines off.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from unum_entry.envelope import Envelope

LOG_NAME = "unum.invocation"
ENV_SWITCH = "UNUM_INVOCATION_LOG"
ENV_VERSION = "UNUM_WORKFLOW_VERSION"  # the version a function image runs, when its deploy set it
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
    request_id: str | None = None   # the platform's id of this request
    state: str | None = None        # the state a compiled function starts at
    version: str | None = None      # the version the workflow runs (builder.versions), if known

    @classmethod
    def of(cls, function: str, env: Envelope, outcome: enum.Enum, error: BaseException | None,
           duration_ms: float, *, request_id: str | None = None, state: str | None = None) -> InvocationRecord:
        """The record of one delivery of `env` to `function`."""
        from unum_entry.naming import checkpoint_key

        return cls(workflow_id=env.workflow, function=function,
                   invocation=checkpoint_key(env.workflow, function, env.frames), attempt=env.attempt + 1,
                   duration_ms=duration_ms, outcome=outcome, error=error, request_id=request_id, state=state)


def line(record: InvocationRecord) -> str:
    """The record as one JSON line (no newline; see the module docstring for the keys)."""
    outcome = str(record.outcome.value)
    error = _error_text(record.error)
    duration = round(record.duration_ms, 1)
    return json.dumps({"log": LOG_NAME, "severity": _SEVERITY.get(outcome, "INFO"), "message": message(record),
                       "workflow_id": record.workflow_id, "function": record.function,
                       "invocation": record.invocation, "attempt": record.attempt, "duration_ms": duration,
                       "outcome": outcome, "error": error, "error_type": error_type(record.error),
                       "request_id": record.request_id, "state": record.state,
                       "version": record.version}, default=str)


def message(record: InvocationRecord) -> str:
    """The line's `message`: `Hello wf-1 attempt 1: done in 12.3 ms` (then `(Type: error)`)."""
    text = (f"{record.function} {record.workflow_id} attempt {record.attempt}: {record.outcome.value} in "
            f"{round(record.duration_ms, 1)} ms")
    error = _error_text(record.error)
    return text if error is None else f"{text} ({error})"


def _error_text(error: BaseException | None) -> str | None:
    """`Type: message`: the user's type and message when the handler raised (HandlerFailed
    carries both), not `HandlerFailed: function 'F' raised …`."""
    if error is None:
        return None
    text = getattr(error, "message", None) if getattr(error, "error_type", None) else None
    return f"{error_type(error)}: {text if isinstance(text, str) else error}"[:ERROR_TEXT]


def error_type(error: BaseException | None) -> str | None:
    """The error's type alone: what the user's handler raised (HandlerFailed carries it), else
    the class of the error."""
    if error is None:
        return None
    return str(getattr(error, "error_type", None) or type(error).__name__)


def hosted_state(function_dir: str | None) -> str | None:
    """The state a compiled state machine's function starts at (`head` of its unum-asl.json:
    its Task, or the Pass/Map/Parallel/Choice state it runs first), or None (a hand-written IR
    function, or no such file)."""
    if not function_dir:
        return None
    import os

    try:
        with open(os.path.join(function_dir, "unum-asl.json"), encoding="utf-8") as handle:
            doc = json.load(handle)
            task = doc.get("head") or doc.get("task")
    except (OSError, ValueError, AttributeError):
        return None
    return task if isinstance(task, str) else None


@dataclass(frozen=True)
class InvocationLog:
    """Writes `line(record)` to `stream` (default: stdout at the time of writing), unless off;
    with `text`, the line's `message` alone (`run -v` on the embedded engine). `version`, when
    set, is the version of every record that names none (one log serves one pinned version)."""

    stream: TextIO | None = None
    enabled: bool = True
    text: bool = False
    version: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> InvocationLog:
        """On unless `UNUM_INVOCATION_LOG` is 0, false, no or off; the version from
        `UNUM_WORKFLOW_VERSION` (none when unset or empty)."""
        raw = environ.get(ENV_SWITCH, "1").strip().lower()
        return cls(enabled=raw not in ("0", "false", "no", "off"), version=environ.get(ENV_VERSION, "").strip() or None)

    def write(self, record: InvocationRecord) -> None:
        """Never raises: a log line must not fail a delivery."""
        if not self.enabled:
            return
        try:
            if record.version is None and self.version is not None:
                record = replace(record, version=self.version)
            stream = self.stream if self.stream is not None else sys.stdout
            stream.write((message(record) if self.text else line(record)) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stream loses the line, not the delivery
            pass
