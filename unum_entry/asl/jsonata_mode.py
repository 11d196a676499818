"""JSONata evaluation for states with `"QueryLanguage": "JSONata"`.

A string that is exactly `{% … %}` (it starts with `{%` and ends with `%}`) is a JSONata
expression; any other string, even one holding `{% … %}` with other characters around it, is a
literal, as in Step Functions. Objects and arrays are evaluated member by member. Expressions see the reserved
variable `$states` (`input`, `result`, `errorOutput`, `context`), the workflow variables as
`$name`, and Step Functions' extra functions `$partition`, `$range`, `$hash`, `$random`, `$uuid`
and `$parse`; `$eval` is not available, as in Step Functions. Every failure (syntax, type error,
an undefined result, a non-JSON result) raises StatesRuntimeError("States.QueryEvaluationError")
with AWS's cause wording, the field named as AWS names it (`Output/a/b[0]`,
`Choices[1]/Condition`); AWS's prefix "An error occurred while executing the state 'S' (entered
at the event id #N). " is not produced (unum keeps no execution history to number).

The library is `jsonata-python` (import name `jsonata`), imported on first use. A fresh
`Jsonata` object is built per evaluation (parsing is cheap): the library keeps per-object
state (time limit start, thread-local current expression) that must not be shared.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from unum_entry.asl import intrinsics
from unum_entry.errors import StatesRuntimeError

QUERY_EVALUATION_ERROR = "States.QueryEvaluationError"
OPEN, CLOSE = "{%", "%}"
TIMEOUT_MS = 5_000  # runaway guard; AWS stops at 1 s of JavaScript, which Python is slower than
MAX_RANGE_ITEMS = intrinsics.MAX_RANGE_ITEMS


def is_expression(value: object) -> bool:
    """True if `value` is a `{% … %}` JSONata expression string."""
    return isinstance(value, str) and len(value) >= 4 and value.startswith(OPEN) and value.endswith(CLOSE)


def body(text: str) -> str:
    """The JSONata text inside `{% … %}`."""
    return text[len(OPEN): -len(CLOSE)]


def expression_problem(text: str) -> str | None:
    """Why the `{% … %}` string `text` does not compile, or None if it does."""
    import jsonata  # type: ignore[import-untyped]

    if not body(text).strip():
        return "the JSONata expression is empty"
    try:
        jsonata.Jsonata(body(text))
    except Exception as error:  # the library raises JException and, on odd input, others
        return f"invalid JSONata {text!r}: {error}"
    return None


class Evaluator:
    """Evaluates JSONata strings, objects and arrays against one set of bindings.

    `states` is the `$states` object; `variables` the workflow variables. Both are converted
    once, when the evaluator is made, into the library's value representation.
    """

    def __init__(self, states: Mapping[str, Any], variables: Mapping[str, Any], *,
                 uuid: Callable[[], str], random: Callable[[], float]) -> None:
        import jsonata  # type: ignore[import-untyped]

        self._jsonata = jsonata
        self._bindings: dict[str, Any] = {name: _to_jsonata(value) for name, value in variables.items()}
        self._bindings["states"] = _to_jsonata(dict(states))
        self._bindings.update(_functions(jsonata, uuid, random))

    def value(self, template: Any, *, field: str) -> Any:
        """`template` with every `{% … %}` string evaluated (objects and arrays recursively)."""
        if is_expression(template):
            return self.expression(template, field=field)
        if isinstance(template, Mapping):
            return {key: self.value(item, field=f"{field}/{key}") for key, item in template.items()}
        if isinstance(template, list):
            return [self.value(item, field=f"{field}[{index}]") for index, item in enumerate(template)]
        return template

    def expression(self, text: str, *, field: str) -> Any:
        """The JSON value of one `{% … %}` expression. Raises StatesRuntimeError."""
        try:
            compiled = self._jsonata.Jsonata(body(text), timeout=TIMEOUT_MS)
            compiled.set_output_convert_nulls(False)
            result = compiled.evaluate(None, self._bindings)
        except StatesRuntimeError as error:  # raised by the Step Functions functions below
            raise _error(field, text, error.cause) from None
        except RecursionError:
            raise _error(field, text, "Stack overflow") from None
        except Exception as error:  # the library signals every failure with an exception
            raise _error(field, text, str(error)) from None
        if result is None:
            raise StatesRuntimeError(QUERY_EVALUATION_ERROR, undefined_cause(text, field))
        try:
            return _from_jsonata(result)
        except ValueError as error:
            raise _error(field, text, str(error)) from None


def undefined_cause(text: str, field: str) -> str:
    """AWS's cause for an expression that returned nothing."""
    return f"The JSONata expression '{body(text).strip()}' specified for the field '{field}' returned nothing (undefined)."


def unexpected_type_cause(text: str, field: str, expected: str, value: Any) -> str:
    """AWS's cause for an expression whose result has the wrong type (e.g. Items not an array)."""
    kind = json_type(value)
    shown = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return (f"The JSONata expression '{body(text).strip()}' specified for the field '{field}' returned an unexpected result "
            f"type. Expected '{expected}', but was '{kind}' for value: {shown}")


def json_type(value: Any) -> str:
    """JSONata's `$type` name of a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _error(field: str, text: str, problem: str) -> StatesRuntimeError:
    return StatesRuntimeError(
        QUERY_EVALUATION_ERROR,
        f"The JSONata expression '{body(text).strip()}' specified for the field '{field}' threw an error during evaluation: {problem}",
    )


def _to_jsonata(value: Any) -> Any:
    """`value` with JSON null as the library's null (Python None means 'undefined' to it)."""
    from jsonata.utils import Utils  # type: ignore[import-untyped]

    if value is None:
        return Utils.NULL_VALUE
    if isinstance(value, Mapping):
        return {key: _to_jsonata(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_jsonata(item) for item in value]
    return value


def _from_jsonata(value: Any) -> Any:
    """Plain JSON from a library result; ValueError for values JSON cannot hold."""
    from jsonata.utils import Utils  # type: ignore[import-untyped]

    if value is Utils.NULL_VALUE or value is None:
        return None
    if isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("the result is not a finite number")
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    if isinstance(value, Mapping):
        return {key: _from_jsonata(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_from_jsonata(item) for item in value if item is not None]
    raise ValueError(f"the result is not a JSON value (a {type(value).__name__})")


def _functions(jsonata: Any, uuid: Callable[[], str], random: Callable[[], float]) -> dict[str, Any]:
    """Step Functions' extra JSONata functions, and `$eval` disabled."""
    lam = jsonata.Jsonata.JLambda

    def fail(name: str, problem: str) -> StatesRuntimeError:
        return StatesRuntimeError(QUERY_EVALUATION_ERROR, f"${name}: {problem}")

    def integer(name: str, value: Any) -> int:
        # Step Functions rounds non-integer arguments of these functions down.
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise fail(name, f"expected an integer, got {_from_jsonata(value)!r}")
        return math.floor(value)

    def partition(array: Any = None, size: Any = None) -> Any:
        array = _from_jsonata(array)
        if not isinstance(array, list):
            raise fail("partition", "the first argument must be an array")
        chunk = integer("partition", size)
        if chunk <= 0:
            raise fail("partition", "the chunk size must be a positive integer")
        return _to_jsonata([array[i:i + chunk] for i in range(0, len(array), chunk)])

    def range_(start: Any = None, end: Any = None, step: Any = None) -> Any:
        first, last, by = integer("range", start), integer("range", end), integer("range", step)
        if by == 0:
            raise fail("range", "the step must not be 0")
        count = max(0, (last - first) // by + 1)
        if count > MAX_RANGE_ITEMS:
            raise fail("range", f"the range has {count} items; at most {MAX_RANGE_ITEMS} are allowed")
        values = [first + i * by for i in range(count)]
        # JSONata's singleton-sequence rule, as AWS applies it: one value is the value itself.
        return values[0] if len(values) == 1 else values

    def hash_(data: Any = None, algorithm: Any = None) -> Any:
        try:
            return intrinsics.hash_text("$hash", _from_jsonata(data), _from_jsonata(algorithm))
        except StatesRuntimeError as error:
            raise fail("hash", error.cause) from None

    def random_(seed: Any = None) -> Any:
        if seed is None:
            return random()
        import random as _random

        return _random.Random(integer("random", seed)).random()

    def parse(text: Any = None) -> Any:
        if not isinstance(text, str):
            raise fail("parse", "the argument must be a string")
        try:
            return _to_jsonata(json.loads(text))
        except ValueError as error:
            raise fail("parse", f"the argument is not valid JSON ({error})") from None

    def eval_(*_: Any) -> Any:
        raise fail("eval", "$eval is not available in Step Functions; use $parse")

    return {
        "partition": lam(partition), "range": lam(range_), "hash": lam(hash_),
        "random": lam(random_), "uuid": lam(lambda: uuid()), "parse": lam(parse), "eval": lam(eval_),
    }
