"""unum_entry/durable_functions/replay_check.py on folded logs, without a store: the operation
ids it numbers are the SDK's own; the SDK's divergence as one line (names, unnamed operations);
a replay that does not end in time is refused; a handler equal to the log passes."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("aws_durable_execution_sdk_python")

from aws_durable_execution_sdk_python import DurableContext, durable_execution  # noqa: E402
from aws_durable_execution_sdk_python.identifier import OperationIdNamespace  # noqa: E402
from aws_durable_execution_sdk_python.lambda_service import (OperationAction, OperationType,  # noqa: E402
                                                             OperationUpdate)

from unum_entry.durable_functions.replay_check import Execution, _position_id, check, describe  # noqa: E402
from unum_entry.durable_functions.service import fold  # noqa: E402

INVOCATION = "inv-1"


def logged(*steps: tuple[str | None, str]) -> Execution:
    """A log: the execution's start, then each (name, result) as a succeeded step at 1, 2, …"""
    entries: list[dict[str, object]] = [{"t": 1000, "x": {"Input": "{}", "Function": "F", "Invocation": INVOCATION}}]
    for n, (name, result) in enumerate(steps, start=1):
        update = OperationUpdate(operation_id=_position_id(None, n), operation_type=OperationType.STEP,
                                 action=OperationAction.SUCCEED, name=name, sub_type="Step", payload=result)
        entries.append({"t": 1000 + n, "u": [update.to_dict()]})
    return Execution("F", INVOCATION, fold(INVOCATION, entries))


def test_positions_are_the_sdks_operation_ids() -> None:
    for prefix in (None, "abc"):
        for n in (0, 1, 2, 17):
            assert _position_id(prefix, n) == OperationIdNamespace(prefix).create_id_for_step(n)


def test_the_same_operations_pass_and_a_renamed_or_unnamed_one_is_named() -> None:
    @durable_execution
    def same(event: dict, context: DurableContext) -> dict:
        a = context.step(lambda _: 1, name="a")
        return {"a": a, "b": context.step(lambda _: 2, name="b")}

    @durable_execution
    def unnamed(event: dict, context: DurableContext) -> dict:
        context.step(lambda _: 1, name="a")
        return {"b": context.step(lambda _: 2)}

    log = logged(("a", "1"), ("b", "2"))
    assert check(same, log, now_ms=5000) is None
    assert check(unnamed, log, now_ms=5000) == (
        "operation 2 of handler 'F' was step 'b' in the old version, an unnamed step in the new one")
    assert describe("WAIT", "Wait", None) == "an unnamed wait"
    assert describe("CONTEXT", "Map", "lines") == "map 'lines'"


def test_a_replay_that_does_not_end_in_time_is_refused() -> None:
    release = threading.Event()

    @durable_execution
    def stuck(event: dict, context: DurableContext) -> dict:
        release.wait(10)  # outside any operation: the replay runs it
        return {}

    began = time.monotonic()
    try:
        assert check(stuck, logged(("a", "1")), now_ms=5000, timeout=0.3) == (
            "handler 'F' did not finish its replay within 0.3 s (a loop outside its operations?)")
    finally:
        release.set()
    assert time.monotonic() - began < 5
