"""The failure record (unum_entry.outcome.failure_record) through the real Runtime: it names the
error, cause, function and attempts, and carries the frames of the user's code (`Trace`),
innermost last, bounded, without unum's own frames."""

from __future__ import annotations

import json

import pytest

from unum_entry.errors import HandlerFailed
from unum_entry.ir import parse_ir
from unum_entry.outcome import TRACE_FRAMES, WorkflowStatus, read_outcome
from unum_entry.runtime import Runtime, new_workflow
from unum_entry.handlers import load_handler
from unum_entry.stores.memory import MemoryStore

pytestmark = pytest.mark.unit

APP = """\
def check(order):
    if order["qty"] < 0:
        raise ValueError(f"negative quantity {order['qty']}")
    return order


def deep(n):
    if n == 0:
        raise RuntimeError("bottom")
    return deep(n - 1)


def handler(event, ctx):
    if event.get("deep"):
        return deep(50)
    return check(event)
"""


class Invoker:
    def invoke(self, function, payload):
        raise AssertionError("nothing should be invoked")


def fail_once(tmp_path, event):
    (tmp_path / "app.py").write_text(APP)
    ir = parse_ir({"unum_ir": 1, "function": "Order", "handler": "app.handler", "instructions": []}, source="ir")
    store = MemoryStore()
    runtime = Runtime(ir, load_handler(tmp_path, "app.handler", function="Order"), store, Invoker())
    env = new_workflow(event, "wf-fail")
    with pytest.raises(HandlerFailed) as raised:
        runtime.handle(env)
    runtime.fail(env, raised.value)
    return read_outcome(store, "wf-fail"), tmp_path / "app.py"


def test_the_failure_record_carries_the_users_frames(tmp_path):
    outcome, app = fail_once(tmp_path, {"qty": -1})
    assert outcome.status is WorkflowStatus.FAILED and outcome.status == "failed"
    record = outcome.failure
    assert {k: record[k] for k in ("Error", "Cause", "Function", "Attempts")} == {
        "Error": "ValueError", "Cause": "negative quantity -1", "Function": "Order", "Attempts": 1}
    assert [(f["File"], f["Function"]) for f in record["Trace"]] == [(str(app), "handler"), (str(app), "check")]
    assert record["Trace"][-1]["Line"] == 3
    assert "raise ValueError" in record["Trace"][-1]["Code"]
    json.dumps(record)  # what `inspect` prints


def test_a_deep_trace_keeps_only_the_innermost_frames(tmp_path):
    outcome, _ = fail_once(tmp_path, {"deep": True})
    trace = outcome.failure["Trace"]
    assert len(trace) == TRACE_FRAMES
    assert trace[-1]["Function"] == "deep" and "bottom" in trace[-1]["Code"]
