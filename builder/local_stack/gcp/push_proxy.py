"""A Pub/Sub push endpoint that misbehaves the ways Pub/Sub and Cloud Run may (for fault tests)."""

from __future__ import annotations

import collections
import concurrent.futures
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

from builder.local_stack.http_server import BackgroundHttpServer
from builder.local_stack.process import DIRECT_HTTP, Service


class FaultyPushProxy(Service):
    """A push endpoint in front of a function.

    For each message (by `messageId`), its first `fail_first` deliveries answer 500 so Pub/Sub
    redelivers: odd-numbered ones after forwarding (the function did all its work, then the ack
    was lost), even-numbered ones without forwarding (the instance died first). With
    `duplicate`, the next delivery is forwarded twice at once (two instances racing on one
    message). Every later delivery is forwarded as is. `stats` counts what it did.

        with FaultyPushProxy(fns.urls["Shout"], fail_first=2) as proxy:
            pubsub.wire_push({"Shout": proxy.url}, prefix=PREFIX)
    """

    def __init__(self, target: str, *, fail_first: int = 2, duplicate: bool = True) -> None:
        self.target = target.rstrip("/")
        self.fail_first = fail_first
        self.duplicate = duplicate
        self.stats: collections.Counter[str] = collections.Counter()
        self._seen: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._server = BackgroundHttpServer(self._handler(), name="faulty-push-proxy")

    @property
    def url(self) -> str:
        return self._server.url

    def start(self) -> Self:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def deliveries(self, message_id: str) -> int:
        """How many times Pub/Sub has pushed message `message_id` to this proxy so far."""
        with self._lock:
            return self._seen[message_id]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = proxy._deliver(self.path, body, dict(self.headers))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
                return None

        return Handler

    def _deliver(self, path: str, body: bytes, headers: Mapping[str, str]) -> int:
        try:
            message_id = str(json.loads(body)["message"]["messageId"])
        except (ValueError, KeyError, TypeError):
            message_id = "?"
        with self._lock:
            self._seen[message_id] += 1
            n = self._seen[message_id]
            self.stats["deliveries"] += 1
        if n <= self.fail_first:
            if n % 2:
                self._forward(path, body, headers)
                self._count("ack_lost_after_work")
            else:
                self._count("failed_before_work")
            return 500
        if self.duplicate and n == self.fail_first + 1:
            self._count("duplicated")
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                statuses = list(pool.map(lambda _: self._forward(path, body, headers), range(2)))
            return statuses[0]
        return self._forward(path, body, headers)

    def _count(self, what: str) -> None:
        with self._lock:
            self.stats[what] += 1

    def _forward(self, path: str, body: bytes, headers: Mapping[str, str]) -> int:
        wanted = {k: v for k, v in headers.items() if k.lower() == "content-type" or k.lower().startswith("ce-")}
        request = urllib.request.Request(self.target + path, data=body, method="POST", headers=wanted)
        try:
            with DIRECT_HTTP.open(request, timeout=120) as response:
                response.read()
                status: int = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            status = 502
        self._count(f"forwarded_{status}")
        return status
