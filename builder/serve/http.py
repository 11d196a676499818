"""The HTTP server of `serve`: one loopback port, AWS's protocols on it.

- `POST /` with `X-Amz-Target: AWSStepFunctions.<Op>`: the Step Functions API (AWS JSON 1.0):
  the request checked against botocore's model (builder.serve.wire), answered by
  builder.serve.states_api;
- any other path: the REST routes registered in `ApiServer.routes` (the Lambda API's paths).

Every refusal is AWS's error shape with AWS's status: a malformed body, an unknown target or
path, a bad ARN, a body over `MAX_BODY_BYTES` (refused before it is read). A bug in an
operation is logged and answered `500 InternalFailure` in the same shape, never a traceback to
the client. Requests must be addressed to the loopback name the server listens on (`Host`), so
a web page that rebinds its DNS name to 127.0.0.1 cannot drive it. Signatures are not checked:
the server answers this machine only (docs/api.md).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from unum_entry.errors import StoreError

from builder.serve.wire import MAX_BODY_BYTES, ApiError, Service, json_error

log = logging.getLogger("unum.serve")
HOST = "127.0.0.1"
TARGET_PREFIX = "AWSStepFunctions."
JSON_10 = "application/x-amz-json-1.0"

# A REST route: (method, compiled path pattern, handler(match, query, body) -> (status, body dict)).
RestHandler = Callable[[re.Match[str], dict[str, list[str]], bytes, dict[str, str]], tuple[int, Any, dict[str, str]]]


class ApiServer(ThreadingHTTPServer):
    """The server (module docstring): `states` answers the Step Functions operations."""

    daemon_threads = True

    def __init__(self, states: Any, *, port: int = 8083, host: str = HOST) -> None:
        self.states = states
        self.service = Service("stepfunctions")
        self.routes: list[tuple[str, re.Pattern[str], RestHandler]] = []
        self.allowed_hosts: set[str] = set()
        super().__init__((host, port), _Handler)
        bound = self.server_address[1]
        self.allowed_hosts = {f"{HOST}:{bound}", f"localhost:{bound}"}

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}"

    def add_route(self, method: str, pattern: str, handler: RestHandler) -> None:
        self.routes.append((method, re.compile(pattern), handler))

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            log.exception("serve: error while serving %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    server: ApiServer
    protocol_version = "HTTP/1.1"
    # Headers and body leave in two writes: with Nagle's algorithm on, the body waits for the
    # client's delayed ACK of the headers (~40 ms a request on Linux loopback).
    disable_nagle_algorithm = True
    # A client that stops sending mid-request (fewer bytes than its Content-Length) or idles on a
    # kept-alive connection releases its thread after this many seconds.
    timeout = 60

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("serve: " + format, *args)

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, error: ApiError, *, rest: bool = False) -> None:
        if rest:
            body = json.dumps({"Type": "User" if error.status < 500 else "Service", "message": error.message,
                               "Message": error.message}).encode()
            self._send(error.status, body, "application/json", {"x-amzn-ErrorType": error.code})
        else:
            self._send(error.status, json_error(error), JSON_10, {"x-amzn-ErrorType": error.code})

    def _body(self) -> bytes:
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                self.close_connection = True
                raise ApiError("SerializationException", "chunked request bodies are not accepted: send Content-Length")
            return b""
        try:
            length = int(length_text)
        except ValueError:
            self.close_connection = True
            raise ApiError("SerializationException", f"Content-Length {length_text!r} is not a number") from None
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True  # the body is left unread: this connection cannot be reused
            raise ApiError("RequestEntityTooLargeException",
                           f"the request body is {length} bytes; at most {MAX_BODY_BYTES} are accepted", 413)
        return self.rfile.read(length)

    def _admitted(self) -> bool:
        host = self.headers.get("Host") or ""
        if host in self.server.allowed_hosts:
            return True
        self._error(ApiError("AccessDeniedException", f"unum serve answers {self.server.url} only (Host {host!r})", 403))
        return False

    def _dispatch(self) -> None:
        """Every method's request (`self.command`): Step Functions' by X-Amz-Target, else a REST route."""
        method = self.command
        if not self._admitted():
            return
        target = self.headers.get("X-Amz-Target")
        try:
            body = self._body()
        except ApiError as error:
            self._error(error, rest=target is None and self.path != "/")
            return
        if target is not None or (method == "POST" and self.path == "/"):
            self._states(target or "", body)
            return
        self._rest(method, body)

    do_POST = do_GET = do_PUT = do_DELETE = _dispatch  # BaseHTTPRequestHandler's names

    def _states(self, target: str, body: bytes) -> None:
        try:
            if not target.startswith(TARGET_PREFIX):
                raise ApiError("UnknownOperationException", f"unknown X-Amz-Target {target!r} (expected "
                                                            f"{TARGET_PREFIX}<Operation>)")
            operation = self.server.service.operation(target[len(TARGET_PREFIX):])
            try:
                params = json.loads(body or b"{}")
            except (ValueError, UnicodeDecodeError) as exc:
                raise ApiError("SerializationException", f"the request body is not JSON: {exc}") from None
            params = self.server.service.check_request(operation, params)
            result = self.server.states.call(operation.name, params)
            answer = json.dumps(self.server.service.render(operation, result)).encode()
        except ApiError as error:
            self._error(error)
            return
        except StoreError as exc:
            log.warning("serve: %s", exc)
            self._error(ApiError("ServiceUnavailable", f"the store is unavailable: {exc}", 503))
            return
        except Exception:  # noqa: BLE001 - a bug must not reach the client as a traceback
            log.exception("serve: %s failed", target)
            self._error(ApiError("InternalFailure", "the server failed to answer this request (see its log)", 500))
            return
        self._send(200, answer, JSON_10)

    def _rest(self, method: str, body: bytes) -> None:
        from urllib.parse import parse_qs, unquote, urlsplit

        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parse_qs(parts.query)
        try:
            for route_method, pattern, handler in self.server.routes:
                match = pattern.fullmatch(path)
                if match is not None and route_method == method:
                    status, answer, headers = handler(match, query, body, dict(self.headers))
                    payload = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                    self._send(status, payload, headers.pop("Content-Type", "application/json"), headers)
                    return
            raise ApiError("UnknownOperationException" if method != "GET" or path != "/" else "ResourceNotFoundException",
                           f"no operation at {method} {path} (unum serve: the Step Functions API at POST / with "
                           "X-Amz-Target, the Lambda durable-execution API under /2025-12-01/)", 404)
        except ApiError as error:
            self._error(error, rest=True)
        except StoreError as exc:
            log.warning("serve: %s", exc)
            self._error(ApiError("ServiceException", f"the store is unavailable: {exc}", 503), rest=True)
        except Exception:  # noqa: BLE001 - as in _states
            log.exception("serve: %s %s failed", method, path)
            self._error(ApiError("ServiceException", "the server failed to answer this request (see its log)", 500),
                        rest=True)


def serve_in_thread(server: ApiServer) -> threading.Thread:
    """Serve from a daemon thread (tests, `serve` itself waits on signals in the main thread)."""
    thread = threading.Thread(target=server.serve_forever, name="unum-serve", daemon=True)
    thread.start()
    return thread
