"""The one delivery policy (`unum_entry.platforms.common.deliver`) every platform applies — the
Lambda and Cloud Run adapters through `run_delivery`, the local platform directly — over a fake
runtime: which outcome each way a delivery can end maps to, and what `run_delivery` answers the
cloud platform for each."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from unum_entry.envelope import Envelope
from unum_entry.errors import EnvelopeError, HandlerFailed, InvokeError, StaleInvocation, StoreError, UnumError
from unum_entry.platforms.common import (DeliveryStatus, LoadedFunction, RetryPolicy, deliver, record_failure,
                                         run_delivery)
from unum_entry.retention import Retention
from unum_entry.runtime import new_workflow

pytestmark = pytest.mark.unit

RETRY = RetryPolicy(base=0.5, cap=3.0)


@dataclass
class FakeIR:
    function: str = "F"
    max_attempts: int = 3


@dataclass
class Report:
    created: bool = True
    invoked: int = 1
    terminal: bool = False


@dataclass
class FakeRuntime:
    """`handle` returns or raises `outcome`; `fail` records its calls and raises `fail_raises`."""

    outcome: Any = field(default_factory=Report)
    fail_raises: BaseException | None = None
    ir: FakeIR = field(default_factory=FakeIR)
    failed: list[tuple[int, UnumError]] = field(default_factory=list)
    retention: Retention = field(default_factory=Retention)  # its clock times a failed attempt (Envelope.failures)

    def handle(self, env: Envelope) -> Any:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    def fail(self, env: Envelope, error: UnumError) -> None:
        self.failed.append((env.attempt, error))
        if self.fail_raises is not None:
            raise self.fail_raises


class RecordingInvoker:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.calls.append((function, payload))


class RecordingStore:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    def delete(self, keys) -> None:
        self.deleted.extend(keys)


def env(attempt: int = 0) -> Envelope:
    return replace(new_workflow("in", "wf-1"), attempt=attempt)


HANDLER_FAILED = HandlerFailed("F", "KeyError", "nope")


def test_handled_is_done_and_a_stale_duplicate_is_dropped() -> None:
    report = Report()
    assert deliver(FakeRuntime(report), env(), retry=RETRY).status is DeliveryStatus.DONE
    assert deliver(FakeRuntime(report), env(), retry=RETRY).report is report
    assert deliver(FakeRuntime(None), env(), retry=RETRY).status is DeliveryStatus.DROPPED
    assert deliver(FakeRuntime(StaleInvocation("gone")), env(), retry=RETRY).status is DeliveryStatus.DROPPED


def test_a_failed_handler_is_retried_with_the_next_attempt_until_max_attempts_then_fails() -> None:
    runtime = FakeRuntime(HANDLER_FAILED)
    first = deliver(runtime, env(0), retry=RETRY)
    assert first.status is DeliveryStatus.RETRY_HANDLER
    assert (first.retry.attempt, first.delay, first.error) == (1, 0.5, HANDLER_FAILED)
    assert deliver(runtime, env(1), retry=RETRY).delay == 1.0
    assert runtime.failed == []
    last = deliver(runtime, env(2), retry=RETRY)
    assert last.status is DeliveryStatus.FAILED and last.error is HANDLER_FAILED
    assert runtime.failed == [(2, HANDLER_FAILED)]


@pytest.mark.parametrize("error", [StoreError("throttled"), InvokeError("rate exceeded"), RuntimeError("a bug")])
def test_transient_errors_and_crashes_are_redelivered_without_failing_the_workflow(error) -> None:
    runtime = FakeRuntime(error)
    outcome = deliver(runtime, env(), retry=RETRY)
    assert outcome.status is DeliveryStatus.REDELIVER and outcome.error is error
    assert runtime.failed == []


def test_a_request_that_does_not_fit_the_ir_fails_at_once() -> None:
    error = EnvelopeError("envelope.inputs: bad")
    runtime = FakeRuntime(error)
    outcome = deliver(runtime, env(), retry=RETRY)
    assert outcome.status is DeliveryStatus.FAILED and runtime.failed == [(0, error)]


@pytest.mark.parametrize("handled", [HANDLER_FAILED, UnumError("output does not fit")])
@pytest.mark.parametrize("fail_raises", [StoreError("throttled"), RuntimeError("a bug")])
def test_a_failure_that_cannot_be_recorded_is_redelivered(handled, fail_raises) -> None:
    runtime = FakeRuntime(handled, fail_raises=fail_raises, ir=FakeIR(max_attempts=1))
    outcome = deliver(runtime, env(), retry=RETRY)
    assert outcome.status is DeliveryStatus.REDELIVER and outcome.error is fail_raises
    assert record_failure(runtime, env(), UnumError("x")).status is DeliveryStatus.REDELIVER


def loaded(runtime: FakeRuntime) -> tuple[LoadedFunction, RecordingInvoker, RecordingStore]:
    invoker, store = RecordingInvoker(), RecordingStore()
    return LoadedFunction(ir=runtime.ir, runtime=runtime, store=store, invoker=invoker), invoker, store  # type: ignore[arg-type]


def test_run_delivery_answers_the_cloud_platform_for_each_outcome() -> None:
    sleeps: list[float] = []
    fn, invoker, store = loaded(FakeRuntime(Report(created=True, invoked=2)))
    assert run_delivery(fn, env(), "stored-1", retry=RETRY, sleep=sleeps.append) == {
        "function": "F", "workflow": "wf-1", "attempt": 0, "committed": True, "invoked": 2, "terminal": False}
    assert store.deleted == ["stored-1"]

    fn, invoker, store = loaded(FakeRuntime(HANDLER_FAILED))
    summary = run_delivery(fn, env(1), "stored-2", retry=RETRY, sleep=sleeps.append)
    assert summary["retrying"] == 2 and sleeps == [1.0]
    ((function, payload),) = invoker.calls
    assert function == "F" and Envelope.from_wire(payload).attempt == 2
    assert store.deleted == ["stored-2"]

    fn, _, _ = loaded(FakeRuntime(None))
    assert run_delivery(fn, env(), None, retry=RETRY, sleep=sleeps.append)["stale"] is True
    fn, _, _ = loaded(FakeRuntime(EnvelopeError("bad")))
    assert run_delivery(fn, env(), None, retry=RETRY, sleep=sleeps.append)["failed"] == "bad"


@pytest.mark.parametrize("runtime", [
    FakeRuntime(StoreError("throttled")),
    FakeRuntime(RuntimeError("a bug")),
    FakeRuntime(HANDLER_FAILED, fail_raises=StoreError("failure record throttled"), ir=FakeIR(max_attempts=1)),
], ids=["store-error", "crash", "fail-raises"])
def test_run_delivery_raises_what_must_be_redelivered_and_keeps_the_stored_envelope(runtime) -> None:
    fn, invoker, store = loaded(runtime)
    with pytest.raises((StoreError, RuntimeError)):
        run_delivery(fn, env(), "stored-1", retry=RETRY, sleep=lambda s: None)
    assert store.deleted == [] and invoker.calls == []


@dataclass
class MutatingRuntime(FakeRuntime):
    """A handler that changes its event in place, then fails (a retryable failure)."""

    def handle(self, env: Envelope) -> Any:
        env.inputs[0].value["seen"].append(env.attempt)
        raise HANDLER_FAILED


def test_a_cloud_retry_gets_the_input_as_delivered_not_as_the_handler_left_it() -> None:
    fn, invoker, _ = loaded(MutatingRuntime())
    delivered = replace(new_workflow({"seen": []}, "wf-m"), deadline=10**10)
    run_delivery(fn, delivered, None, retry=RETRY, sleep=lambda _: None)
    ((_, payload),) = invoker.calls
    retried = Envelope.from_wire(payload)
    assert retried.attempt == 1 and retried.inputs[0].value == {"seen": []}
    assert delivered.inputs[0].value == {"seen": [0]}  # the handler did change its own copy
