"""A local Lambda function URL (`AuthType: AWS_IAM`) in front of a function behind the local
Invoke endpoint: what `deploy --api`'s `AWS::Lambda::Url` does, on 127.0.0.1.

Each HTTP request becomes a function URL event (payload format 2.0: `headers` lower-cased,
`requestContext.http.method` and `path`, the body base64-encoded) delivered by a synchronous
`Invoke` (`RequestResponse`); the function's answer (`statusCode`, `headers`, `body`) is the
HTTP response. As AWS_IAM auth requires, a request must be SigV4-signed for the service
`lambda` (its `Authorization` credential scope ends `/lambda/aws4_request`); anything else is
403 `AccessDeniedException`. The signature itself is not verified (no secret is known here).
"""

from __future__ import annotations

import base64
import json
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

from builder.local_stack.http_server import BackgroundHttpServer
from builder.local_stack.process import Service

MAX_BODY = 6 * 1024 * 1024  # Lambda's synchronous payload limit
SCOPE = "/lambda/aws4_request"


class FunctionUrl(Service):
    """A function URL for `function`, invoked through `lambda_client` (a boto3 Lambda client of
    the local endpoint); `url` once started; a context manager."""

    def __init__(self, lambda_client: Any, function: str) -> None:
        self.client = lambda_client
        self.function = function
        self._server: BackgroundHttpServer | None = None

    def start(self) -> Self:
        handler = type("Handler", (_UrlHandler,), {"owner": self})
        self._server = BackgroundHttpServer(handler, name="function-url").start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the function URL is not started")
        return self._server.url

    def event(self, method: str, path: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
        """The payload 2.0 event Lambda builds for this request."""
        return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "",
                "headers": {k.lower(): v for k, v in headers.items()},
                "requestContext": {"http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                                            "sourceIp": "127.0.0.1"}},
                "body": base64.b64encode(body).decode(), "isBase64Encoded": True}

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) of one request (module docstring)."""
        authorization = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        if SCOPE not in authorization:
            message = json.dumps({"Message": "Forbidden. For troubleshooting Function URL authorization issues, "
                                             "see: https://docs.aws.amazon.com/lambda/latest/dg/urls-auth.html"})
            return 403, {"Content-Type": "application/json", "x-amzn-ErrorType": "AccessDeniedException"}, \
                message.encode()
        response = self.client.invoke(FunctionName=self.function, InvocationType="RequestResponse",
                                      Payload=json.dumps(self.event(method, path, headers, body)).encode())
        payload = json.loads(response["Payload"].read() or b"{}")
        if response.get("FunctionError") or not isinstance(payload, dict) or "statusCode" not in payload:
            return 502, {"Content-Type": "application/json"}, json.dumps({"Message": "Internal Server Error"}).encode()
        raw = payload.get("body") or ""
        data = base64.b64decode(raw) if payload.get("isBase64Encoded") else raw.encode()
        return int(payload["statusCode"]), {str(k): str(v) for k, v in (payload.get("headers") or {}).items()}, data


class _UrlHandler(BaseHTTPRequestHandler):
    owner: FunctionUrl
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.send_response(413)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.rfile.read(length) if length else b""
        status, headers, data = self.owner.answer(self.command, self.path, dict(self.headers.items()), body)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = _serve
    do_GET = _serve
