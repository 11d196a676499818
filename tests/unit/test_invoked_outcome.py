"""Which outcome an invoked state machine's end gives its durable caller's `context.invoke`
(unum_entry/durable_functions/chained.py), for every order of its ending records as the real
writers leave them in the memory store: a stop's or an execution timeout's claim of the result
record is never read as a result; a stop that died between its two writes is STOPPED; the
deadline watchdog's failure alone answers nothing (a result landing after it wins)."""

from __future__ import annotations

import pytest

from unum_entry.checkpoint import record_result
from unum_entry.durable_functions.chained import _outcome
from unum_entry.envelope import Envelope
from unum_entry.outcome import (TIMEOUT_FIELD, WATCHDOG_FIELD, Ending, claim_result, end_workflow, failure_record,
                                record_failure, stop_workflow)
from unum_entry.retention import store_retention
from unum_entry.stores.memory import MemoryStore

pytestmark = pytest.mark.unit

WF = "wf-caller~0123456789abcdef"


def outcome(store: MemoryStore) -> dict | None:
    return _outcome(*(store.get(key) for key in Ending.of(WF).keys))


def result(store: MemoryStore, value: object) -> None:
    record_result(store, store_retention(store), Envelope(workflow=WF, deadline=0), value)


def test_a_stop_then_the_drained_result_is_stopped():
    store = MemoryStore()
    assert stop_workflow(store, WF)
    result(store, {"n": 24})  # refused by the claim
    assert outcome(store) == {"Status": "STOPPED", "Result": None,
                              "Error": {"ErrorType": "Unum.Stopped", "ErrorMessage": "stopped by request"}}


def test_a_stop_that_died_between_its_writes_is_stopped():
    store = MemoryStore()
    record = failure_record("Ops.Cancel", "why", function="", invocation="", attempts=0)
    assert claim_result(store, WF, {**record, "Stopped": True})
    assert outcome(store)["Status"] == "STOPPED"


def test_an_execution_timeout_is_timed_out():
    store = MemoryStore()
    record = failure_record("States.Timeout", "elapsed", function="A", invocation="t", attempts=1)
    assert end_workflow(store, WF, {**record, TIMEOUT_FIELD: True})
    result(store, 1)
    assert outcome(store)["Status"] == "TIMED_OUT"
    assert outcome(store)["Error"]["ErrorType"] == "States.Timeout"


def test_the_deadline_watchdogs_failure_yields_to_a_later_result():
    store = MemoryStore()
    record = failure_record("Unum.RetentionExpired", "late", function="A", invocation="w", attempts=1)
    assert record_failure(store, WF, {**record, WATCHDOG_FIELD: True})
    assert outcome(store) is None
    result(store, {"n": 24})
    assert outcome(store) == {"Status": "SUCCEEDED", "Result": '{"n": 24}', "Error": None}


def test_a_result_and_a_handlers_failure_both_recorded_fail():
    store = MemoryStore()
    record_failure(store, WF, failure_record("ValueError", "bad", function="A", invocation="i", attempts=3))
    result(store, 1)
    assert outcome(store)["Status"] == "FAILED"
    plain = MemoryStore()
    result(plain, [1, 2])
    assert outcome(plain) == {"Status": "SUCCEEDED", "Result": "[1, 2]", "Error": None}
    assert outcome(MemoryStore()) is None
