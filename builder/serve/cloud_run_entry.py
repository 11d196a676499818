"""The Step Functions API as a Cloud Run service (issue 43's cloud front door on Google Cloud):
the same answer as the Lambda function (builder.serve.lambda_entry.answer over the handler
builder.serve.cloud_entry.build_handler wires: StatesApi on the store-backed registry and the
invoker-backed engine), behind a plain WSGI app.

`ApiApp(settings)` is the WSGI callable: an AWS JSON 1.0 POST (`X-Amz-Target:
AWSStepFunctions.<Op>`, a JSON body) in, the Step Functions response out, with AWS's error
shape and status for every refusal (a body over `MAX_BODY_BYTES` is refused before it is read,
413). Authentication is Cloud Run's job (the service is deployed `--no-allow-unauthenticated`):
the app reads no credentials. The store, the invoker and botocore's model are opened on the
first request of each serving process, never at import and never before gunicorn forks (gRPC
channels must not cross a fork); that first build is serialised by a lock held by the app.

`main()` (`python -m builder.serve.cloud_run_entry`): reads the environment of
builder.serve.cloud_entry.ApiSettings (`UNUM_STORE=firestore://…`, `UNUM_INVOKER=pubsub://…`,
`UNUM_WORKFLOW_DIR`) and `HOST` / `PORT` as Cloud Run sets them, checks the workflow folder,
then serves with functions-framework's gunicorn application. A bad configuration is one line
on stderr and exit status 2.
"""

from __future__ import annotations

import base64
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from unum_entry.errors import ConfigurationError, UnumError

from builder.serve.cloud_entry import ApiSettings, Handler

JSON_10 = "application/x-amz-json-1.0"
StartResponse = Callable[..., Any]
log = logging.getLogger("unum.serve")


def _status_line(status: int) -> str:
    from http import HTTPStatus

    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


class ApiApp:
    """The WSGI app answering the Step Functions API over the deployment `settings` names
    (module docstring). `build(settings)` makes the Lambda-shaped handler (default
    builder.serve.cloud_entry.build_handler); it runs once, on the first request."""

    def __init__(self, settings: ApiSettings, build: Callable[[ApiSettings], Handler] | None = None) -> None:
        self.settings = settings
        self._build = build
        self._handler: Handler | None = None
        self._lock = threading.Lock()

    def handler(self) -> Handler:
        """The handler, built on first use (thread-safe)."""
        with self._lock:
            if self._handler is None:
                if self._build is None:
                    from builder.serve.cloud_entry import build_handler

                    self._handler = build_handler(self.settings)
                else:
                    self._handler = self._build(self.settings)
            return self._handler

    def __call__(self, environ: Mapping[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        from builder.serve.wire import MAX_BODY_BYTES, ApiError

        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY_BYTES:
            response = _error(ApiError("RequestEntityTooLargeException", f"the request body is {length} bytes; at "
                                       f"most {MAX_BODY_BYTES} are accepted", 413))
        else:
            body = environ["wsgi.input"].read(length) if length else b""
            event = {"version": "2.0", "headers": _headers(environ), "isBase64Encoded": True,
                     "requestContext": {"http": {"method": environ.get("REQUEST_METHOD", "POST")}},
                     "body": base64.b64encode(body).decode()}
            try:
                response = self.handler()(event, None)
            except UnumError as exc:  # the store or invoker could not be opened
                log.error("api: cannot answer: %s", exc)
                response = _error(ApiError("ServiceUnavailable", f"the API cannot open its store or invoker: {exc}",
                                           503))
        payload = str(response.get("body") or "").encode()
        headers = [(str(k), str(v)) for k, v in (response.get("headers") or {"Content-Type": JSON_10}).items()]
        start_response(_status_line(int(response["statusCode"])), [*headers, ("Content-Length", str(len(payload)))])
        return [payload]


def _error(error: Any) -> dict[str, Any]:
    """A refusal (builder.serve.wire.ApiError) as the handler's response dict, AWS's shape."""
    from builder.serve.wire import json_error

    return {"statusCode": error.status, "headers": {"Content-Type": JSON_10, "x-amzn-ErrorType": error.code},
            "body": json_error(error).decode()}


def _headers(environ: Mapping[str, Any]) -> dict[str, str]:
    """The request's headers, lower-cased, from the WSGI environ."""
    found = {key[5:].replace("_", "-").lower(): str(value) for key, value in environ.items() if key.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        found["content-type"] = str(environ["CONTENT_TYPE"])
    return found


def listen_address(env: Mapping[str, str]) -> tuple[str, int]:
    """(`HOST` default 0.0.0.0, `PORT` default 8080) as Cloud Run sets them; ConfigurationError
    for a port that is not one."""
    raw = env.get("PORT") or "8080"
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigurationError(f"PORT: expected a TCP port number, found {raw!r}")
    return env.get("HOST") or "0.0.0.0", int(raw)


def main() -> int:
    """Check the configuration, then serve until stopped (module docstring)."""
    logging.basicConfig(level=os.environ.get("UNUM_LOG_LEVEL", "INFO"))
    try:
        settings = ApiSettings.from_env(os.environ)
        host, port = listen_address(os.environ)
        from unum_entry.workflow import load_workflow

        load_workflow(settings.workflow_dir)  # fail at start, not on the first request
    except UnumError as exc:
        print(f"unum api: cannot start: {exc}", file=sys.stderr)
        return 2
    from functions_framework._http.gunicorn import GunicornApplication  # type: ignore[import-untyped]  # lazy

    log.info("unum api: serving the Step Functions API on %s:%d", host, port)
    GunicornApplication(ApiApp(settings), host, port, False).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
