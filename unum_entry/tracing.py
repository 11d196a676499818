"""OpenTelemetry tracing of workflows (optional: `pip install 'unum[otel]'`; docs/tracing.md).

Off unless `UNUM_TRACING` says otherwise, and then free: `Tracing.OFF` hands out one shared
no-op context manager and wraps nothing, and OpenTelemetry is never imported. On, each delivery
is one span named after its function, with children `ingress`, `handler`, `egress` and one
`store.<operation>` per store call; every invocation it sends carries the W3C `traceparent` of
the sending span in its envelope (`Envelope.trace`), and the receiving delivery's span is that
span's child, so one workflow is one trace across functions and clouds (a fan-out's branches are
siblings under their parent's `egress`; a retry is a sibling of the attempt before it).

`UNUM_TRACING`:
- `otel`: spans go to the global tracer provider, as the host set it up (the ADOT Lambda layer's
  `AWS_LAMBDA_EXEC_WRAPPER=/opt/otel-instrument`, `opentelemetry-instrument`, or your code).
- `console`: an SDK provider printing each span as JSON to stderr (a preview, e.g. under `run`).
- `otlp`: an SDK provider exporting over OTLP/HTTP (`opentelemetry-exporter-otlp-proto-http`) to
  `OTEL_EXPORTER_OTLP_ENDPOINT` (default http://127.0.0.1:4318): an ADOT collector (X-Ray) or an
  OpenTelemetry collector (Cloud Trace). Spans are flushed at the end of each delivery (a Lambda
  instance may be frozen right after it).
- unset, empty, `off`, `0`: no tracing.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ContextManager

from unum_entry.envelope import is_envelope
from unum_entry.errors import ConfigurationError
from unum_entry.stores.base import AppOp, Guard, Kind, Record, SetState, Store, StoreWrapper, Versioned

if TYPE_CHECKING:
    from unum_entry.envelope import Envelope
    from unum_entry.invokers import Invoker

ENV_SWITCH = "UNUM_TRACING"
MODES = ("otel", "console", "otlp")
TRACER_NAME = "unum"
_OFF = contextlib.nullcontext()  # reusable: the whole cost of a span when tracing is off


class Tracing:
    """Spans for one process's runtimes: no-ops unless built with an OpenTelemetry `tracer`.
    `flush` (optional) is called after each delivery (an SDK provider's `force_flush`)."""

    OFF: Tracing  # the shared disabled instance (set below)

    def __init__(self, tracer: Any = None, *, flush: Any = None) -> None:
        self._tracer = tracer
        self._flush = flush

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    @classmethod
    def of(cls, provider: Any) -> Tracing:
        """Tracing to an OpenTelemetry TracerProvider (tests: an SDK provider with an in-memory exporter)."""
        return cls(provider.get_tracer(TRACER_NAME))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Tracing:
        """As `UNUM_TRACING` says (module docstring); one provider per process, built once.
        Raises ConfigurationError for an unknown mode or a mode whose package is missing."""
        raw = (os.environ if environ is None else environ).get(ENV_SWITCH, "").strip().lower()
        if raw in ("", "0", "off", "false", "no"):
            return cls.OFF
        if raw not in MODES:
            raise ConfigurationError(f"{ENV_SWITCH}={raw!r}: expected one of {', '.join(MODES)} or off")
        with _BUILDING:
            if raw not in _BUILT:
                _BUILT[raw] = _build(raw, os.environ if environ is None else environ)
            return _BUILT[raw]

    def delivery(self, function: str, env: Envelope) -> ContextManager[Any]:
        """The span of one delivery of `env` to `function`: a child of the span that sent it
        (`env.trace`), else a new trace (the workflow's start); linked to the span the host made
        current, if any (the ADOT layer's span of the Lambda invocation)."""
        if self._tracer is None:
            return _OFF
        return self._delivery(function, env)

    @contextlib.contextmanager
    def _delivery(self, function: str, env: Envelope) -> Iterator[Any]:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        host = trace.get_current_span().get_span_context()
        parent = TraceContextTextMapPropagator().extract({"traceparent": env.trace}) if env.trace else None
        links = [trace.Link(host)] if host.is_valid and env.trace else []
        top = env.top
        attributes = {"unum.workflow_id": env.workflow, "unum.function": function, "unum.attempt": env.attempt + 1,
                      "unum.fanout.index": top.index, "unum.fanout.size": top.size}
        try:
            with self._tracer.start_as_current_span(function, context=parent, kind=trace.SpanKind.CONSUMER,
                                                    attributes=attributes, links=links) as span:
                yield span
        finally:
            if self._flush is not None:
                self._flush()

    def span(self, name: str, **attributes: Any) -> ContextManager[Any]:
        """A child of the current span (`ingress`, `handler`, `egress`, `store.get`, …)."""
        if self._tracer is None:
            return _OFF
        return self._tracer.start_as_current_span(name, attributes=attributes or None)

    def store(self, store: Store) -> Store:
        """`store`, or when tracing, a wrapper making one span per call."""
        return store if self._tracer is None or isinstance(store, TracedStore) else TracedStore(store, self)

    def invoker(self, invoker: Invoker) -> Invoker:
        """`invoker`, or when tracing, a wrapper putting the current span's traceparent into each
        envelope it sends (invocations and timers)."""
        return invoker if self._tracer is None else TracingInvoker(invoker)


Tracing.OFF = Tracing()
_BUILDING = threading.Lock()
_BUILT: dict[str, Tracing] = {}


def _build(mode: str, environ: Mapping[str, str]) -> Tracing:
    """The Tracing of a mode: the global provider, or an SDK provider of our own."""
    try:
        from opentelemetry import trace
    except ImportError:
        raise ConfigurationError(f"{ENV_SWITCH}={mode} needs OpenTelemetry: pip install 'unum[otel]'") from None
    if mode == "otel":
        return Tracing(trace.get_tracer_provider().get_tracer(TRACER_NAME))
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor
    except ImportError:
        raise ConfigurationError(f"{ENV_SWITCH}={mode} needs the OpenTelemetry SDK: pip install 'unum[otel]'") from None
    service = environ.get("OTEL_SERVICE_NAME") or environ.get("UNUM_FUNCTION_NAME") or "unum"
    provider = TracerProvider(resource=Resource.create({"service.name": service}), id_generator=_time_prefixed_ids())
    if mode == "console":
        import sys

        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(  # one JSON line per span
            out=sys.stderr, formatter=lambda span: span.to_json(indent=None) + "\n")))
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigurationError(f"{ENV_SWITCH}=otlp needs the OTLP exporter: pip install "
                                     "opentelemetry-exporter-otlp-proto-http") from None
        endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or (
            environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318").rstrip("/") + "/v1/traces")
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return Tracing(provider.get_tracer(TRACER_NAME), flush=provider.force_flush)


def _time_prefixed_ids() -> Any:
    """The SDK's random ids, but a trace id starts with its epoch seconds (8 hex digits), as
    X-Ray requires of the traces it accepts; still a valid W3C id (96 random bits) everywhere else."""
    import random
    import time

    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class TimePrefixedIds(RandomIdGenerator):
        def generate_trace_id(self) -> int:
            return (int(time.time()) << 96) | random.getrandbits(96)

    return TimePrefixedIds()


def traceparent() -> str | None:
    """The W3C traceparent of the current span, or None (no valid span)."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


class TracingInvoker:
    """An Invoker that stamps each envelope it sends with the current span's traceparent."""

    def __init__(self, inner: Invoker) -> None:
        self.inner = inner

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.inner.invoke(function, _stamped(payload))

    def invoke_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        self.inner.invoke_at(when, function, _stamped(payload), name=name)

    def __getattr__(self, name: str) -> Any:  # what else the platform's invoker offers (tests, adapters)
        return getattr(self.inner, name)


def _stamped(payload: dict[str, Any]) -> dict[str, Any]:
    if not is_envelope(payload):
        return payload
    parent = traceparent()
    return payload if parent is None else {**payload, "trace": parent}


class TracedStore(StoreWrapper):
    """One span per store call (`store.create`, `store.read`, …), a child of the current span."""

    def __init__(self, inner: Store, tracing: Tracing) -> None:
        super().__init__(inner)
        self._tracing = tracing

    def _span(self, operation: str, key: str | None = None, count: int | None = None) -> ContextManager[Any]:
        attributes: dict[str, Any] = {"db.operation.name": operation, "db.system.name": type(self.inner).__name__}
        if key is not None:
            attributes["unum.store.key"] = key
        if count is not None:
            attributes["unum.store.keys"] = count
        return self._tracing.span(f"store.{operation}", **attributes)

    def create(self, key: str, value: bytes, *, workflow: str, kind: Kind = Kind.CHECKPOINT,
               expires_at: int) -> tuple[bytes, bool]:
        with self._span("create", key):
            return self.inner.create(key, value, workflow=workflow, kind=kind, expires_at=expires_at)

    def get(self, key: str) -> bytes | None:
        with self._span("get", key):
            return self.inner.get(key)

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(keys)
        with self._span("get_many", count=len(keys)):
            return self.inner.get_many(keys)

    def read(self, keys: Iterable[str]) -> dict[str, Record]:
        keys = list(keys)
        with self._span("read", count=len(keys)):
            return self.inner.read(keys)

    def delete(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        with self._span("delete", count=len(keys)):
            self.inner.delete(keys)

    def add_to_set(self, key: str, slot: int, member: str, *, size: int, workflow: str,
                   expires_at: int) -> SetState:
        with self._span("add_to_set", key):
            return self.inner.add_to_set(key, slot, member, size=size, workflow=workflow, expires_at=expires_at)

    def app_read(self, table: str, keys: Iterable[str]) -> dict[str, Versioned]:
        keys = list(keys)
        with self._span("app_read", count=len(keys)):
            return self.inner.app_read(table, keys)

    def transact(self, key: str, value: bytes, ops: Iterable[AppOp], *, workflow: str,
                 kind: Kind = Kind.STEP, guards: Iterable[Guard] = (),
                 expires_at: int) -> tuple[bytes, bool]:
        with self._span("transact", key):
            return self.inner.transact(key, value, ops, workflow=workflow, kind=kind, guards=guards,
                                       expires_at=expires_at)
