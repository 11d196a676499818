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
