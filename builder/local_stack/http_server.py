"""An HTTP server on a loopback port, served from a background thread (the local Lambda Invoke
endpoint and the faulty Pub/Sub push proxy are such servers)."""

from __future__ import annotations

import logging
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from builder.local_stack.process import LOOPBACK, LocalStackError, Service

log = logging.getLogger("unum.local_stack")


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients closing keep-alive connections are normal; anything else is logged."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            log.exception("%s: error while serving %s", type(self).__name__, client_address)


class BackgroundHttpServer(Service):
    """`handler` served on 127.0.0.1:`port` (0: a free one) by a daemon thread; a context
    manager. `url` is `http://127.0.0.1:PORT` once started; `stop()` is idempotent."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], *, port: int = 0, name: str = "http-server") -> None:
        self.handler = handler
        self.port = port
        self.name = name
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        if self._server is None:
            self._server = _QuietServer((LOOPBACK, self.port), self.handler)
            self._thread = threading.Thread(target=self._server.serve_forever, name=self.name, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise LocalStackError(f"{self.name} is not started")
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"
