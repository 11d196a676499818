"""Payload templates of JSONPath states (Parameters, ItemSelector, ResultSelector, Assign).

A payload template is JSON in which a key ending in `.$` takes the value of an expression:
a path (`$…` the data, `$$…` the context object, `$name…` a variable) or an intrinsic function
(`States.…(…)`); the key loses its `.$`. Other keys keep their values, with nested objects and
arrays processed the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from unum_entry.asl import intrinsics, paths
from unum_entry.errors import StatesRuntimeError

SUFFIX = ".$"


def expression_problem(text: object) -> str | None:
    """Why `text` is not a valid `.$` value (path or intrinsic), or None."""
    if not isinstance(text, str):
        return "the value of a key ending in '.$' must be a string: a path or an intrinsic function"
    if intrinsics.looks_like_intrinsic(text):
        try:
            intrinsics.parse(text.strip())
        except intrinsics.IntrinsicSyntaxError as error:
            return str(error)
        return None
    if text.startswith("$"):
        return paths.path_problem(text)
    return f"{text!r} is neither a path (starting with '$') nor an intrinsic function (States.…)"


def evaluate_expression(text: str, data: Any, *, context: Any, variables: Mapping[str, Any],
                        uuid: Callable[[], str], random: Callable[[], float], field: str) -> Any:
    """The value of one `.$` expression. Raises StatesRuntimeError."""
    def resolve(path: str) -> Any:
        return paths.select(path, data, context, variables, field=field)

    if intrinsics.looks_like_intrinsic(text):
        try:
            call = intrinsics.parse(text.strip())
        except intrinsics.IntrinsicSyntaxError as error:
            raise StatesRuntimeError(intrinsics.INTRINSIC_FAILURE, f"Invalid intrinsic in field '{field}': {error}") from None
        return intrinsics.evaluate(call, intrinsics.Sources(resolve, uuid, random))
    return resolve(text)


def evaluate(template: Any, data: Any, *, context: Any, variables: Mapping[str, Any],
             uuid: Callable[[], str], random: Callable[[], float], field: str) -> Any:
    """`template` with every `.$` key evaluated against `data`. Raises StatesRuntimeError."""
    if isinstance(template, Mapping):
        out: dict[str, Any] = {}
        for key, value in template.items():
            here = f"{field}.{key}"
            if isinstance(key, str) and key.endswith(SUFFIX):
                if not isinstance(value, str):
                    raise StatesRuntimeError(paths.RUNTIME, f"The field '{here}' must be a string path or intrinsic")
                out[key[: -len(SUFFIX)]] = evaluate_expression(
                    value, data, context=context, variables=variables, uuid=uuid, random=random, field=here)
            else:
                out[key] = evaluate(value, data, context=context, variables=variables, uuid=uuid,
                                    random=random, field=here)
        return out
    if isinstance(template, list):
        return [evaluate(item, data, context=context, variables=variables, uuid=uuid, random=random,
                         field=f"{field}[{index}]") for index, item in enumerate(template)]
    return template


def problems(template: Any, field: str) -> list[tuple[str, str]]:
    """Static problems of a payload template: (field path, problem) pairs."""
    found: list[tuple[str, str]] = []
    if isinstance(template, Mapping):
        plain = {key for key in template if isinstance(key, str) and not key.endswith(SUFFIX)}
        for key, value in template.items():
            here = f"{field}.{key}"
            if isinstance(key, str) and key.endswith(SUFFIX):
                problem = expression_problem(value)
                if problem is not None:
                    found.append((here, problem))
                if key[: -len(SUFFIX)] in plain:
                    found.append((here, f"conflicts with the key {key[: -len(SUFFIX)]!r} in the same object"))
            else:
                found.extend(problems(value, here))
    elif isinstance(template, list):
        for index, item in enumerate(template):
            found.extend(problems(item, f"{field}[{index}]"))
    return found


def expressions_in(template: Any) -> list[str]:
    """Every `.$` expression string in `template` (for static variable checks)."""
    found: list[str] = []
    if isinstance(template, Mapping):
        for key, value in template.items():
            if isinstance(key, str) and key.endswith(SUFFIX) and isinstance(value, str):
                found.append(value)
            else:
                found.extend(expressions_in(value))
    elif isinstance(template, list):
        for item in template:
            found.extend(expressions_in(item))
    return found
