"""A Lambda function URL event in, the Step Functions API's answer out (issue 43's cloud front
door: builder.serve.cloud_entry runs it over the store-backed registry and the invoker-backed
engine).

`answer(event, states)` takes a function URL (payload 2.0) event carrying an AWS JSON 1.0
request (`X-Amz-Target: AWSStepFunctions.<Op>`, a JSON body, possibly base64-encoded) and
returns the function URL response dict (`statusCode`, `headers`, `body`). It checks the request
against botocore's model and renders the result exactly as `serve`'s HTTP server does
(builder.serve.http); every refusal is AWS's error shape with AWS's status, never a traceback.
`AWS_IAM` auth is the URL's job, not this function's.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

from unum_entry.errors import StoreError

from builder.serve.http import JSON_10, TARGET_PREFIX
from builder.serve.wire import ApiError, Service, json_error

log = logging.getLogger("unum.serve")


def _response(status: int, body: bytes) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"Content-Type": JSON_10}, "body": body.decode()}


def _error(error: ApiError) -> dict[str, Any]:
    return _response(error.status, json_error(error))


def answer(event: dict[str, Any], states: Any, service: Service | None = None) -> dict[str, Any]:
    """The function URL response to `event` (module docstring); `states` has `call(op, params)`."""
    service = service or Service("stepfunctions")
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    target = headers.get("x-amz-target", "")
    try:
        method = (event.get("requestContext") or {}).get("http", {}).get("method", "POST")
        if method != "POST":
            raise ApiError("UnknownOperationException", f"the Step Functions API takes POST, not {method}")
        if not target.startswith(TARGET_PREFIX):
            raise ApiError("UnknownOperationException", f"unknown X-Amz-Target {target!r} (expected "
                                                        f"{TARGET_PREFIX}<Operation>)")
        operation = service.operation(target[len(TARGET_PREFIX):])
        raw = event.get("body") or ""
        try:
            body = base64.b64decode(raw) if event.get("isBase64Encoded") else raw.encode()
            params = json.loads(body or b"{}")
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError("SerializationException", f"the request body is not JSON: {exc}") from None
        params = service.check_request(operation, params)
        result = states.call(operation.name, params)
        return _response(200, json.dumps(service.render(operation, result)).encode())
    except ApiError as error:
        return _error(error)
    except StoreError as exc:
        log.warning("api: %s", exc)
        return _error(ApiError("ServiceUnavailable", f"the store is unavailable: {exc}", 503))
    except Exception:  # noqa: BLE001 - a bug must not reach the client as a traceback
        log.exception("api: %s failed", target)
        return _error(ApiError("InternalFailure", "the API failed to answer this request (see its log)", 500))
