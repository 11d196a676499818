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

Reference paths (`$`, `$.a.b`, `$.a[0]`, `$['a b']`) resolve against the output, `$$…` against
the context object and, in a Step Functions state machine, `$name…` against its variables; they
are parsed and selected by `unum_entry.jsonpath`, the one JSONPath implementation.
`resolve_path` exposes that resolution for other IR paths (map `items`, envelope `path`). A
reference path must select a single value, so wildcards, slices, unions, filters, recursive
descent and negative indices are rejected.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any, Final

from unum_entry.errors import ConditionError, ConditionEvaluationError
from unum_entry.frozen import ReadOnly
from unum_entry.jsonpath import MISSING, PathSyntaxError, Root, lookup, parse_path

# ---------------------------------------------------------------------------------------------
# Value kinds: each maps a value to a comparable key, or None when the value is not of the kind.
# ---------------------------------------------------------------------------------------------


class _Kind(ReadOnly):
    """A family of values a comparison works on."""

    __slots__ = ("noun", "key")

    noun: Final[str]  # how a validation error names it: "must be {noun}"
    key: Final[Callable[[Any], Any]]  # comparable key for a value of this kind, None otherwise

    def __init__(self, noun: str, key: Callable[[Any], Any]) -> None:
        self.noun = noun
        self.key = key


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


class _Comparison(ReadOnly):
    """One comparison operator: `relation(variable.key(value), operand.key(operand))`."""

    __slots__ = ("variable", "operand", "relation", "by_path")

    variable: Final[_Kind]  # what the Variable's value must be; any other value makes the rule False
    operand: Final[_Kind]  # what the operand must be (checked at validation, or at run time via a path)
    relation: Final[Callable[[Any, Any], bool]]
    by_path: Final[bool]  # the operand is a reference path to the value to compare with

    def __init__(self, variable: _Kind, operand: _Kind, relation: Callable[[Any, Any], bool],
                 by_path: bool = False) -> None:
        self.variable = variable
        self.operand = operand
        self.relation = relation
        self.by_path = by_path


_RELATIONS = (("Equals", operator.eq), ("LessThan", operator.lt), ("GreaterThan", operator.gt),
              ("LessThanEquals", operator.le), ("GreaterThanEquals", operator.ge))
_LITERAL_COMPARISONS: Mapping[str, _Comparison] = MappingProxyType({
    **{f"{family}{suffix}": _Comparison(kind, kind, relation)  # StringEquals ... TimestampGreaterThanEquals
       for family, kind in (("String", _STRING), ("Numeric", _NUMBER), ("Timestamp", _TIMESTAMP_STRING))
       for suffix, relation in _RELATIONS},
    "StringMatches": _Comparison(_STRING, _PATTERN, _matches),
    "BooleanEquals": _Comparison(_BOOLEAN, _BOOLEAN, operator.eq),
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


def _reference_path_problem(path: object, *, variables: bool) -> str | None:
    """Why `path` is not a valid reference path, or None if it is (variables `$name…` only where
    `variables`)."""
    if not isinstance(path, str):
        return "must be a reference path string starting with '$'"
    if not path.startswith("$"):
        return "must be a reference path starting with '$'"
    try:
        parsed = parse_path(path)
    except PathSyntaxError as error:
        return f"invalid JSONPath {path!r}: {error.reason}"
    if not parsed.definite or any(isinstance(step, int) and step < 0 for step in parsed.steps or ()):
        return (f"{path!r} is not a reference path: it must select a single value "
                "(only .name, ['name'] and [index] steps)")
    if parsed.root is Root.VARIABLE and not variables:
        return f"{path!r}: variables cannot be used here"
    return None


def _resolve(path: str, output: Any, context: Mapping[str, Any], variables: Mapping[str, Any] | None) -> Any:
    """The value a valid reference path selects (`$$…` in `context`, `$name…` in `variables`),
    or MISSING."""
    return lookup(parse_path(path), output, context, variables or {})


def resolve_path(path: str, output: Any, context: Mapping[str, Any],
                 variables: Mapping[str, Any] | None = None) -> Any:
    """The single value reference path `path` selects: `$…` in `output`, `$$…` in `context`,
    `$name…` in `variables` (allowed only when `variables` is given).

    Raises ConditionEvaluationError naming the path if it is not a valid reference path or
    selects nothing (Step Functions' States.Runtime "Invalid path").
    """
    problem = _reference_path_problem(path, variables=variables is not None)
    if problem is not None:
        raise ConditionEvaluationError(f"Invalid path {path!r}: {problem}")
    value = _resolve(path, output, context, variables)
    if value is MISSING:
        raise ConditionEvaluationError(f"Invalid path {path!r}: no value is present there")
    return value


# ---------------------------------------------------------------------------------------------
# Validation.
# ---------------------------------------------------------------------------------------------


def _child(field: str, key: str) -> str:
    """The field path of `key` under `field`."""
    return f"{field}.{key}" if field else key


def validate_condition(rule: object, *, source: str, field: str, variables: bool = False) -> None:
    """Check that `rule` is a well-formed Choice rule; its paths may read workflow variables
    (`$name…`) only where `variables` (Step Functions state machines have them, the IR has not).

    Raises ConditionError(source, field_path, problem) for the first problem found, where
    field_path extends `field` down to the offending key (e.g. `when.And[1].NumericEquals`).
    """
    if not isinstance(rule, Mapping):
        raise ConditionError(source, field, "must be an object (a Choice rule)")
    name = _single_operator(rule, source, field)
    if name in _COMBINATORS:
        _validate_combinator(name, rule, source, field, variables)
    else:
        _validate_leaf(name, rule, source, field, variables)


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


def _validate_combinator(name: str, rule: Mapping[str, Any], source: str, field: str, variables: bool) -> None:
    """Check an And / Or / Not rule and, recursively, the rules it holds."""
    if "Variable" in rule:
        raise ConditionError(source, _child(field, "Variable"), f"is not allowed with {name}")
    operand = rule[name]
    here = _child(field, name)
    if name == "Not":
        validate_condition(operand, source=source, field=here, variables=variables)
        return
    if not isinstance(operand, list) or not operand:
        raise ConditionError(source, here, "must be a non-empty list of rules")
    for index, member in enumerate(operand):
        validate_condition(member, source=source, field=f"{here}[{index}]", variables=variables)


def _validate_leaf(name: str, rule: Mapping[str, Any], source: str, field: str, variables: bool) -> None:
    """Check a comparison or Is… rule: its Variable and its operand."""
    if "Variable" not in rule:
        raise ConditionError(source, _child(field, "Variable"), f"is required with {name}")
    problem = _reference_path_problem(rule["Variable"], variables=variables)
    if problem is not None:
        raise ConditionError(source, _child(field, "Variable"), problem)
    problem = _operand_problem(name, rule[name], variables)
    if problem is not None:
        raise ConditionError(source, _child(field, name), problem)


def _operand_problem(name: str, operand: object, variables: bool) -> str | None:
    """Why `operand` is not valid for operator `name` (not a combinator), or None."""
    comparison = _COMPARISONS.get(name)
    if comparison is None:  # IsPresent and the other Is… tests
        return None if isinstance(operand, bool) else "must be a boolean"
    if comparison.by_path:
        return _reference_path_problem(operand, variables=variables)
    if comparison.operand.key(operand) is None:
        return f"must be {comparison.operand.noun}"
    return None


# ---------------------------------------------------------------------------------------------
# Evaluation.
# ---------------------------------------------------------------------------------------------

_Variables = Mapping[str, Any] | None


def evaluate(rule: Mapping[str, Any], output: Any, context: Mapping[str, Any],
             variables: _Variables = None) -> bool:
    """Whether `rule` holds for `output` (`$…` paths), `context` (`$$…` paths) and, in a Step
    Functions state machine, its `variables` (`$name…` paths).

    `rule` must have passed validate_condition (with `variables=True` if `variables` is given).
    Raises ConditionEvaluationError when a comparison's Variable or `…Path` operand is not
    present (an undefined variable is not present).
    """
    name = next(key for key in rule if key != "Variable")
    if name == "And":  # every rule holds (stops at the first that does not)
        return all(evaluate(member, output, context, variables) for member in rule[name])
    if name == "Or":  # some rule holds (stops at the first that does)
        return any(evaluate(member, output, context, variables) for member in rule[name])
    if name == "Not":
        return not evaluate(rule[name], output, context, variables)
    if name in _COMPARISONS:
        return _evaluate_comparison(name, rule, output, context, variables)
    return _evaluate_type_test(name, rule, output, context, variables)


def _evaluate_comparison(
    name: str, rule: Mapping[str, Any], output: Any, context: Mapping[str, Any], variables: _Variables
) -> bool:
    """Apply comparison `name`; False when either side is not of the operator's kind."""
    comparison = _COMPARISONS[name]
    value = resolve_path(rule["Variable"], output, context, variables)
    operand = rule[name]
    if comparison.by_path:
        operand = resolve_path(operand, output, context, variables)
    left, right = comparison.variable.key(value), comparison.operand.key(operand)
    if left is None or right is None:
        return False
    return bool(comparison.relation(left, right))


def _evaluate_type_test(
    name: str, rule: Mapping[str, Any], output: Any, context: Mapping[str, Any], variables: _Variables
) -> bool:
    """Apply IsPresent or an Is… type test; type tests on a missing path are False."""
    value = _resolve(rule["Variable"], output, context, variables)
    expected = rule[name]
    if name == _PRESENCE_TEST:
        return (value is not MISSING) == expected
    if value is MISSING:
        return False
    return _TYPE_TESTS[name](value) == expected
