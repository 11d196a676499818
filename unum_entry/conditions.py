"""Transition conditions: AWS Step Functions Choice rules (Amazon States Language, JSONPath mode).

Conditions are data, never code. A rule is either a comparison — an object with `Variable` (a
reference path) and exactly one operator — or exactly one of `And` / `Or` (a non-empty list of
rules) / `Not` (one rule). `validate_condition` checks a rule once, when the IR is loaded;
`evaluate` then runs it against a function's output.

Semantics follow Step Functions:
* a value of the wrong type for the operator (a string under `NumericEquals`, a boolean where a
  number is expected) makes the comparison False, never an error;
* a comparison whose `Variable` (or `…Path` operand) is not present raises
  `ConditionEvaluationError` naming the path, as Step Functions' States.Runtime does;
* `IsPresent` tests presence; the other `Is…` tests are False on a missing path;
* strings order by Unicode code point; timestamps are RFC3339 with an uppercase `T` and either
  `Z` or a numeric offset, compared as instants;
* `StringMatches` treats `*` as "any run of characters"; a backslash escapes the next character
  (`\\*` is a literal star, `\\\\` a literal backslash). Like ASL, it has no `…Path` form.

Reference paths (`$`, `$.a.b`, `$.a[0]`, `$['a b']`) resolve against the output; `$$…` resolves
against the context object (one `$` stripped). `resolve_path` exposes that resolution for other
IR paths (map `items`, envelope `path`). A reference path must select a single value, so
wildcards, slices, unions, filters, recursive descent and negative indices are rejected.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

from unum_entry.errors import ConditionError, ConditionEvaluationError
from unum_entry.frozen import Frozen, frozen

_MISSING: Any = object()  # sentinel: a reference path selected nothing

# ---------------------------------------------------------------------------------------------
# Value kinds: each maps a value to a comparable key, or None when the value is not of the kind.
# ---------------------------------------------------------------------------------------------


@frozen
class _Kind(Frozen):
    """A family of values a comparison works on."""

    noun: str  # how a validation error names it: "must be {noun}"
    key: Callable[[Any], Any]  # comparable key for a value of this kind, None otherwise

    def __init__(self, noun: str, key: Callable[[Any], Any]) -> None:
        self.__dict__.update(noun=noun, key=key)


def _string_key(value: Any) -> str | None:
    """The string itself, or None if `value` is not a string."""
    return value if isinstance(value, str) else None


def _number_key(value: Any) -> int | float | None:
    """The number itself, or None if `value` is not a finite JSON number (booleans are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def _boolean_key(value: Any) -> bool | None:
    """The boolean itself, or None if `value` is not a boolean."""
    return value if isinstance(value, bool) else None


@functools.cache
def _timestamp_syntax() -> re.Pattern[str]:
    """RFC3339, compiled on first use (few conditions compare timestamps; a cold start need not)."""
    return re.compile(
        r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:Z|([+-])(\d{2}):(\d{2}))",
        re.ASCII,
    )


def _timestamp_key(value: Any) -> tuple[datetime, str] | None:
    """(UTC instant to the second, fraction digits) for an RFC3339 timestamp string, or None.

    The fraction is kept as its digits without trailing zeros, which compare as strings exactly
    like the fractions they denote, so sub-microsecond precision is not lost.
    """
    match = _timestamp_syntax().fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = match.groups()
    offset = timedelta(hours=int(off_h or 0), minutes=int(off_m or 0)) * (-1 if sign == "-" else 1)
    try:
        moment = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second),
            tzinfo=timezone(offset),
        ).astimezone(timezone.utc)
    except (ValueError, OverflowError):
        return None
    return moment, (fraction or "").rstrip("0")


@functools.lru_cache(maxsize=256)
def _compile_pattern(pattern: str) -> re.Pattern[str] | None:
    """The regex for a StringMatches pattern, or None if it ends in a lone backslash."""
    parts: list[str] = []
    escaped = False
    for char in pattern:
        if escaped:
            parts.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            parts.append(".*" if char == "*" else re.escape(char))
    return None if escaped else re.compile("".join(parts), re.DOTALL)


def _pattern_key(value: Any) -> re.Pattern[str] | None:
    """The compiled regex for a well-formed StringMatches pattern, or None."""
    return _compile_pattern(value) if isinstance(value, str) else None


def _matches(text: str, pattern: re.Pattern[str]) -> bool:
    """True if the whole of `text` matches the compiled StringMatches pattern."""
    return pattern.fullmatch(text) is not None


_STRING = _Kind("a string", _string_key)
_NUMBER = _Kind("a finite number (not a boolean)", _number_key)
_BOOLEAN = _Kind("a boolean", _boolean_key)
_TIMESTAMP_STRING = _Kind(
    "an RFC3339 timestamp string such as '2016-08-18T17:33:00Z'", _timestamp_key
)
_PATTERN = _Kind("a string pattern that does not end in a lone backslash", _pattern_key)

# ---------------------------------------------------------------------------------------------
# Operator tables.
# ---------------------------------------------------------------------------------------------


@frozen
class _Comparison(Frozen):
    """One comparison operator: `relation(variable.key(value), operand.key(operand))`."""

    variable: _Kind  # what the Variable's value must be; any other value makes the rule False
    operand: _Kind  # what the operand must be (checked at validation, or at run time via a path)
    relation: Callable[[Any, Any], bool]
    by_path: bool = False  # the operand is a reference path to the value to compare with

    def __init__(self, variable: _Kind, operand: _Kind, relation: Callable[[Any, Any], bool],
                 by_path: bool = False) -> None:
        self.__dict__.update(variable=variable, operand=operand, relation=relation, by_path=by_path)


_LITERAL_COMPARISONS: Mapping[str, _Comparison] = MappingProxyType({
    "StringEquals": _Comparison(_STRING, _STRING, operator.eq),
    "StringLessThan": _Comparison(_STRING, _STRING, operator.lt),
    "StringGreaterThan": _Comparison(_STRING, _STRING, operator.gt),
    "StringLessThanEquals": _Comparison(_STRING, _STRING, operator.le),
    "StringGreaterThanEquals": _Comparison(_STRING, _STRING, operator.ge),
    "StringMatches": _Comparison(_STRING, _PATTERN, _matches),
    "NumericEquals": _Comparison(_NUMBER, _NUMBER, operator.eq),
    "NumericLessThan": _Comparison(_NUMBER, _NUMBER, operator.lt),
    "NumericGreaterThan": _Comparison(_NUMBER, _NUMBER, operator.gt),
    "NumericLessThanEquals": _Comparison(_NUMBER, _NUMBER, operator.le),
    "NumericGreaterThanEquals": _Comparison(_NUMBER, _NUMBER, operator.ge),
    "BooleanEquals": _Comparison(_BOOLEAN, _BOOLEAN, operator.eq),
    "TimestampEquals": _Comparison(_TIMESTAMP_STRING, _TIMESTAMP_STRING, operator.eq),
    "TimestampLessThan": _Comparison(_TIMESTAMP_STRING, _TIMESTAMP_STRING, operator.lt),
    "TimestampGreaterThan": _Comparison(_TIMESTAMP_STRING, _TIMESTAMP_STRING, operator.gt),
    "TimestampLessThanEquals": _Comparison(_TIMESTAMP_STRING, _TIMESTAMP_STRING, operator.le),
    "TimestampGreaterThanEquals": _Comparison(_TIMESTAMP_STRING, _TIMESTAMP_STRING, operator.ge),
})

_NO_PATH_FORM = frozenset({"StringMatches"})  # as in ASL: there is no StringMatchesPath

_COMPARISONS: Mapping[str, _Comparison] = MappingProxyType(
    {
        **_LITERAL_COMPARISONS,
        **{
            f"{name}Path": _Comparison(comparison.variable, comparison.operand, comparison.relation, by_path=True)
            for name, comparison in _LITERAL_COMPARISONS.items()
            if name not in _NO_PATH_FORM
        },
    }
)


def _is_number(value: Any) -> bool:
    """True for a JSON number; booleans are not numbers."""
    return _number_key(value) is not None


def _is_timestamp(value: Any) -> bool:
    """True for a valid RFC3339 timestamp string."""
    return _timestamp_key(value) is not None


_TYPE_TESTS: Mapping[str, Callable[[Any], bool]] = MappingProxyType(
    {
        "IsNull": lambda value: value is None,
        "IsNumeric": _is_number,
        "IsString": lambda value: isinstance(value, str),
        "IsBoolean": lambda value: isinstance(value, bool),
        "IsTimestamp": _is_timestamp,
    }
)

_PRESENCE_TEST = "IsPresent"
_COMBINATORS = frozenset({"And", "Or", "Not"})
_OPERATORS = frozenset({*_COMPARISONS, *_TYPE_TESTS, _PRESENCE_TEST, *_COMBINATORS})

# ---------------------------------------------------------------------------------------------
# Reference paths.
# ---------------------------------------------------------------------------------------------


@frozen
class _ReferencePath(Frozen):
    """A parsed reference path: which document it reads and the steps into it."""

    in_context: bool  # `$$…`: read the context object, not the output
    steps: tuple[str | int, ...]  # object keys (str) and list indices (int), outermost first

    def __init__(self, in_context: bool, steps: tuple[str | int, ...]) -> None:
        self.__dict__.update(in_context=in_context, steps=steps)


def _step(node: Any) -> str | int:
    """The single key or index a jsonpath-ng node selects; ValueError if it may select more."""
    from jsonpath_ng.jsonpath import Fields, Index

    if isinstance(node, Fields) and len(node.fields) == 1 and node.fields[0] != "*":
        return node.fields[0]
    if isinstance(node, Index) and len(node.indices) == 1 and node.indices[0] >= 0:
        return node.indices[0]
    raise ValueError("a step that may select other than one value")


def _steps(node: Any) -> tuple[str | int, ...]:
    """Flatten a parsed `$` or `$<step>…` expression into its steps; ValueError otherwise."""
    from jsonpath_ng.jsonpath import Child, Root

    if isinstance(node, Root):
        return ()
    if isinstance(node, Child):
        return (*_steps(node.left), _step(node.right))
    raise ValueError("a step that may select other than one value")


@functools.lru_cache(maxsize=512)
def _parse_reference_path(path: str) -> _ReferencePath:
    """Parse a Step Functions reference path. Raises ValueError naming the problem.

    jsonpath-ng does the parsing; evaluation walks the flattened steps itself, because
    jsonpath-ng's `find` indexes into strings and raises on an index into an object.
    """
    from jsonpath_ng import parse
    from jsonpath_ng.exceptions import JSONPathError

    if not path.startswith("$"):
        raise ValueError("must be a reference path starting with '$'")
    in_context = path.startswith("$$")
    try:
        expression = parse(path[1:] if in_context else path)
    except JSONPathError as error:
        raise ValueError(f"invalid JSONPath {path!r}: {error}") from None
    try:
        return _ReferencePath(in_context, _steps(expression))
    except ValueError:
        raise ValueError(
            f"{path!r} is not a reference path: it must select a single value "
            "(only .name, ['name'] and [index] steps)"
        ) from None


def _reference_path_problem(path: object) -> str | None:
    """Why `path` is not a valid reference path, or None if it is."""
    if not isinstance(path, str):
        return "must be a reference path string starting with '$'"
    try:
        _parse_reference_path(path)
    except ValueError as error:
        return str(error)
    return None


def _walk(document: Any, steps: tuple[str | int, ...]) -> Any:
    """The value `steps` select in `document`, or _MISSING."""
    for step in steps:
        if isinstance(step, str):
            if not isinstance(document, Mapping) or step not in document:
                return _MISSING
        elif not isinstance(document, (list, tuple)) or step >= len(document):
            return _MISSING
        document = document[step]
    return document


def _resolve(path: str, output: Any, context: Mapping[str, Any]) -> Any:
    """The value a valid reference path selects (`$$…` in `context`), or _MISSING."""
    reference = _parse_reference_path(path)
    return _walk(context if reference.in_context else output, reference.steps)


def resolve_path(path: str, output: Any, context: Mapping[str, Any]) -> Any:
    """The single value reference path `path` selects: `$…` in `output`, `$$…` in `context`.

    Raises ConditionEvaluationError naming the path if it is not a valid reference path or
    selects nothing (Step Functions' States.Runtime "Invalid path").
    """
    problem = _reference_path_problem(path)
    if problem is not None:
        raise ConditionEvaluationError(f"Invalid path {path!r}: {problem}")
    value = _resolve(path, output, context)
    if value is _MISSING:
        raise ConditionEvaluationError(f"Invalid path {path!r}: no value is present there")
    return value


# ---------------------------------------------------------------------------------------------
# Validation.
# ---------------------------------------------------------------------------------------------


def _child(field: str, key: str) -> str:
    """The field path of `key` under `field`."""
    return f"{field}.{key}" if field else key


def validate_condition(rule: object, *, source: str, field: str) -> None:
    """Check that `rule` is a well-formed Choice rule.

    Raises ConditionError(source, field_path, problem) for the first problem found, where
    field_path extends `field` down to the offending key (e.g. `when.And[1].NumericEquals`).
    """
    if not isinstance(rule, Mapping):
        raise ConditionError(source, field, "must be an object (a Choice rule)")
    name = _single_operator(rule, source, field)
    if name in _COMBINATORS:
        _validate_combinator(name, rule, source, field)
    else:
        _validate_leaf(name, rule, source, field)


def _single_operator(rule: Mapping[Any, Any], source: str, field: str) -> str:
    """The one operator key of `rule`. Raises ConditionError for unknown, none or several."""
    names = [key for key in rule if key != "Variable"]
    for key in names:
        if key not in _OPERATORS:
            raise ConditionError(source, _child(field, str(key)), "unknown operator")
    if not names:
        raise ConditionError(source, field, "has no operator; a rule needs exactly one")
    if len(names) > 1:
        listed = ", ".join(names)
        raise ConditionError(
            source, field, f"has {len(names)} operators ({listed}); a rule needs exactly one"
        )
    return names[0]


def _validate_combinator(name: str, rule: Mapping[str, Any], source: str, field: str) -> None:
    """Check an And / Or / Not rule and, recursively, the rules it holds."""
    if "Variable" in rule:
        raise ConditionError(source, _child(field, "Variable"), f"is not allowed with {name}")
    operand = rule[name]
    here = _child(field, name)
    if name == "Not":
        validate_condition(operand, source=source, field=here)
        return
    if not isinstance(operand, list) or not operand:
        raise ConditionError(source, here, "must be a non-empty list of rules")
    for index, member in enumerate(operand):
        validate_condition(member, source=source, field=f"{here}[{index}]")


def _validate_leaf(name: str, rule: Mapping[str, Any], source: str, field: str) -> None:
    """Check a comparison or Is… rule: its Variable and its operand."""
    if "Variable" not in rule:
        raise ConditionError(source, _child(field, "Variable"), f"is required with {name}")
    problem = _reference_path_problem(rule["Variable"])
    if problem is not None:
        raise ConditionError(source, _child(field, "Variable"), problem)
    problem = _operand_problem(name, rule[name])
    if problem is not None:
        raise ConditionError(source, _child(field, name), problem)


def _operand_problem(name: str, operand: object) -> str | None:
    """Why `operand` is not valid for operator `name` (not a combinator), or None."""
    comparison = _COMPARISONS.get(name)
    if comparison is None:  # IsPresent and the other Is… tests
        return None if isinstance(operand, bool) else "must be a boolean"
    if comparison.by_path:
        return _reference_path_problem(operand)
    if comparison.operand.key(operand) is None:
        return f"must be {comparison.operand.noun}"
    return None


# ---------------------------------------------------------------------------------------------
# Evaluation.
# ---------------------------------------------------------------------------------------------


def evaluate(rule: Mapping[str, Any], output: Any, context: Mapping[str, Any]) -> bool:
    """Whether `rule` holds for `output` (`$…` paths) and `context` (`$$…` paths).

    `rule` must have passed validate_condition. Raises ConditionEvaluationError when a
    comparison's Variable or `…Path` operand is not present.
    """
    name = next(key for key in rule if key != "Variable")
    if name in _COMBINATORS:
        return _COMBINATOR_EVALUATORS[name](rule[name], output, context)
    if name in _COMPARISONS:
        return _evaluate_comparison(name, rule, output, context)
    return _evaluate_type_test(name, rule, output, context)


def _evaluate_and(rules: list[Mapping[str, Any]], output: Any, context: Mapping[str, Any]) -> bool:
    """True if every rule holds; stops at the first that does not."""
    return all(evaluate(rule, output, context) for rule in rules)


def _evaluate_or(rules: list[Mapping[str, Any]], output: Any, context: Mapping[str, Any]) -> bool:
    """True if any rule holds; stops at the first that does."""
    return any(evaluate(rule, output, context) for rule in rules)


def _evaluate_not(rule: Mapping[str, Any], output: Any, context: Mapping[str, Any]) -> bool:
    """True if `rule` does not hold."""
    return not evaluate(rule, output, context)


_COMBINATOR_EVALUATORS: Mapping[str, Callable[[Any, Any, Mapping[str, Any]], bool]] = (
    MappingProxyType({"And": _evaluate_and, "Or": _evaluate_or, "Not": _evaluate_not})
)


def _evaluate_comparison(
    name: str, rule: Mapping[str, Any], output: Any, context: Mapping[str, Any]
) -> bool:
    """Apply comparison `name`; False when either side is not of the operator's kind."""
    comparison = _COMPARISONS[name]
    value = resolve_path(rule["Variable"], output, context)
    operand = rule[name]
    if comparison.by_path:
        operand = resolve_path(operand, output, context)
    left, right = comparison.variable.key(value), comparison.operand.key(operand)
    if left is None or right is None:
        return False
    return bool(comparison.relation(left, right))


def _evaluate_type_test(
    name: str, rule: Mapping[str, Any], output: Any, context: Mapping[str, Any]
) -> bool:
    """Apply IsPresent or an Is… type test; type tests on a missing path are False."""
    value = _resolve(rule["Variable"], output, context)
    expected = rule[name]
    if name == _PRESENCE_TEST:
        return (value is not _MISSING) == expected
    if value is _MISSING:
        return False
    return _TYPE_TESTS[name](value) == expected
