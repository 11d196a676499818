"""A saga's abort against a stop (issue 45): a `@durable` function runs a step with a compensation
(`ctx.step("debit", …, compensate=refund)`), then `ctx.abort(...)`. The stop — a whole stop, or
only its claim (a stop that died between its two writes, completed later) — lands right before
each store operation of that invocation in turn, and after its last
(tests/support/interleaving_store.py); and the aborting invocation lands right before each store
operation of a stop. Every compensation request the invocation sends is delivered (twice: a
duplicate) until none is left. Over SQLite, the file store and DynamoDB (moto).

Judged by the contract: one ending (FAILED with the abort's error, or STOPPED) for every reader
(tests/support/readers.py); no effect compensated twice; every step whose record committed is
compensated exactly once, whichever ending won (the handler goes on to its abort, which runs the
chain, or the step registering after the stop compensates itself). A stop does not compensate by
itself (as Step Functions' StopExecution does not): a plain step whose effect ran but whose record
the stop refused (the stop landing between the effect and its record) drops the invocation
before the abort, and that effect is not compensated.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.interleaving_store import InterleavingStore
from tests.support.readers import every_reader
from unum_entry import naming
from unum_entry.envelope import Envelope, Frame
from unum_entry.handlers import load_handler
from unum_entry.outcome import WorkflowStatus, claim_result, failure_record, read_outcome, stop_workflow
from unum_entry.platforms.common import RetryPolicy, deliver
from unum_entry.runtime import Runtime
from unum_entry.steps import StepsLayer
from unum_entry.stores import open_store
from unum_entry.stores.base import Store
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.integration

PAY = '''
import os
from unum_entry.steps import durable


def debit(sink):
    with open(os.path.join(sink, "debit"), "a") as f:
        f.write("x")
    return 1


def refund(result, sink):
    with open(os.path.join(sink, "refund"), "a") as f:
        f.write("x")


@durable
def handler(event, ctx):
    ctx.step("debit", debit, event["sink"], compensate=refund)
    ctx.abort("Declined", "the payment was declined")
'''
MAX_DELIVERIES = 50  # compensation requests delivered at most (a bound on the drain)


class Recording:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.sent.append((function, payload))


@pytest.fixture(params=["sqlite", "file", "dynamodb"])
def any_store(request: Any, tmp_path: Path) -> Iterator[tuple[Store, str]]:
    if request.param == "dynamodb":
        name = f"unum-test-{uuid.uuid4().hex[:12]}"
        url = f"dynamodb://{name}?endpoint={request.getfixturevalue('moto_server').endpoint}&create=1"
    else:
        url = str(tmp_path / ("unum.db" if request.param == "sqlite" else "store"))
    opened = open_store(url)
    try:
        yield opened, url
    finally:
        if request.param == "dynamodb":
            opened.client.delete_table(TableName=name)  # type: ignore[attr-defined]
        opened.close()


class Saga:
    """The aborting invocation of workflow `name`, its sink folder, and the drain of what it sends."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        folder = write_workflow(tmp_path / "wf", name="pay", entry="Pay", functions={"Pay": FunctionSource(PAY)}).folder
        from unum_entry.workflow import load_workflow

        self.spec = load_workflow(folder).functions["Pay"]

    def sink(self, workflow: str) -> Path:
        path = self.tmp_path / f"sink-{workflow}"
        path.mkdir(exist_ok=True)
        return path

    def count(self, workflow: str, what: str) -> int:
        path = self.sink(workflow) / what
        return len(path.read_text()) if path.is_file() else 0

    def _deliver(self, store: Store, payload: dict[str, Any], sent: Recording) -> None:
        runtime = Runtime(self.spec.ir, load_handler(self.spec.folder, self.spec.ir.handler, function="Pay"), store,
                          sent, layer=StepsLayer)
        try:
            deliver(runtime, Envelope.from_wire(payload), retry=RetryPolicy())
        finally:
            runtime.close()

    def run(self, store: Store, workflow: str) -> list[tuple[str, dict[str, Any]]]:
        """The aborting invocation, once; returns what it sent (compensation requests)."""
        sent = Recording()
        self._deliver(store, {"unum": 2, "workflow": workflow, "frames": [[0, 1, 0]],
                              "inputs": [{"value": {"sink": str(self.sink(workflow))}}], "start": True}, sent)
        return sent.sent

    def drain(self, store: Store, sent: list[tuple[str, dict[str, Any]]]) -> None:
        """Deliver every request, each twice (a duplicate), and what they send, until none is left."""
        queue, delivered = list(sent), 0
        while queue:
            function, payload = queue.pop(0)
            for _ in range(2):
                more = Recording()
                self._deliver(store, payload, more)
                queue += more.sent
                delivered += 1
                assert delivered < MAX_DELIVERIES, "the compensation chain does not end"


def _stop(store: Store, workflow: str) -> object:
    return stop_workflow(store, workflow)


def _claim(store: Store, workflow: str) -> object:
    """A stop that died after its first write: its claim only."""
    record = {**failure_record("Unum.Stopped", "stopped by request", function="", invocation="", attempts=0),
              "Stopped": True}
    return claim_result(store, workflow, record)


STOPS: dict[str, Callable[[Store, str], object]] = {"stop": _stop, "claim-only": _claim}


@pytest.mark.parametrize("stop", sorted(STOPS))
def test_a_stop_at_every_point_of_a_saga_abort_compensates_each_effect_once(tmp_path, any_store, stop):
    store, url = any_store
    saga = Saga(tmp_path)
    dry = InterleavingStore(store)
    saga.drain(store, saga.run(dry, "wf-dry"))
    assert saga.count("wf-dry", "debit") == saga.count("wf-dry", "refund") == 1
    runs = []
    for at in range(len(dry.ops) + 1):
        name = f"wf-{stop}-{at}"
        wrapped = InterleavingStore(store, lambda inner, name=name: STOPS[stop](inner, name), at)
        sent = saga.run(wrapped, name)
        wrapped.finish()
        stop_workflow(store, name)  # completes a claim-only stop (refused where the abort's failure won)
        saga.drain(store, sent)
        runs.append(name)
    _judge(saga, store, url, runs)


def test_a_saga_abort_at_every_point_of_a_stop_compensates_each_effect_once(tmp_path, any_store):
    store, url = any_store
    saga = Saga(tmp_path)
    dry = InterleavingStore(store)
    assert stop_workflow(dry, "wf-dry")
    runs = []
    for at in range(len(dry.ops) + 1):
        name = f"wf-abort-{at}"
        sent: list[tuple[str, dict[str, Any]]] = []
        wrapped = InterleavingStore(store, lambda inner, name=name, sent=sent: sent.extend(saga.run(inner, name)), at)
        stop_workflow(wrapped, name)
        wrapped.finish()
        saga.drain(store, sent)
        runs.append(name)
    _judge(saga, store, url, runs)


def _judge(saga: Saga, store: Store, url: str, runs: list[str]) -> None:
    with every_reader(store, url) as readers:
        said = readers.one_ending(runs)
    endings = set()
    for name in runs:
        outcome = read_outcome(store, name)
        assert said[name] == str(outcome.status)
        assert outcome.status in (WorkflowStatus.FAILED, WorkflowStatus.STOPPED), (name, outcome)
        if outcome.status is WorkflowStatus.FAILED:
            assert outcome.failure is not None and outcome.failure["Error"] == "Declined", outcome.failure
        debits, refunds = saga.count(name, "debit"), saga.count(name, "refund")
        recorded = store.get(naming.step_key(naming.checkpoint_key(name, "Pay", (Frame(0, 1, 0),)), 0)) is not None
        assert debits <= 1 and refunds == int(recorded) and refunds <= debits, \
            f"{name} ({outcome.status}): debited {debits}, recorded {recorded}, refunded {refunds}"
        endings.add(outcome.status)
    assert endings == {WorkflowStatus.FAILED, WorkflowStatus.STOPPED}, endings
