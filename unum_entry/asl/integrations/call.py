"""Making one integration call with boto3, in Step Functions' result and error shapes.

boto3 is imported on the first call, not at import time: it costs ~100 ms of cold start, which a
function without integrations should not pay. Each handler keeps its clients (one per service),
built with the environment's endpoint settings (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_<SERVICE>`:
boto3 reads them) and region (`AWS_REGION`, `AWS_DEFAULT_REGION`, else us-east-1).
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Mapping
from datetime import date, datetime, timezone
from typing import Any

from unum_entry.asl.integrations.resources import Integration, TaskFailed

# Step Functions' aws-sdk service names that differ from boto3's.
SDK_SERVICE_NAMES = {"sfn": "stepfunctions", "eventbridge": "events", "cloudwatchlogs": "logs",
                     "acmpca": "acm-pca", "apigatewayv2": "apigatewayv2", "dynamodbstreams": "dynamodbstreams",
                     "sesv2": "sesv2", "elasticloadbalancingv2": "elbv2", "elasticloadbalancing": "elb"}
JSON_BODY = {("sqs", "sendMessage"): "MessageBody", ("sns", "publish"): "Message"}


def boto_service(integration: Integration) -> str:
    """The boto3 client name of an integration's service."""
    if integration.optimized is not None:
        return integration.optimized.boto_service
    return SDK_SERVICE_NAMES.get(integration.service, integration.service)


def region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


class IntegrationHandler:
    """Calls one integration: `handler(parameters, context) -> result` (raises TaskFailed)."""

    def __init__(self, integration: Integration) -> None:
        self.integration = integration
        self._client: Any = None
        self._lock = threading.Lock()

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                import boto3  # lazy: heavy (ssl, botocore's models); only integration Tasks need it

                self._client = boto3.client(boto_service(self.integration), region_name=region())
            return self._client

    def __call__(self, parameters: Any, context: Any = None) -> Any:
        return call(self.integration, self.client(), parameters)


def call(integration: Integration, client: Any, parameters: Any) -> Any:
    """One request; the result as Step Functions returns it."""
    from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

    if parameters is None:
        parameters = {}
    if not isinstance(parameters, Mapping):
        raise TaskFailed("States.Runtime", f"the parameters of {integration.resource} must be an object, "
                                           f"found {type(parameters).__name__}")
    params = _request(integration, dict(parameters))
    operation = _operation(integration, client)
    try:
        response = getattr(client, operation)(**params)
    except ClientError as exc:
        raise _service_error(integration, client, exc) from exc
    except ParamValidationError as exc:
        raise TaskFailed("States.TaskFailed", f"{integration.resource}: invalid parameters: {exc}") from exc
    except BotoCoreError as exc:  # no connection, no credentials, ...
        raise TaskFailed("States.TaskFailed", f"{integration.resource}: {exc}") from exc
    return _result(integration, response)


def _operation(integration: Integration, client: Any) -> str:
    if integration.optimized is not None:
        return integration.optimized.operation
    from botocore import xform_name

    wanted = integration.action[0].upper() + integration.action[1:]
    names = {name.lower(): name for name in client.meta.service_model.operation_names}
    name = names.get(wanted.lower())
    if name is None:
        raise TaskFailed("States.Runtime", f"{integration.resource}: {integration.service} has no API action "
                                           f"{integration.action!r}")
    return xform_name(name)


def _request(integration: Integration, params: dict[str, Any]) -> dict[str, Any]:
    """Step Functions' conveniences: a message body or event detail given as JSON is sent as text."""
    key = JSON_BODY.get((integration.service, integration.action)) if not integration.sdk else None
    if key is not None and key in params and not isinstance(params[key], str):
        params[key] = _compact(params[key])
    if not integration.sdk and integration.service == "events" and isinstance(params.get("Entries"), list):
        params["Entries"] = [{**e, "Detail": _compact(e["Detail"])} if isinstance(e, Mapping) and "Detail" in e
                             and not isinstance(e["Detail"], str) else e for e in params["Entries"]]
    return params


def _result(integration: Integration, response: Mapping[str, Any]) -> dict[str, Any]:
    meta = response.get("ResponseMetadata", {})
    result = {k: to_json(v) for k, v in response.items() if k != "ResponseMetadata"}
    spec = integration.optimized
    if spec is not None and spec.sdk_metadata:
        headers = dict(meta.get("HTTPHeaders", {}))
        result["SdkHttpMetadata"] = {"AllHttpHeaders": {k: [v] for k, v in headers.items()}, "HttpHeaders": headers,
                                     "HttpStatusCode": meta.get("HTTPStatusCode", 200)}
        result["SdkResponseMetadata"] = {"RequestId": meta.get("RequestId", "")}
    return result


def _service_error(integration: Integration, client: Any, exc: Any) -> TaskFailed:
    error = exc.response.get("Error", {})
    meta = exc.response.get("ResponseMetadata", {})
    code = exception_name(str(error.get("Code") or "Unknown"))
    message = str(error.get("Message") or exc)
    status = meta.get("HTTPStatusCode", 400)
    request_id = meta.get("RequestId", "")
    spec = integration.optimized
    if spec is not None:
        cause = (f"{message} (Service: {spec.java_service}; Status Code: {status}; Error Code: {error.get('Code')}; "
                 f"Request ID: {request_id}; Proxy: null)")
        return TaskFailed(f"{spec.error_prefix}.{code}", cause)
    service_id = client.meta.service_model.service_id
    cause = f"{message} (Service: {str(service_id).replace(' ', '')}, Status Code: {status}, Request ID: {request_id})"
    return TaskFailed(f"{sdk_error_prefix(str(service_id))}.{code}", cause)


def exception_name(code: str) -> str:
    """AWS's error code as Step Functions names it: the `Exception` suffix always present
    (`NoSuchKey` -> `NoSuchKeyException`); SQS's legacy `AWS.SimpleQueueService.X` codes by
    their exception names."""
    legacy = {"AWS.SimpleQueueService.NonExistentQueue": "QueueDoesNotExist"}
    code = legacy.get(code, code)
    if code.startswith("AWS.SimpleQueueService."):
        code = code.rsplit(".", 1)[1]
    return code if code.endswith("Exception") else f"{code}Exception"


def sdk_error_prefix(service_id: str) -> str:
    """The service part of an aws-sdk error name: the service id in the Java SDK v2's
    PascalCase (`DynamoDB` -> `DynamoDb`, `ACM PCA` -> `AcmPca`, `S3` -> `S3`)."""
    import re

    words: list[str] = []
    for token in re.split(r"[^A-Za-z0-9]+", service_id):
        words.extend(re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+|[0-9]+", token))
    return "".join(w[:1].upper() + w[1:].lower() for w in words)


def to_json(value: Any) -> Any:
    """A boto3 value as JSON data: timestamps as ISO-8601 (UTC, `Z`), blobs as base64, streamed
    bodies as their text (base64 when not UTF-8)."""
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if hasattr(value, "read") and callable(value.read):  # botocore StreamingBody
        value = value.read()
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(bytes(value)).decode()
    return value


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
