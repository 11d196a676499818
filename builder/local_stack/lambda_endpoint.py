"""A local Lambda Invoke endpoint with Lambda's asynchronous semantics, in front of function
containers running the Runtime Interface Emulator (RIE).

The RIE serves one function, synchronously, one request at a time. This endpoint speaks Lambda's
Invoke API (`POST /2015-03-31/functions/NAME/invocations`, so boto3's Lambda client works with
`endpoint_url=`) and adds what Lambda does for `InvocationType=Event`:

- answers 202 at once and delivers in the background, at most one request per container;
- a *function error* (the RIE's 200 with an `errorMessage` body, a non-200, or the connection
  dropping mid-request because the container died) is retried `max_retries` times (Lambda: 2)
  after `delays` (Lambda: about 1 and 2 minutes; tests pass fractions of a second);
- *no capacity* (nothing listens: the container is stopped or starting) is retried with backoff
  without counting as an attempt, until the event is `max_event_age` old (Lambda: throttles and
  system errors are retried for up to 6 hours);
- then the event goes to the function's on-failure destination as Lambda's destination record
  (`requestContext.condition`, `requestPayload`, `responsePayload`), itself an async invoke.

`RequestResponse` invokes are passed through synchronously (with `X-Amz-Function-Error`).
Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import json
import logging
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

from builder.local_stack.http_server import BackgroundHttpServer
from builder.local_stack.lambda_versions import VersionApiError, VersionTable
from builder.local_stack.process import DIRECT_HTTP, LocalStackError, Service

log = logging.getLogger("unum.lambda_endpoint")

ASYNC_PAYLOAD_LIMIT = 256 * 1024
SYNC_PAYLOAD_LIMIT = 6 * 1024 * 1024
_SELF = "<self>"


@dataclass(frozen=True)
class LambdaRetry:
    """Lambda's asynchronous retry behaviour, with delays a test can shrink."""

    max_retries: int = 2
    delays: tuple[float, ...] = (60.0, 120.0)
    unavailable_delay: float = 1.0
    max_event_age: float = 6 * 3600.0
    request_timeout: float = 900.0

    def delay(self, retry: int) -> float:
        return self.delays[min(retry, len(self.delays) - 1)] if self.delays else 0.0


@dataclass
class _Function:
    name: str
    urls: list[str]
    on_failure: str | None
    free: list[str] = field(default_factory=list)
    image: str = ""

    def __post_init__(self) -> None:
        self.free = list(self.urls)


@dataclass(order=True)
class _Event:
    ready_at: float
    seq: int
    function: str = field(compare=False)
    body: bytes = field(compare=False)
    request_id: str = field(compare=False)
    accepted_at: float = field(compare=False)
    retries: int = field(default=0, compare=False)
    is_record: bool = field(default=False, compare=False)  # an on-failure destination record


@dataclass(frozen=True)
class Attempt:
    """One delivery attempt, for tests and logs."""

    function: str
    request_id: str
    outcome: str  # ok | function_error | unavailable | destination | expired
    detail: str = ""


class AsyncInvokeEndpoint(Service):
    """Lambda's Invoke API on a loopback port; a context manager.

    `register(name, urls)` routes a function to its RIE container(s); `wait_idle()` blocks until
    no event is queued or running. `attempts` lists every delivery attempt.
    """

    def __init__(self, *, retry: LambdaRetry = LambdaRetry(), port: int = 0, workers: int = 8,
                 keep_payloads: bool = False) -> None:
        self.retry = retry
        self.stats: Counter[str] = Counter()
        self.attempts: list[Attempt] = []
        self.payloads: list[tuple[str, bytes]] = []  # (function, body) of accepted Event invokes, if kept
        self._keep_payloads = keep_payloads
        self._functions: dict[str, _Function] = {}  # NAME ($LATEST) and NAME:N (published versions)
        self.versions = VersionTable()
        self._draw = random.Random()
        self._queue: list[_Event] = []
        self._seq = itertools.count()
        self._outstanding = 0
        self._running: Counter[str] = Counter()
        self._duplicates: Counter[str] = Counter()
        self._cv = threading.Condition()
        self._stopping = False
        self._port = port
        self._workers_count = workers
        self._server: BackgroundHttpServer | None = None
        self._threads: list[threading.Thread] = []

    # ---- configuration -------------------------------------------------------------------

    def register(self, name: str, urls: str | Sequence[str], *, on_failure: str | None = _SELF,
                 image: str = "") -> None:
        """Route `name` (its `$LATEST`) to RIE invocation URL(s) (one request at a time per URL)
        running `image` (a digest, shown in PublishVersion's configuration). `on_failure` names the
        destination function (default: the function itself; None drops the event). Published
        versions keep the URLs they were published with."""
        url_list = [urls] if isinstance(urls, str) else list(urls)
        with self._cv:
            self._functions[name] = _Function(name, url_list, name if on_failure == _SELF else on_failure,
                                              image=image)
            self._cv.notify_all()

    def version_api(self, method: str, function: str, rest: list[str], body: dict[str, Any]) -> tuple[int, Any]:
        """The version/alias operations under `/2015-03-31/functions/NAME/`: (status, reply).
        Raises VersionApiError."""
        with self._cv:
            latest = self._functions.get(function)
            if latest is None:
                raise VersionApiError(404, "ResourceNotFoundException", f"Function not found: {function}")
            table = self.versions
            if rest == ["versions"] and method == "POST":
                shape = table.publish(function, tuple(latest.urls), latest.image, str(body.get("Description", "")))
                key = f"{function}:{shape['Version']}"
                if key not in self._functions:
                    self._functions[key] = _Function(key, list(latest.urls), latest.on_failure, image=latest.image)
                return 201, shape
            if rest == ["versions"] and method == "GET":
                return 200, table.list_versions(function, tuple(latest.urls), latest.image)
            if rest == ["aliases"] and method == "POST":
                return 201, table.create_alias(function, body)
            if rest == ["aliases"] and method == "GET":
                return 200, table.list_aliases(function)
            if len(rest) == 2 and rest[0] == "aliases":
                name = urllib.parse.unquote(rest[1])
                if method == "GET":
                    return 200, table.alias_shape(function, table.alias(function, name))
                if method == "PUT":
                    return 200, table.update_alias(function, name, body)
                if method == "DELETE":
                    table.delete_alias(function, name)
                    return 204, None
        raise VersionApiError(404, "UnknownOperationException", f"unknown operation {method} {'/'.join(rest)}")

    def route(self, function: str, qualifier: str | None) -> tuple[str, str]:
        """(internal key, executed version) of an invoke of `function[:qualifier]`; an alias with
        weights picks at random per invoke, as Lambda does. Raises VersionApiError."""
        with self._cv:
            if function not in self._functions:
                raise VersionApiError(404, "ResourceNotFoundException", f"Function not found: {function}")
            version = self.versions.resolve(function, qualifier, self._draw.random())
        return (function if version == "$LATEST" else f"{function}:{version}"), version

    def duplicate_next(self, function: str, count: int = 1) -> None:
        """Fault injection: the next `count` Event invokes of `function` are each delivered twice."""
        with self._cv:
            self._duplicates[function] += count

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> Self:
        handler = type("Handler", (_InvokeHandler,), {"owner": self})

        self._server = BackgroundHttpServer(handler, port=self._port, name="lambda-endpoint-http").start()
        self._threads = [threading.Thread(target=self._work, name=f"lambda-endpoint-{i}", daemon=True)
                         for i in range(self._workers_count)]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._server is not None:
            self._server.stop()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads = []

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:PORT`: the `endpoint_url` of boto3's Lambda client."""
        if self._server is None:
            raise LocalStackError("the Invoke endpoint is not started")
        return self._server.url

    def wait_idle(self, timeout: float) -> bool:
        """True once nothing is queued or running; False when `timeout` passed first."""
        with self._cv:
            return self._wait_until(lambda: not self._outstanding, time.monotonic() + timeout, poll=0.1)

    def wait_running(self, function: str, timeout: float) -> bool:
        """True once a delivery to `function` is in flight (for fault tests)."""
        with self._cv:
            return self._wait_until(lambda: bool(self._running[function]), time.monotonic() + timeout, poll=0.05)

    # ---- the Invoke API ------------------------------------------------------------------

    def accept(self, function: str, body: bytes, *, is_record: bool = False) -> str:
        """Queue one Event invoke (the 202 path); returns its request id."""
        request_id = str(uuid.uuid4())
        now = time.monotonic()
        with self._cv:
            copies = 1
            if self._duplicates[function] > 0:
                self._duplicates[function] -= 1
                copies = 2
                self.stats["duplicated"] += 1
            for _ in range(copies):
                heapq.heappush(self._queue, _Event(now, next(self._seq), function, body, request_id, now,
                                                   is_record=is_record))
                self._outstanding += 1
            self.stats["accepted"] += 1
            if self._keep_payloads:
                self.payloads.append((function, body))
            self._cv.notify_all()
        return request_id

    def invoke_sync(self, function: str, body: bytes) -> tuple[int, bytes, bool]:
        """RequestResponse: one delivery now. Returns (status, body, function_error?)."""
        target = self._functions[function]
        url = self._acquire_url(target, deadline=time.monotonic() + self.retry.request_timeout)
        if url is None:
            return 429, json.dumps({"message": f"no free container for {function}"}).encode(), False
        try:
            outcome, response = self._post(url, body)
        finally:
            self._release_url(target, url)
        if outcome == "unavailable":
            return 502, json.dumps({"message": f"function {function} is not reachable: {response!r}"}).encode(), False
        return 200, response, outcome == "function_error"

    def known(self, function: str) -> bool:
        with self._cv:
            return function in self._functions

    # ---- delivery ------------------------------------------------------------------------

    def _take(self) -> tuple[_Event, str] | None:
        """The earliest ready event whose function has a free container, with that container."""
        with self._cv:
            while not self._stopping:
                now = time.monotonic()
                next_ready = now + 0.1
                for event in sorted(self._queue):
                    if event.ready_at > now:
                        next_ready = min(next_ready, event.ready_at)
                        break
                    target = self._functions.get(event.function)
                    if target is None:
                        self._queue.remove(event)
                        heapq.heapify(self._queue)
                        self._outstanding -= 1
                        self._record(Attempt(event.function, event.request_id, "expired", "function not registered"))
                        continue
                    if target.free:
                        self._queue.remove(event)
                        heapq.heapify(self._queue)
                        self._running[event.function] += 1
                        self._cv.notify_all()
                        return event, target.free.pop(0)
                self._cv.wait(max(0.001, min(next_ready - now, 0.1)))
            return None

    def _work(self) -> None:
        while (taken := self._take()) is not None:
            event, url = taken
            try:
                self._deliver(event, url)
            except Exception:  # keep the endpoint alive; the event is lost, loudly
                log.exception("delivery of %s to %s failed", event.request_id, event.function)
            finally:
                with self._cv:
                    self._running[event.function] -= 1
                    target = self._functions.get(event.function)
                    if target is not None and url in target.urls and url not in target.free:  # unless re-registered
                        target.free.append(url)
                    self._outstanding -= 1
                    self._cv.notify_all()

    def _deliver(self, event: _Event, url: str) -> None:
        outcome, response = self._post(url, event.body)
        self.stats[outcome] += 1
        self._record(Attempt(event.function, event.request_id, outcome, response[:200].decode(errors="replace")))
        now = time.monotonic()
        if outcome == "ok":
            return
        if outcome == "unavailable":
            if now - event.accepted_at < self.retry.max_event_age:
                self._requeue(event, self.retry.unavailable_delay, retries=event.retries)
                return
            self._destination(event, "EventAgeExceeded", response)
            return
        if event.retries < self.retry.max_retries:
            self.stats["retries"] += 1
            self._requeue(event, self.retry.delay(event.retries), retries=event.retries + 1)
            return
        self._destination(event, "RetriesExhausted", response)

    def _requeue(self, event: _Event, delay: float, *, retries: int) -> None:
        with self._cv:
            heapq.heappush(self._queue, _Event(time.monotonic() + delay, next(self._seq), event.function, event.body,
                                               event.request_id, event.accepted_at, retries, event.is_record))
            self._outstanding += 1
            self._cv.notify_all()

    def _destination(self, event: _Event, condition: str, response: bytes) -> None:
        target = self._functions.get(event.function)
        destination = target.on_failure if target is not None else None
        if event.is_record:  # a failed destination record is not routed again (no loops)
            destination = None
        self._record(Attempt(event.function, event.request_id, "destination", f"{condition} -> {destination}"))
        if destination is None:
            return
        try:
            payload = json.loads(event.body)
        except ValueError:
            payload = event.body.decode(errors="replace")
        try:
            response_payload = json.loads(response) if response else None
        except ValueError:
            response_payload = {"errorMessage": response.decode(errors="replace"), "errorType": "Runtime.Unknown"}
        record = {
            "version": "1.0",
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "requestContext": {
                "requestId": event.request_id,
                "functionArn": f"arn:aws:lambda:us-east-1:000000000000:function:{event.function}:$LATEST",
                "condition": condition,
                "approximateInvokeCount": event.retries + 1,
            },
            "requestPayload": payload,
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "responsePayload": response_payload,
        }
        self.accept(destination, json.dumps(record).encode(), is_record=True)

    def _post(self, url: str, body: bytes) -> tuple[str, bytes]:
        """One request to a RIE: (ok | function_error | unavailable, response body)."""
        request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
        sent = False
        try:
            with DIRECT_HTTP.open(request, timeout=self.retry.request_timeout) as response:
                sent = True
                data = response.read()
        except urllib.error.HTTPError as exc:
            return "function_error", exc.read() or str(exc).encode()
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ConnectionRefusedError) and not sent:
                return "unavailable", str(reason).encode()
            # The connection dropped mid-request: the execution environment died (a crash).
            return "function_error", json.dumps({"errorMessage": f"{type(reason).__name__}: {reason}",
                                                  "errorType": "Runtime.ExitError"}).encode()
        return ("function_error" if _is_error_body(data) else "ok"), data

    def _acquire_url(self, target: _Function, deadline: float) -> str | None:
        with self._cv:
            self._wait_until(lambda: bool(target.free) or self._stopping, deadline, poll=0.1)
            return target.free.pop(0) if target.free else None

    def _wait_until(self, predicate: Callable[[], bool], deadline: float, *, poll: float) -> bool:
        """With `_cv` held: wait until `predicate()` holds (True) or the monotonic `deadline`
        passes (False). Each wait is at most `poll` seconds: not every change is notified (an
        event dropped in `_take` for want of a function is not)."""
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._cv.wait(min(remaining, poll))
        return True

    def _release_url(self, target: _Function, url: str) -> None:
        with self._cv:
            target.free.append(url)
            self._cv.notify_all()

    def _record(self, attempt: Attempt) -> None:
        with self._cv:
            self.attempts.append(attempt)
        log.info("%s %s: %s %s", attempt.function, attempt.request_id, attempt.outcome, attempt.detail[:120])


def _is_error_body(data: bytes) -> bool:
    try:
        parsed = json.loads(data)
    except ValueError:
        return False
    return isinstance(parsed, dict) and "errorMessage" in parsed and ("errorType" in parsed or len(parsed) <= 3)


def split_function_path(path: str) -> tuple[str, str | None, list[str]] | None:
    """`/2015-03-31/functions/NAME|ARN[:QUALIFIER]/REST...[?Qualifier=Q]` → (NAME, QUALIFIER, REST)."""
    raw, _, query = path.partition("?")
    parts = raw.strip("/").split("/")
    if len(parts) < 4 or parts[0] != "2015-03-31" or parts[1] != "functions":
        return None
    name = urllib.parse.unquote(parts[2])
    qualifier: str | None = None
    if name.startswith("arn:"):
        pieces = name.split(":")
        if len(pieces) < 7:
            return None
        name, qualifier = pieces[6], (pieces[7] if len(pieces) > 7 else None)
    elif ":" in name:
        name, qualifier = name.split(":", 1)
    query_qualifier = urllib.parse.parse_qs(query).get("Qualifier")
    if query_qualifier:
        qualifier = query_qualifier[0]
    return name, qualifier, parts[3:]


def function_name_from_path(path: str) -> str | None:
    """`/2015-03-31/functions/NAME|ARN[:QUALIFIER]/invocations` → NAME."""
    parsed = split_function_path(path)
    return parsed[0] if parsed is not None and parsed[2] == ["invocations"] else None


class _InvokeHandler(BaseHTTPRequestHandler):
    owner: AsyncInvokeEndpoint
    protocol_version = "HTTP/1.1"

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _versions(self, raw: bytes | None = None) -> None:
        """The version and alias API (`self.command`: GET, PUT, DELETE, or a POST not to
        `invocations`, whose body `raw` is already read)."""
        raw = self._body() if raw is None else raw
        parsed = split_function_path(self.path)
        if parsed is None:
            self._error(404, "UnknownOperationException", f"unknown path {self.path}")
            return
        try:
            body = json.loads(raw) if raw else {}
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            self._error(400, "InvalidRequestContentException", f"request body is not a JSON object: {exc}")
            return
        try:
            status, reply = self.owner.version_api(self.command, parsed[0], parsed[2], body)
        except VersionApiError as exc:
            self._error(exc.status, exc.code, exc.message)
            return
        self._reply(status, b"" if reply is None else json.dumps(reply).encode())

    do_GET = do_PUT = do_DELETE = _versions  # (http.server's naming)

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self._body()
        parsed = split_function_path(self.path)
        if parsed is not None and parsed[2] != ["invocations"]:
            self._versions(body)
            return
        if parsed is None:
            self._error(404, "UnknownOperationException", f"unknown path {self.path}")
            return
        try:
            function, executed = self.owner.route(parsed[0], parsed[1])
        except VersionApiError as exc:
            self._error(exc.status, exc.code, exc.message)
            return
        kind = self.headers.get("X-Amz-Invocation-Type", "RequestResponse")
        if kind == "DryRun":
            self._reply(204, b"")
        elif kind == "Event":
            if len(body) > ASYNC_PAYLOAD_LIMIT:
                self._error(413, "RequestEntityTooLargeException",
                            f"{len(body)} byte payload is over the {ASYNC_PAYLOAD_LIMIT} byte async limit")
                return
            request_id = self.owner.accept(function, body)
            self._reply(202, b"", {"x-amzn-RequestId": request_id})
        elif kind == "RequestResponse":
            if len(body) > SYNC_PAYLOAD_LIMIT:
                self._error(413, "RequestEntityTooLargeException", f"{len(body)} byte payload is too large")
                return
            status, data, failed = self.owner.invoke_sync(function, body)
            headers = {"X-Amz-Executed-Version": executed}
            if failed:
                headers["X-Amz-Function-Error"] = "Unhandled"
            self._reply(status, data, headers)
        else:
            self._error(400, "InvalidParameterValueException", f"unknown invocation type {kind!r}")

    def _error(self, status: int, error_type: str, message: str) -> None:
        self._reply(status, json.dumps({"Type": "User", "message": message}).encode(),
                    {"x-amzn-ErrorType": error_type})

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        log.debug(format, *args)
