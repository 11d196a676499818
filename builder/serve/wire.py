"""AWS's wire protocols, read off botocore's service models rather than written out by hand.

- `ApiError`: every refusal, with AWS's error code, message and HTTP status. `json_error` is its
  AWS JSON 1.0 body (`{"__type": CODE, "message": ...}`, which botocore and the AWS CLI turn
  into `ClientError` / "An error occurred (CODE) when calling the OP operation: ...");
  `rest_error_headers` its REST-JSON form (the `x-amzn-ErrorType` header of the Lambda API).
- `Service`: one service's model (`stepfunctions`, `lambda`): which operations exist, a
  request's members checked against the operation's input shape (required members, types,
  lengths, ranges, enums: the one-line messages AWS's front end gives, `ValidationException`
  and `SerializationException`), and an answer rendered for its output shape (None members left
  out; timestamps as epoch seconds, AWS JSON's encoding, or ISO 8601 where the shape says so).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from functools import cached_property
from typing import Any

from unum_entry.errors import UnumError

MAX_BODY_BYTES = 1 << 20  # a request body larger than this is refused before it is read whole


class ApiError(UnumError):
    """A request AWS would refuse: `code` (e.g. `ExecutionDoesNotExist`), `message`, `status`."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status


def validation_error(message: str) -> ApiError:
    return ApiError("ValidationException", message)


def json_error(error: ApiError) -> bytes:
    """`error` as an AWS JSON 1.0 body."""
    return json.dumps({"__type": error.code, "message": error.message}).encode()


def rest_error_headers(error: ApiError) -> dict[str, str]:
    """The headers of `error` in the REST-JSON protocol (the body is `{"Type", "message"}`)."""
    return {"x-amzn-ErrorType": error.code}


def epoch(when: float | dt.datetime | None) -> float | None:
    """An instant as AWS JSON's timestamp: epoch seconds, milliseconds kept."""
    if when is None:
        return None
    if isinstance(when, dt.datetime):
        return round(when.timestamp(), 3)
    return round(float(when), 3)


class Service:
    """One AWS service's model as botocore ships it (loaded on first use: botocore's loader reads
    a large JSON file)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @cached_property
    def model(self) -> Any:
        import botocore.session

        return botocore.session.get_session().get_service_model(self.name)

    def operation(self, name: str) -> Any:
        """The operation's model; UnknownOperationException for one the service does not have."""
        if name not in self.model.operation_names:
            raise ApiError("UnknownOperationException", f"the {self.name} API has no operation {name!r}")
        return self.model.operation_model(name)

    def check_request(self, operation: Any, params: Any) -> dict[str, Any]:
        """`params` checked against the operation's input shape (module docstring); returns them."""
        if not isinstance(params, dict):
            raise ApiError("SerializationException", "the request body must be a JSON object")
        shape = operation.input_shape
        if shape is None:
            return params
        problems: list[str] = []
        _check_structure(shape, params, "", problems)
        if problems:
            count = len(problems)
            raise validation_error(f"{count} validation error{'s' if count > 1 else ''} detected: " + "; ".join(problems))
        return params

    def render(self, operation: Any, result: Mapping[str, Any]) -> dict[str, Any]:
        """`result` as the operation's output shape: members it does not have and None values
        left out, timestamps encoded (module docstring)."""
        shape = operation.output_shape
        return _render(shape, result) if shape is not None else {}


def _check_structure(shape: Any, value: Any, where: str, problems: list[str]) -> None:
    for name in shape.required_members:
        if value.get(name) is None:
            problems.append(f"Value null at '{_at(where, name)}' failed to satisfy constraint: Member must not be null")
    for name, member in shape.members.items():
        if name in value and value[name] is not None:
            _check(member, value[name], _at(where, name), problems)


def _at(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "long": (int,), "boolean": (bool,), "double": (int, float),
    "float": (int, float), "list": (list,), "map": (dict,), "structure": (dict,), "timestamp": (int, float, str),
    "blob": (str,),
}


def _check(shape: Any, given: Any, where: str, problems: list[str]) -> None:
    kind = shape.type_name
    expected = _PYTHON_TYPES.get(kind, (object,))
    if not isinstance(given, expected) or (kind in ("integer", "long") and isinstance(given, bool)):
        raise ApiError("SerializationException", f"{where}: expected a {kind}, found {type(given).__name__}")
    value: Any = given  # (isinstance against a tuple of types narrows to object)
    meta = shape.metadata
    if kind == "string":
        enum = getattr(shape, "enum", None)
        if enum and value not in enum:
            problems.append(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must satisfy enum "
                            f"value set: [{', '.join(enum)}]")
    if kind in ("string", "list", "map", "blob"):
        if "min" in meta and len(value) < meta["min"]:
            problems.append(f"Value at '{where}' failed to satisfy constraint: Member must have length greater "
                            f"than or equal to {meta['min']}")
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"Value at '{where}' failed to satisfy constraint: Member must have length less "
                            f"than or equal to {meta['max']}")
    if kind in ("integer", "long"):
        if "min" in meta and value < meta["min"]:
            problems.append(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have value "
                            f"greater than or equal to {meta['min']}")
        if "max" in meta and value > meta["max"]:
            problems.append(f"Value '{value}' at '{where}' failed to satisfy constraint: Member must have value "
                            f"less than or equal to {meta['max']}")
    if kind == "structure":
        _check_structure(shape, value, where, problems)
    elif kind == "list":
        for i, item in enumerate(value):
            _check(shape.member, item, f"{where}.{i + 1}.member", problems)
    elif kind == "map":
        for key, item in value.items():
            _check(shape.value, item, f"{where}.{key}", problems)


def _render(shape: Any, value: Any) -> Any:
    if value is None:
        return None
    kind = shape.type_name
    if kind == "structure":
        out: dict[str, Any] = {}
        for name, member in shape.members.items():
            if name in value and value[name] is not None:
                out[name] = _render(member, value[name])
        return out
    if kind == "list":
        return [_render(shape.member, item) for item in value]
    if kind == "map":
        return {key: _render(shape.value, item) for key, item in value.items()}
    if kind == "timestamp":
        if shape.serialization.get("timestampFormat") == "iso8601" or \
                getattr(shape, "metadata", {}).get("timestampFormat") == "iso8601":
            seconds = epoch(value) or 0.0
            return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        return epoch(value)
    return value


# ---- REST-JSON (the Lambda API): members bound to the path, query string, headers and body ----


def rest_request(service: Service, operation: Any, labels: Mapping[str, str], query: Mapping[str, list[str]],
                 headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """The members of a REST-JSON request, each read where the operation's input shape places
    it (`location`: `uri` from `labels`, the path's labels by name; `querystring`; `header`;
    the `payload` member from the whole body — raw text for a blob, the JSON value for a
    structure; every other member from the JSON body), then checked as `Service.check_request`
    checks them. Raises SerializationException for a value of the wrong form."""
    shape = operation.input_shape
    if shape is None:
        return {}
    lowered = {key.lower(): value for key, value in headers.items()}
    payload = shape.serialization.get("payload")
    params: dict[str, Any] = {}
    for name, member in shape.members.items():
        where, wire_name = member.serialization.get("location"), member.serialization.get("name", name)
        if where == "uri" and wire_name in labels:
            params[name] = labels[wire_name]
        elif where == "querystring" and wire_name in query:
            params[name] = _from_text(member, query[wire_name], f"query parameter {wire_name}")
        elif where == "header" and wire_name.lower() in lowered:
            params[name] = _from_text(member, [lowered[wire_name.lower()]], f"header {wire_name}")
    if payload is not None:
        member = shape.members[payload]
        if member.type_name == "blob":
            if body:
                try:
                    params[payload] = body.decode("utf-8")
                except UnicodeDecodeError:
                    raise ApiError("SerializationException", f"{payload}: the body is not UTF-8 text") from None
        elif body:
            params[payload] = _json_body(body)
    elif body:
        found = _json_body(body)
        if not isinstance(found, dict):
            raise ApiError("SerializationException", "the request body must be a JSON object")
        for name, member in shape.members.items():
            if name in found and "location" not in member.serialization:
                params[name] = _decoded_blob(member, found[name], name)
    return service.check_request(operation, params)


def rest_response(service: Service, operation: Any, result: Mapping[str, Any]) -> tuple[int, Any, dict[str, str]]:
    """(status, body, headers) of a REST-JSON answer: members the output shape places in a
    `header` or the `statusCode` go there, a blob `payload` member is the raw body (bytes), every
    other member is rendered into the JSON body (`Service.render`); the status defaults to the
    operation's `responseCode`."""
    status = int(operation.http.get("responseCode", 200))
    shape = operation.output_shape
    if shape is None:
        return status, {}, {}
    headers: dict[str, str] = {}
    body: dict[str, Any] = {}
    payload = shape.serialization.get("payload")
    raw: bytes | None = None
    for name, member in shape.members.items():
        value = result.get(name)
        if value is None:
            continue
        where = member.serialization.get("location")
        if where == "header":
            headers[member.serialization.get("name", name)] = str(value).lower() if isinstance(value, bool) \
                else str(value)
        elif where == "statusCode":
            status = int(value)
        elif name == payload and member.type_name == "blob":
            raw = value if isinstance(value, bytes) else str(value).encode()
        else:
            body[name] = value
    if raw is not None:
        headers.setdefault("Content-Type", "application/json")
        return status, raw, headers
    return status, service.render(operation, body), headers


def _json_body(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError("SerializationException", f"the request body is not JSON: {exc}") from None


def _decoded_blob(member: Any, value: Any, where: str) -> Any:
    """A blob inside a JSON body travels base64-encoded: its text."""
    if member.type_name != "blob" or not isinstance(value, str):
        return value
    import base64
    import binascii

    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ApiError("SerializationException", f"{where}: not base64-encoded UTF-8 text") from None


def _from_text(member: Any, values: list[str], where: str) -> Any:
    """A query-string or header value as the member's type (a list takes every value)."""
    kind = member.type_name
    if kind == "list":
        return [_from_text(member.member, [value], where) for value in values]
    text = values[-1]
    if kind in ("integer", "long"):
        try:
            return int(text)
        except ValueError:
            raise ApiError("SerializationException", f"{where}: {text!r} is not an integer") from None
    if kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise ApiError("SerializationException", f"{where}: {text!r} is not true or false") from None
        return text.lower() == "true"
    if kind == "timestamp":
        try:
            return float(text)
        except ValueError:
            pass
        try:
            return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise ApiError("SerializationException", f"{where}: {text!r} is not a timestamp") from None
    return text
