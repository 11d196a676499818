"""unum_entry.tracing without a workflow around it: the switch, the no-op when off, the
invoker stamping envelopes, and a platform adapter's delivery continuing the sender's trace
(an SDK provider with the in-memory exporter; no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from unum_entry.errors import ConfigurationError
from unum_entry.runtime import new_workflow
from unum_entry.handlers import load_handler
from unum_entry.stores.memory import MemoryStore
from unum_entry.tracing import Tracing, TracedStore, TracingInvoker

pytestmark = pytest.mark.unit

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Recording:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.sent.append((function, payload))

    def invoke_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        self.sent.append((function, payload))


def tracing() -> tuple[Tracing, InMemorySpanExporter]:
    provider, exporter = otel_sdk.TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing.of(provider), exporter


def test_off_unless_switched_on_and_then_nothing_is_wrapped() -> None:
    for environ in ({}, {"UNUM_TRACING": ""}, {"UNUM_TRACING": "off"}, {"UNUM_TRACING": "0"}):
        assert Tracing.from_env(environ) is Tracing.OFF
    store, invoker = MemoryStore(), Recording()
    assert Tracing.OFF.store(store) is store and Tracing.OFF.invoker(invoker) is invoker
    assert Tracing.OFF.span("ingress") is Tracing.OFF.delivery("F", new_workflow(1, "wf-1"))  # one shared no-op
    with pytest.raises(ConfigurationError, match=r"^UNUM_TRACING='xray': expected one of otel, console, otlp or off$"):
        Tracing.from_env({"UNUM_TRACING": "xray"})


def test_the_invoker_stamps_envelopes_sent_inside_a_span_only() -> None:
    on, _ = tracing()
    inner = Recording()
    invoker = on.invoker(inner)
    assert isinstance(invoker, TracingInvoker) and isinstance(on.store(MemoryStore()), TracedStore)
    wire = new_workflow(1, "wf-1").to_wire()
    invoker.invoke("G", wire)  # no current span: nothing to stamp
    with on.delivery("F", new_workflow(1, "wf-1")) as span:
        invoker.invoke("G", wire)
        invoker.invoke_at(0.0, "G", wire, name="m-1")
        invoker.invoke("G", {"raw": "input"})  # not an envelope: left alone
    trace_id, span_id = f"{span.get_span_context().trace_id:032x}", f"{span.get_span_context().span_id:016x}"
    assert "trace" not in inner.sent[0][1] and "trace" not in wire
    assert inner.sent[1][1]["trace"] == inner.sent[2][1]["trace"]
    assert inner.sent[1][1]["trace"].startswith(f"00-{trace_id}-{span_id}-")
    assert inner.sent[3][1] == {"raw": "input"}


def test_a_lambda_delivery_continues_the_senders_trace(tmp_path) -> None:
    from dataclasses import replace

    from unum_entry.envelope import Envelope
    from unum_entry.ir import load_ir
    from unum_entry.platforms.aws_lambda import LambdaAdapter, RetryPolicy
    from unum_entry.platforms.common import LoadedFunction
    from unum_entry.runtime import Runtime
    from unum_entry.workflow import FunctionSource, write_workflow

    workflow = write_workflow(tmp_path / "wf", name="wf", entry="F", functions={
        "F": FunctionSource("def handler(e, c):\n    return e + 1\n", [{"op": "invoke", "function": "G"}]),
        "G": FunctionSource("def handler(e, c):\n    return e\n")})
    folder = workflow.functions["F"].folder
    ir = load_ir(folder / "unum-ir.json")
    on, exporter = tracing()
    store, invoker = MemoryStore(), Recording()
    runtime = Runtime(ir, load_handler(folder, ir.handler, function="F"), store, invoker, tracing=on)
    adapter = LambdaAdapter(LoadedFunction(ir=ir, runtime=runtime, store=store, invoker=invoker),
                            retry=RetryPolicy(base=0.0), sleep=lambda s: None)
    sent = replace(new_workflow(1, "wf-t"), trace=PARENT)
    adapter.handle(sent.to_wire(), type("Context", (), {"aws_request_id": "r-1"})())
    spans = {s.name: s for s in exporter.get_finished_spans()}
    delivery = spans["F"]
    assert f"{delivery.context.trace_id:032x}" == PARENT.split("-")[1]
    assert f"{delivery.parent.span_id:016x}" == PARENT.split("-")[2] and delivery.parent.is_remote
    assert {"ingress", "handler", "egress", "store.create"} <= set(spans)
    [payload] = [p for f, p in invoker.sent if f == "G"]  # (the start also armed its watchdog's timer)
    assert Envelope.from_wire(payload).trace.split("-")[1] == PARENT.split("-")[1]  # the same trace goes on
    assert all(Envelope.from_wire(p).trace for _, p in invoker.sent)
