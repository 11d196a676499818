"""OpenTelemetry across a whole workflow on the embedded engine (unum_entry.tracing): the
runtimes built with `UNUM_TRACING=otel` send their spans to the global tracer provider, here an
SDK provider with the SDK's in-memory exporter; the store is a real SQLite file store. One
workflow is one trace; each delivery's span is the child of the span that sent it (through the
envelope's `trace`), a fan-out's branches are siblings, a retry is a sibling of its first attempt."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from unum_entry.local.platform import local_platform  # noqa: E402
from unum_entry.stores import open_store  # noqa: E402
from unum_entry.workflow import FunctionSource, write_workflow  # noqa: E402

pytestmark = pytest.mark.integration

EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The global provider (set once per process) exporting into EXPORTER; tracing on."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
    assert isinstance(trace.get_tracer_provider(), TracerProvider), "another test set a global provider of its own"
    monkeypatch.setenv("UNUM_TRACING", "otel")
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def fan_out(folder: Path, width: int) -> Any:
    return write_workflow(folder, name="fan", entry="Split", functions={
        "Split": FunctionSource(f"def handler(e, c):\n    return list(range({width}))\n",
                                [{"op": "map", "function": "Work"}]),
        "Work": FunctionSource("def handler(e, c):\n    return e * e\n", [{"op": "fan_in", "function": "Sum"}]),
        "Sum": FunctionSource("def handler(e, c):\n    return sum(e)\n")})


def deliveries(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name and s.kind is trace.SpanKind.CONSUMER]


def children(finished: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in finished if s.parent is not None and s.parent.span_id == parent.context.span_id]


def test_a_fan_out_workflow_is_one_trace_with_its_branches_as_siblings(tmp_path: Path,
                                                                        spans: InMemorySpanExporter) -> None:
    store = open_store(str(tmp_path / "unum.db"))
    with local_platform(fan_out(tmp_path / "wf", 3), store, workers=4) as platform:
        result = platform.run(None, workflow_id="wf-traced", timeout=60)
    assert result.result == 0 + 1 + 4
    finished = spans.get_finished_spans()
    assert len({s.context.trace_id for s in finished}) == 1  # one workflow, one trace

    [split] = deliveries(finished, "Split")
    assert split.parent is None and split.attributes["unum.workflow_id"] == "wf-traced"
    assert sorted(c.name for c in children(finished, split)) == ["egress", "handler", "ingress", "store.create"]
    [split_egress] = [c for c in children(finished, split) if c.name == "egress"]

    work = deliveries(finished, "Work")
    assert len(work) == 3
    assert {w.parent.span_id for w in work} == {split_egress.context.span_id}  # siblings under Split's egress
    assert sorted(w.attributes["unum.fanout.index"] for w in work) == [0, 1, 2]
    for w in work:  # each branch joins the fan-in set inside its egress
        [egress] = [c for c in children(finished, w) if c.name == "egress"]
        assert "store.add_to_set" in {c.name for c in children(finished, egress)}

    [total] = deliveries(finished, "Sum")
    completer = [w for w in work if total.parent.span_id in {c.context.span_id for c in children(finished, w)}]
    assert len(completer) == 1  # Sum's parent: the egress of the branch whose join completed the set
    assert all(s.end_time >= s.start_time for s in finished)


def test_a_retry_stays_in_the_workflows_trace_and_marks_the_error(tmp_path: Path,
                                                                 spans: InMemorySpanExporter) -> None:
    flaky = ("import os\n\ndef handler(e, c):\n    if c.attempt == 0:\n        raise ValueError('first try')\n"
             "    return e\n")
    workflow = write_workflow(tmp_path / "wf", name="retry", entry="A", functions={
        "A": FunctionSource("def handler(e, c):\n    return 1\n", [{"op": "invoke", "function": "B"}]),
        "B": FunctionSource(flaky, (), {"max_attempts": 3})})
    with local_platform(workflow, open_store(str(tmp_path / "unum.db")), workers=2) as platform:
        assert platform.run(None, workflow_id="wf-retry", timeout=60).result == 1
    finished = spans.get_finished_spans()
    assert len({s.context.trace_id for s in finished}) == 1
    [a] = deliveries(finished, "A")
    first, second = sorted(deliveries(finished, "B"), key=lambda s: s.attributes["unum.attempt"])
    assert first.parent.span_id == second.parent.span_id  # both children of A's egress
    assert first.parent.span_id in {c.context.span_id for c in children(finished, a)}
    [failed_handler] = [c for c in children(finished, first) if c.name == "handler"]
    assert failed_handler.status.status_code is trace.StatusCode.ERROR
    assert any(e.name == "exception" for e in failed_handler.events)


def test_off_by_default_the_envelope_carries_no_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UNUM_TRACING", raising=False)
    EXPORTER.clear()
    with local_platform(fan_out(tmp_path / "wf", 2), open_store(str(tmp_path / "unum.db")), workers=2) as platform:
        assert platform.run(None, timeout=60).result == 1
        assert not platform.runtimes["Split"].tracing.enabled
    assert EXPORTER.get_finished_spans() == ()
