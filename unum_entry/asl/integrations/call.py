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


def client_config() -> Any:
    """botocore's settings for integration calls. No client-side parameter validation: a null or
    missing member reaches the service, which answers with its own validation error, as on AWS.
    No checksums the SDK would add on its own (their members would show in the result, and AWS
    does not return them)."""
    from botocore.config import Config

    return Config(parameter_validation=False, request_checksum_calculation="when_required",
                  response_checksum_validation="when_required")


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

                self._client = boto3.client(boto_service(self.integration), region_name=region(),
                                            config=client_config())
            return self._client

    def __call__(self, parameters: Any, context: Any = None) -> Any:
        # AWS appends the execution's and the state machine's ARNs to each optimized putEvents entry.
        arns = tuple(a for a in (getattr(context, "execution_arn", ""), getattr(context, "state_machine_arn", ""))
                     if isinstance(a, str) and a)
        return call(self.integration, self.client(), parameters, resources=arns)


def call(integration: Integration, client: Any, parameters: Any, *, resources: tuple[str, ...] = ()) -> Any:
    """One request; the result as Step Functions returns it. `resources`: the ARNs the optimized
    `events:putEvents` appends to every entry's `Resources` (the execution's, the state machine's)."""
    from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

    if parameters is None:
        parameters = {}
    if not isinstance(parameters, Mapping):
        raise TaskFailed("States.Runtime", f"the parameters of {integration.resource} must be an object, "
                                           f"found {type(parameters).__name__}")
    params = _request(integration, dict(parameters), resources)
    operation = _operation(integration, client)
    input_shape = client.meta.service_model.operation_model(_model_name(client, operation)).input_shape
    members = list(input_shape.members) if input_shape is not None else []
    unknown = sorted(set(params) - set(members))
    if unknown:  # a name the API does not have (values are the service's to judge, names are not)
        raise TaskFailed("States.TaskFailed", f"{integration.resource}: invalid parameters: unknown parameter "
                                              f"{unknown[0]!r}; the API takes {', '.join(members) or 'none'}")
    if integration.sdk:
        params = _blobs(input_shape, params)
    try:
        response = getattr(client, operation)(**params)
    except ClientError as exc:
        raise _service_error(integration, client, exc) from exc
    except ParamValidationError as exc:
        raise TaskFailed("States.TaskFailed", f"{integration.resource}: invalid parameters: {exc}") from exc
    except BotoCoreError as exc:  # no connection, no credentials, ...
        raise TaskFailed("States.TaskFailed", f"{integration.resource}: {exc}") from exc
    except (TypeError, ValueError, AttributeError, KeyError) as exc:  # a value botocore cannot serialize
        raise TaskFailed("States.TaskFailed", f"{integration.resource}: invalid parameters: {exc}") from exc
    result = _result(integration, response)
    if (integration.service, integration.action) == ("events", "putEvents") and not integration.sdk \
            and (result.get("FailedEntryCount") or 0) > 0:
        # AWS: the optimized integration fails the Task when any entry failed; the cause is the response
        raise TaskFailed("EventBridge.FailedEntry", _compact(result))
    return result


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


def _request(integration: Integration, params: dict[str, Any], resources: tuple[str, ...] = ()) -> dict[str, Any]:
    """Step Functions' conveniences: a message body or event detail given as JSON is sent as text;
    the optimized putEvents appends `resources` to every entry's `Resources`.
    A null member is a member not set (the Java SDK's null): it is left out of the request, so
    the service reports it missing with its own error."""
    params = _without_nulls(params)
    key = JSON_BODY.get((integration.service, integration.action)) if not integration.sdk else None
    if key is not None and key in params and not isinstance(params[key], str):
        params[key] = _compact(params[key])
    if not integration.sdk and integration.service == "events" and isinstance(params.get("Entries"), list):
        params["Entries"] = [{**e, "Detail": _compact(e["Detail"])} if isinstance(e, Mapping) and "Detail" in e
                             and not isinstance(e["Detail"], str) else e for e in params["Entries"]]
        if resources:
            params["Entries"] = [{**e, "Resources": [*_listed(e.get("Resources")), *resources]}
                                 if isinstance(e, Mapping) else e for e in params["Entries"]]
    return params


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _model_name(client: Any, operation: str) -> str:
    """The API name (`PutObject`) of a boto3 method name (`put_object`)."""
    from botocore import xform_name

    for name in client.meta.service_model.operation_names:
        if xform_name(name) == operation:
            return str(name)
    raise TaskFailed("States.Runtime", f"unknown operation {operation!r}")  # pragma: no cover - _operation found it


def _blobs(shape: Any, value: Any) -> Any:
    """AWS's aws-sdk serialization of blob members: any JSON value is sent as its JSON text (a
    string with its quotes, `{"Dict":"Value"}`, `false`, `0`), walking the request's shapes."""
    if shape is None or value is None:
        return value
    kind = shape.type_name
    if kind == "blob":
        return _compact(value).encode("utf-8")
    if kind == "structure" and isinstance(value, Mapping):
        return {k: _blobs(shape.members.get(k), v) for k, v in value.items()}
    if kind == "list" and isinstance(value, list):
        return [_blobs(shape.member, v) for v in value]
    if kind == "map" and isinstance(value, Mapping):
        return {k: _blobs(shape.value, v) for k, v in value.items()}
    return value


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


# The Java SDK v1 class of an optimized integration's errors that its model does not name
# (a DynamoDB ValidationException is `DynamoDB.AmazonDynamoDBException` on AWS).
GENERIC_V1 = {"DynamoDB": "AmazonDynamoDBException", "SQS": "AmazonSQSException", "SNS": "AmazonSNSException",
              "EventBridge": "AmazonEventBridgeException"}


def _service_error(integration: Integration, client: Any, exc: Any) -> TaskFailed:
    """The service's error as Step Functions names it: `<Service>.<Code>Exception` when the
    service's model declares the error (the SDK has a class for it), else the SDK's generic class
    (`DynamoDB.AmazonDynamoDBException` for the optimized integrations' Java SDK v1,
    `DynamoDb.DynamoDbException` for aws-sdk's v2); the cause in that SDK's wording."""
    error = exc.response.get("Error", {})
    meta = exc.response.get("ResponseMetadata", {})
    raw_code = str(error.get("Code") or "Unknown")
    code = exception_name(raw_code)
    modeled = code.removesuffix("Exception") in _modeled_errors(client) or code in _modeled_errors(client)
    message = str(error.get("Message") or exc)
    status = meta.get("HTTPStatusCode", 400)
    request_id = meta.get("RequestId", "")
    spec = integration.optimized
    if spec is not None:
        cause = (f"{message} (Service: {spec.java_service}; Status Code: {status}; Error Code: {raw_code}; "
                 f"Request ID: {request_id}; Proxy: null)")
        name = code if modeled else GENERIC_V1.get(spec.error_prefix, code)
        return TaskFailed(f"{spec.error_prefix}.{name}", cause)
    prefix = sdk_error_prefix(str(client.meta.service_model.service_id))
    cause = f"{message} (Service: {prefix}, Status Code: {status}, Request ID: {request_id}"
    if prefix == "S3":
        host_id = meta.get("HostId") or meta.get("HTTPHeaders", {}).get("x-amz-id-2") or "null"
        cause += f", Extended Request ID: {host_id}"
    return TaskFailed(f"{prefix}.{code if modeled else prefix + 'Exception'}", cause + ")")


def _modeled_errors(client: Any) -> set[str]:
    """The error shapes the service's model declares (`ConditionalCheckFailedException`, `NoSuchKey`)."""
    return {str(shape.name) for shape in client.meta.service_model.error_shapes}


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
