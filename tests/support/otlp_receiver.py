"""A minimal OTLP/HTTP trace receiver on loopback (what a collector's `otlp` receiver accepts on
`/v1/traces`): it decodes each protobuf export request and keeps the spans, so a test can check
what unum's `UNUM_TRACING=otlp` sent over the wire."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OtlpReceiver:
    """`with OtlpReceiver(port) as receiver: …; receiver.spans` (opentelemetry-proto Span messages)."""

    def __init__(self, port: int = 4318, host: str = "127.0.0.1") -> None:
        self.spans: list[Any] = []
        self.services: set[str] = set()
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                                      ExportTraceServiceResponse)

                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                request = ExportTraceServiceRequest.FromString(body)
                receiver._keep(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    def _keep(self, request: Any) -> None:
        with self._lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                for attribute in resource_spans.resource.attributes:
                    if attribute.key == "service.name":
                        self.services.add(attribute.value.string_value)
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend(scope_spans.spans)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
