"""The structured line a function image logs per delivery (unum_entry/invocation_log.py)."""

from __future__ import annotations

import io
import json

import pytest

from unum_entry.invocation_log import InvocationLog, InvocationRecord, line
from unum_entry.naming import checkpoint_key
from unum_entry.platforms.common import DeliveryStatus
from unum_entry.runtime import new_workflow

pytestmark = pytest.mark.unit

KEYS = {"log", "severity", "message", "workflow_id", "function", "invocation", "attempt", "duration_ms", "outcome", "error",
        "error_type", "request_id", "state", "version"}


def test_a_done_delivery() -> None:
    env = new_workflow({"x": 1}, "wf-7")
    shown = json.loads(line(InvocationRecord.of("Hello", env, DeliveryStatus.DONE, None, 12.345)))
    assert set(shown) == KEYS
    assert shown == {"log": "unum.invocation", "severity": "INFO", "message": "Hello wf-7 attempt 1: done in 12.3 ms",
                     "workflow_id": "wf-7", "function": "Hello", "invocation": checkpoint_key("wf-7", "Hello", env.frames),
                     "attempt": 1, "duration_ms": 12.3, "outcome": "done", "error": None, "error_type": None,
                     "request_id": None, "state": None, "version": None}


def test_a_failed_delivery_names_its_error_and_is_an_error() -> None:
    env = new_workflow(None, "wf-8").next_attempt().next_attempt()
    shown = json.loads(line(InvocationRecord.of("A", env, DeliveryStatus.FAILED, KeyError("k"), 3.0)))
    assert shown["attempt"] == 3 and shown["outcome"] == "failed" and shown["severity"] == "ERROR"
    assert shown["error"] == "KeyError: 'k'" and shown["error_type"] == "KeyError"


def test_a_handler_failure_names_the_users_error_type_and_the_request_and_state() -> None:
    from unum_entry.errors import HandlerFailed

    failed = HandlerFailed("Price", "ValueError", "no price for 'pen'")
    shown = json.loads(line(InvocationRecord.of("Price", new_workflow(None, "wf-9"), DeliveryStatus.FAILED, failed, 2.0,
                                                request_id="req-1", state="Price")))
    assert (shown["error_type"], shown["request_id"], shown["state"]) == ("ValueError", "req-1", "Price")



def test_one_line_per_write_and_a_switch() -> None:
    stream = io.StringIO()
    record = InvocationRecord.of("A", new_workflow(None, "wf-9"), DeliveryStatus.RETRY_HANDLER, ValueError("a\nb"), 1.0)
    InvocationLog(stream=stream).write(record)
    InvocationLog(stream=stream).write(record)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["severity"] == "WARNING"
    off = io.StringIO()
    InvocationLog(stream=off, enabled=InvocationLog.from_env({"UNUM_INVOCATION_LOG": "0"}).enabled).write(record)
    assert off.getvalue() == ""
    assert InvocationLog.from_env({"UNUM_INVOCATION_LOG": "off"}).enabled is False
    assert InvocationLog.from_env({}).enabled is True
