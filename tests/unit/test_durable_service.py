"""What a durable execution's log means (unum_entry.durable_functions.service): the service's transitions,
time-derived states, and the first-outcome-wins rule; callback ids; handler detection."""

from __future__ import annotations

import pytest
from aws_durable_execution_sdk_python import durable_execution
from aws_durable_execution_sdk_python.identifier import OperationIdentifier
from aws_durable_execution_sdk_python.lambda_service import (CallbackOptions, ErrorObject, OperationStatus,
                                                             OperationType, OperationUpdate, WaitOptions)

from unum_entry import naming
from unum_entry.durable_functions import is_durable_handler
from unum_entry.durable_functions.callbacks import CallbackRef, InvalidCallbackId
from unum_entry.durable_functions.service import Conflict, admit, fold, view, wake_times

pytestmark = pytest.mark.unit

EXEC = "c-" + "0" * 32
META = {"Input": "{}", "Workflow": "wf-1", "Function": "F", "Invocation": EXEC, "Frames": [[0, 1, 0]]}


def ident(op: str) -> OperationIdentifier:
    return OperationIdentifier(operation_id=op, parent_id=None, name=op, sub_type=None, operation_type=OperationType.STEP)


def entry(t: int, *updates: OperationUpdate, nonce: str | None = None) -> dict:
    raws = []
    for u in updates:
        raw = dict(u.to_dict())
        if nonce:
            raw["Nonce"] = nonce
        raws.append(raw)
    return {"t": t, "u": raws}


def test_a_step_succeeds_once_and_a_second_outcome_is_a_conflict() -> None:
    state = fold(EXEC, [{"t": 0, "x": META},
                        entry(1, OperationUpdate.create_step_start(ident("s")),
                              OperationUpdate.create_step_succeed(ident("s"), '"one"'))])
    op = state.ops["s"]
    assert op.status is OperationStatus.SUCCEEDED and op.step_details.result == '"one"'
    assert op.step_details.attempt == 1
    ops = view(state, 2)
    assert admit(ops, OperationUpdate.create_step_start(ident("s"))) is False  # a repeat: dropped
    with pytest.raises(Conflict):
        admit(ops, OperationUpdate.create_step_succeed(ident("s"), '"two"'))
    assert state.ops[EXEC].execution_details.input_payload == "{}"


def test_a_retry_is_pending_until_its_time_then_ready_and_may_start_again() -> None:
    retry = OperationUpdate.create_step_retry(ident("s"), ErrorObject.from_message("boom"), 2)
    state = fold(EXEC, [{"t": 0, "x": META}, entry(1000, OperationUpdate.create_step_start(ident("s")), retry)])
    assert view(state, 2999)["s"].status is OperationStatus.PENDING
    assert wake_times(state, 2999) == [3000]
    ops = view(state, 3000)
    assert ops["s"].status is OperationStatus.READY and wake_times(state, 3000) == []
    assert admit(ops, OperationUpdate.create_step_start(ident("s"))) is True
    with pytest.raises(Conflict):  # an outcome of the attempt that already failed
        admit(view(state, 2999), OperationUpdate.create_step_succeed(ident("s"), "1"))


def test_a_wait_ends_by_the_clock_and_a_callback_gets_an_id_from_the_winning_nonce() -> None:
    wait = OperationUpdate.create_wait_start(ident("w"), WaitOptions(wait_seconds=5))
    callback = OperationUpdate.create_callback(ident("c"), CallbackOptions(timeout_seconds=10))
    state = fold(EXEC, [{"t": 0, "x": META}, entry(1000, wait), entry(1000, callback, nonce="n0nce")])
    assert view(state, 5999)["w"].status is OperationStatus.STARTED
    assert view(state, 6000)["w"].status is OperationStatus.SUCCEEDED
    assert sorted(wake_times(state, 0)) == [6000, 11000]
    ref = CallbackRef.parse(state.ops["c"].callback_details.callback_id)
    assert (ref.workflow, ref.function, ref.invocation, ref.operation_id, ref.nonce) == ("wf-1", "F", EXEC, "c", "n0nce")
    state.apply({"t": 2000, "c": [{"Id": "c", "Status": "SUCCEEDED", "Result": '"ok"', "Error": None}]})
    state.apply({"t": 3000, "c": [{"Id": "c", "Status": "TIMED_OUT", "Result": None, "Error": None}]})
    assert state.ops["c"].status is OperationStatus.SUCCEEDED  # the first completion in the log wins
    assert state.ops["c"].callback_details.result == '"ok"'


@pytest.mark.parametrize("text", ["", "unumcb1.", "unumcb1.!!!", "unum1.abc", 42])
def test_malformed_callback_ids_are_refused(text) -> None:
    with pytest.raises(InvalidCallbackId):
        CallbackRef.parse(text)


def test_durable_handlers_are_recognised_without_importing_more() -> None:
    @durable_execution
    def handler(event, context):
        return event

    def plain(event, context):
        return event

    assert is_durable_handler(handler) and not is_durable_handler(plain)


def test_log_keys_are_fixed_length_and_distinct() -> None:
    keys = {naming.durable_log_key(EXEC, n) for n in range(100)}
    assert len(keys) == 100 and all(k.startswith("d-") and len(k) == 34 for k in keys)


def test_heartbeats_move_a_callbacks_heartbeat_deadline_but_not_its_timeout() -> None:
    from unum_entry.durable_functions.service import callback_due

    callback = OperationUpdate.create_callback(ident("c"), CallbackOptions(timeout_seconds=60,
                                                                           heartbeat_timeout_seconds=2))
    state = fold(EXEC, [{"t": 0, "x": META}, entry(1000, callback, nonce="n")])
    assert callback_due(state, "c") == (3000, "Callback.Heartbeat")
    state.apply({"t": 2500, "h": ["c"]})
    assert callback_due(state, "c") == (4500, "Callback.Heartbeat")
    assert wake_times(state, 2600) == [4500]
    state.apply({"t": 4000, "c": [{"Id": "c", "Status": "SUCCEEDED", "Result": None, "Error": None}]})
    state.apply({"t": 4100, "h": ["c"]})  # a heartbeat after the outcome changes nothing
    assert state.heartbeats["c"] == 2500 and wake_times(state, 4200) == []


def test_loading_the_adapter_leaves_unum_entry_durable_the_steps_decorator() -> None:
    import unum_entry
    import unum_entry.durable_functions.adapter  # noqa: F401 (what load_handler imports)
    from unum_entry.steps.api import durable

    assert unum_entry.durable is durable
