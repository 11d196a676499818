"""A Map item already invoked when its workflow failed (or was stopped) does not run its handler
where its ingress reads anyway (unum_entry.ingress: the two ending records join that batch read):
by-reference items and lane continuations, redeliveries and retries, and every item of a
function whose IR sets `"ingress_check": true`. A first delivery with its item inline reads
nothing and still runs (no read is added to the fault-free path). Through the Runtime on
DynamoDB over moto's wire protocol, counting the requests the runtime sends."""

from __future__ import annotations

from collections import Counter

import pytest

from unum_entry import naming
from unum_entry.codec import encode
from unum_entry.envelope import Envelope, Frame
from unum_entry.ir import parse_ir
from unum_entry.outcome import stop_workflow
from unum_entry.retention import store_retention
from unum_entry.runtime import Runtime
from unum_entry.stores.base import Kind

pytestmark = pytest.mark.integration

ITEMS = [10, 20, 30, 40]


class Recorder:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def invoke(self, function: str, payload: dict) -> None:
        self.sent.append(function)


@pytest.fixture
def mapped(dynamodb_store):
    """(store, the mapper's checkpoint holding ITEMS, the workflow's deadline, wire request counter)."""
    store = dynamodb_store
    deadline = store_retention(store).deadline()
    source = naming.checkpoint_key("wf-map", "Mapper", (Frame(0, 1, 0),))
    store.create(source, encode(ITEMS), workflow="wf-map", kind=Kind.CHECKPOINT, expires_at=deadline + 3600)
    requests: Counter[str] = Counter()
    store.client.meta.events.register("before-call.dynamodb.*",
                                      lambda model, **_: requests.update([model.name]))
    return store, source, deadline, requests


def item_runtime(store, ran: list, *, ingress_check: bool = False) -> tuple[Runtime, Recorder]:
    ir = parse_ir({"unum_ir": 1, "function": "Item", "handler": "app.handler", "ingress_check": ingress_check,
                   "instructions": [{"op": "invoke", "function": "After"}]})
    invoker = Recorder()

    def handler(event, ctx):
        ran.append(event)
        return event * 2

    return Runtime(ir, handler, store, invoker), invoker


def item(index: int, deadline: int, *, source: str | None = None, **extra) -> Envelope:
    data = {"ref": source, "item": index} if source else {"value": ITEMS[index]}
    return Envelope.from_wire({"unum": 2, "workflow": "wf-map", "frames": [[0, 1, 0], [index, len(ITEMS), 0]],
                               "inputs": [data], "deadline": deadline, **extra})


def test_by_reference_items_stop_at_a_failed_workflow_without_an_extra_request(mapped):
    store, source, deadline, requests = mapped
    ran: list = []
    runtime, invoker = item_runtime(store, ran)
    try:
        requests.clear()
        assert runtime.handle(item(0, deadline, source=source)) is not None  # fault-free: runs
        assert ran == [10] and invoker.sent == ["After"]
        # one read (the item's input, with the ending records in the same batch), one commit
        assert sum(n for op, n in requests.items() if op in ("BatchGetItem", "GetItem", "TransactGetItems")) == 1
        assert sum(n for op, n in requests.items() if op == "PutItem") == 1
        assert stop_workflow(store, "wf-map", error="Ops.Cancelled", cause="test")
        requests.clear()
        assert runtime.handle(item(1, deadline, source=source)) is None  # dropped: the handler never ran
        assert ran == [10] and invoker.sent == ["After"]
        assert requests.get("PutItem", 0) == 0  # nothing committed
        assert store.get(naming.checkpoint_key("wf-map", "Item", (Frame(0, 1, 0), Frame(1, 4, 0)))) is None
        # an item that had committed before the end still continues as a duplicate (no new work)
        assert runtime.handle(item(0, deadline, source=source, redelivered=True)) is not None
        assert ran == [10]
    finally:
        runtime.close()


def test_inline_items_notice_only_when_redelivered_or_asked(mapped):
    from unum_entry.outcome import failure_record, record_failure

    store, _, deadline, _ = mapped
    record_failure(store, "wf-map", failure_record("Boom", "item 3 failed", function="Item", invocation="x",
                                                   attempts=1))
    ran: list = []
    runtime, _ = item_runtime(store, ran)
    checked, _ = item_runtime(store, ran, ingress_check=True)
    try:
        assert runtime.handle(item(1, deadline, redelivered=True)) is None
        assert runtime.handle(item(2, deadline, attempt=1)) is None
        assert checked.handle(item(0, deadline)) is None  # the opt-in: every item reads first
        assert ran == []
        # the documented limit: a first delivery of an inline item reads nothing, so it runs
        assert runtime.handle(item(3, deadline)) is not None and ran == [40]
    finally:
        runtime.close()
        checked.close()
