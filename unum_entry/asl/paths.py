"""JSONPath paths of the States Language: selecting values and writing ResultPath.

A *path* (InputPath, OutputPath, `.$` template values, ItemsPath, SecondsPath, ...) is JSONPath
with Jayway semantics, as Step Functions uses it:
* a *definite* path (only `.name`, `['name']` and `[index]` steps) selects one value; selecting
  nothing is Step Functions' `States.Runtime` error;
* an *indefinite* path (wildcards, slices, unions, filters, `..`) selects a list of values,
  possibly empty.

Every path starts at one of three roots: `$` the data, `$$` the context object, or `$name` a
workflow variable (`$name.field[0]` selects inside it). A *reference path* (ResultPath, Choice
`Variable`) must be definite; ResultPath must also start at `$`.

jsonpath-ng (`jsonpath_ng.ext`) parses; evaluation walks the parsed tree here because
jsonpath-ng's own `find` indexes into strings and treats an object as a one-element list.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from unum_entry.errors import StatesRuntimeError

RUNTIME = "States.Runtime"
RESULT_PATH_MATCH_FAILURE = "States.ResultPathMatchFailure"

MISSING: Any = object()  # sentinel: a definite path selected nothing

# A variable name is a Unicode identifier (UAX #31: ID_Start then ID_Continue); Python's `\w`
# classes approximate that closely enough for the names people write.
_VARIABLE = re.compile(r"\$([^\W\d]\w*)")
VARIABLE_NAME = re.compile(r"[^\W\d]\w*")
MAX_VARIABLE_NAME = 80


class Root(Enum):
    """Which document a path reads."""

    DATA = "$"
    CONTEXT = "$$"
    VARIABLE = "$var"


@dataclass(frozen=True)
class Path:
    """A parsed path: its text, root, the variable it reads (if any) and its JSONPath tree."""

    text: str
    root: Root
    variable: str | None
    expression: Any  # jsonpath-ng tree, relative to the root document (None for a definite path)
    steps: tuple[str | int, ...] | None  # the steps of a definite path, None if indefinite

    @property
    def definite(self) -> bool:
        """True if the path selects at most one value."""
        return self.steps is not None


class PathSyntaxError(ValueError):
    """A string is not a valid path; the message says why."""


def short_json(value: Any, limit: int = 200) -> str:
    """Compact JSON of `value` for error causes, cut to `limit` characters."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@functools.lru_cache(maxsize=1024)
def parse_path(text: str) -> Path:
    """Parse `text` as a States Language path. Raises PathSyntaxError naming the problem."""
    if not isinstance(text, str) or not text.startswith("$"):
        raise PathSyntaxError(f"{text!r} is not a path: a path starts with '$'")
    if text.startswith("$$"):
        root, variable, rest = Root.CONTEXT, None, text[2:]
    else:
        match = _VARIABLE.match(text)
        if match is not None:
            root, variable, rest = Root.VARIABLE, match.group(1), text[match.end():]
        else:
            root, variable, rest = Root.DATA, None, text[1:]
    if rest and rest[0] not in ".[":
        raise PathSyntaxError(f"{text!r} is not a path: expected '.' or '[' after {text[: len(text) - len(rest)]!r}")
    steps = _definite(rest)
    if steps is not None:  # parsed here: quoted keys with any characters, Jayway's (@.length-n)
        return Path(text, root, variable, None, steps)
    relative = _LENGTH_INDEX.sub(lambda match: f"[-{int(match.group(1))}]", rest)
    expression = _parse_jsonpath(text, "$" + relative)
    return Path(text, root, variable, expression, _definite_steps(expression))


# Jayway's script index `[(@.length-n)]`: the n-th element from the end (AWS accepts it).
_LENGTH_INDEX = re.compile(r"\[\s*\(\s*@\.length\s*-\s*(\d+)\s*\)\s*\]")
_DOT_NAME = re.compile(r"\.([^\s.\[\]()'\",*?@]+)")
_INDEX = re.compile(r"\[\s*(-?\d+)\s*\]")
_ESCAPES = {"'": "'", '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _definite(rest: str) -> tuple[str | int, ...] | None:
    """The steps of `rest` (a path after its root) when it is definite: `.name`, `['key']` /
    `["key"]` (with the escapes \\' \\" \\\\), `[n]`, `[(@.length-n)]`; None for anything else
    (wildcards, filters, slices, unions: jsonpath-ng parses those)."""
    steps: list[str | int] = []
    pos = 0
    while pos < len(rest):
        for pattern in (_DOT_NAME, _INDEX, _LENGTH_INDEX):
            match = pattern.match(rest, pos)
            if match is not None:
                value = match.group(1)
                steps.append(value if pattern is _DOT_NAME else
                             int(value) if pattern is _INDEX else -int(value))
                pos = match.end()
                break
        else:
            quoted = _quoted_key(rest, pos)
            if quoted is None:
                return None
            key, pos = quoted
            steps.append(key)
    return tuple(steps)


def _quoted_key(rest: str, pos: int) -> tuple[str, int] | None:
    """`['key']` or `["key"]` at `pos`: the key and the position after `]`, or None."""
    if not rest.startswith("[", pos) or pos + 1 >= len(rest) or rest[pos + 1] not in "'\"":
        return None
    quote, i, chars = rest[pos + 1], pos + 2, []
    while i < len(rest):
        char = rest[i]
        if char == "\\":
            escaped = _ESCAPES.get(rest[i + 1:i + 2])
            if escaped is None:
                return None
            chars.append(escaped)
            i += 2
            continue
        if char == quote:
            return ("".join(chars), i + 2) if rest[i + 1:i + 2] == "]" else None
        chars.append(char)
        i += 1
    return None


def _parse_jsonpath(text: str, relative: str) -> Any:
    """The jsonpath-ng tree for `relative` (`$…`); PathSyntaxError if it does not parse."""
    from jsonpath_ng.exceptions import JSONPathError
    from jsonpath_ng.ext import parse

    try:
        return parse(relative)
    except (JSONPathError, Exception) as error:  # the ply lexer raises plain Exceptions too
        raise PathSyntaxError(f"{text!r} is not a valid JSONPath: {error}") from None


def _definite_steps(node: Any) -> tuple[str | int, ...] | None:
    """The steps of a definite path tree, or None if the tree may select several values."""
    from jsonpath_ng.jsonpath import Child, Fields, Index, Root as JRoot

    if isinstance(node, JRoot):
        return ()
    if isinstance(node, Child):
        left = _definite_steps(node.left)
        if left is None:
            return None
        right = node.right
        if isinstance(right, Fields) and len(right.fields) == 1 and right.fields[0] != "*":
            return (*left, right.fields[0])
        if isinstance(right, Index) and len(right.indices) == 1:
            return (*left, right.indices[0])
    return None


def reference_path_problem(text: object, *, allow_context: bool = True, allow_variables: bool = True) -> str | None:
    """Why `text` is not a valid reference path (a definite path), or None if it is."""
    if not isinstance(text, str):
        return "must be a reference path string starting with '$'"
    try:
        path = parse_path(text)
    except PathSyntaxError as error:
        return str(error)
    if not path.definite:
        return (f"{text!r} is not a reference path: it must select a single value "
                "(only .name, ['name'] and [index] steps)")
    if path.root is Root.CONTEXT and not allow_context:
        return f"{text!r}: the context object ('$$') cannot be used here"
    if path.root is Root.VARIABLE and not allow_variables:
        return f"{text!r}: variables cannot be used here"
    if any(isinstance(step, int) and step < 0 for step in path.steps or ()):
        return f"{text!r} is not a reference path: negative indices are not allowed"
    return None


def path_problem(text: object) -> str | None:
    """Why `text` is not a valid path, or None if it is."""
    if not isinstance(text, str):
        return "must be a path string starting with '$'"
    try:
        parse_path(text)
    except PathSyntaxError as error:
        return str(error)
    return None


# ---------------------------------------------------------------------------------------------
# Selection.
# ---------------------------------------------------------------------------------------------


def root_document(path: Path, data: Any, context: Any, variables: Mapping[str, Any]) -> Any:
    """The document `path` starts from. Raises StatesRuntimeError for an unknown variable."""
    if path.root is Root.DATA:
        return data
    if path.root is Root.CONTEXT:
        return context
    if path.variable is None or path.variable not in variables:
        raise StatesRuntimeError(RUNTIME, f"The variable '${path.variable}' (in {path.text!r}) is not defined")
    return variables[path.variable]


def walk(document: Any, steps: tuple[str | int, ...]) -> Any:
    """The value definite `steps` select in `document`, or MISSING."""
    for step in steps:
        if isinstance(step, str):
            if not isinstance(document, Mapping) or step not in document:
                return MISSING
        else:
            if not isinstance(document, list) or not -len(document) <= step < len(document):
                return MISSING
        document = document[step]
    return document


def select(text: str, data: Any, context: Any = None, variables: Mapping[str, Any] | None = None,
           *, field: str = "path") -> Any:
    """The value path `text` selects: one value for a definite path, a list for an indefinite one.

    Raises StatesRuntimeError(States.Runtime) when a definite path selects nothing, names an
    undefined variable, or is not a valid path; `field` names the field in the cause.
    """
    try:
        path = parse_path(text)
    except PathSyntaxError as error:
        raise StatesRuntimeError(RUNTIME, f"Invalid path in field '{field}': {error}") from None
    document = root_document(path, data, context, variables or {})
    if path.steps is not None:
        value = walk(document, path.steps)
        if value is MISSING:
            raise StatesRuntimeError(RUNTIME, not_found_cause(text, path.steps, document, field))
        return value
    return _find(path.expression, document, document)


MAX_CAUSE = 32_768  # Step Functions' longest cause


def not_found_cause(text: str, steps: tuple[str | int, ...], document: Any, field: str) -> str:
    """AWS's cause for a definite path that selects nothing: a payload template's `key.$` names
    the key and the input; any other field (InputPath, OutputPath, ItemsPath, ...) gets Jayway's
    "No results for path" with the normalized path."""
    if field.endswith(".$"):
        key = field[:-2].rsplit(".", 1)[-1] + ".$"
        cause = (f"The JSONPath '{text}' specified for the field '{key}' could not be found in the input "
                 f"'{short_json(document, MAX_CAUSE)}'")
    else:
        normalized = "$" + "".join(f"[{step}]" if isinstance(step, int) else f"['{step}']" for step in steps)
        cause = f"Invalid path '{text}' : No results for path: {normalized}"
    return cause[:MAX_CAUSE]


def _find(node: Any, value: Any, root: Any) -> list[Any]:
    """All values tree `node` selects from `value` (Jayway semantics for the common nodes)."""
    from jsonpath_ng import jsonpath as jp

    if isinstance(node, jp.Root):
        return [root]
    if isinstance(node, jp.This):
        return [value]
    if isinstance(node, jp.Child):
        return [found for left in _find(node.left, value, root) for found in _find(node.right, left, root)]
    if isinstance(node, jp.Fields):
        return _fields(node.fields, value)
    if isinstance(node, jp.Index):
        if not isinstance(value, list):
            return []
        return [value[i] for i in node.indices if -len(value) <= i < len(value)]
    if isinstance(node, jp.Slice):
        if isinstance(value, list):
            return value[node.start:node.end:node.step]
        whole = node.start is None and node.end is None and node.step is None
        return list(value.values()) if whole and isinstance(value, Mapping) else []
    if isinstance(node, jp.Descendants):
        return [found for left in _find(node.left, value, root)
                for inner in _descend(left) for found in _find(node.right, inner, root)]
    # Filters, unions and the rest: jsonpath-ng's own evaluation.
    return [match.value for match in node.find(jp.DatumInContext(value))]


def _fields(names: tuple[str, ...], value: Any) -> list[Any]:
    """The members `names` select in `value` (`*` selects every member or element)."""
    if isinstance(value, Mapping):
        found: list[Any] = []
        for name in names:
            if name == "*":
                found.extend(value.values())
            elif name in value:
                found.append(value[name])
        return found
    if isinstance(value, list) and "*" in names:
        return list(value)
    return []


def _descend(value: Any) -> list[Any]:
    """`value` and every value nested in it, parents before children."""
    out = [value]
    if isinstance(value, Mapping):
        for member in value.values():
            out.extend(_descend(member))
    elif isinstance(value, list):
        for element in value:
            out.extend(_descend(element))
    return out


# ---------------------------------------------------------------------------------------------
# ResultPath.
# ---------------------------------------------------------------------------------------------


def write(data: Any, text: str | None, value: Any) -> Any:
    """`data` with `value` placed at reference path `text` (ResultPath semantics); `data` is not
    modified. `$` replaces the whole input; None discards `value` and returns `data`.

    Missing objects along the path are created. Raises StatesRuntimeError
    (States.ResultPathMatchFailure) when a step meets a value that is not an object (or, for an
    index step, a list long enough).
    """
    if text is None:
        return data
    problem = reference_path_problem(text, allow_context=False, allow_variables=False)
    if problem is not None:
        raise StatesRuntimeError(RESULT_PATH_MATCH_FAILURE, f"Invalid ResultPath: {problem}")
    steps = parse_path(text).steps or ()
    return _write(data, steps, value, text, data)


def _write(node: Any, steps: tuple[str | int, ...], value: Any, text: str, data: Any) -> Any:
    """A copy of `node` with `value` placed at `steps` (copying only along the path)."""
    if not steps:
        return value
    step, rest = steps[0], steps[1:]
    if isinstance(step, str):
        if not isinstance(node, Mapping):
            # The wording AWS executions report for a ResultPath step under a non-object.
            raise StatesRuntimeError(RESULT_PATH_MATCH_FAILURE,
                                     f'Unable to apply step "{step}" to input {short_json(data, limit=1 << 20)}')
        copy = dict(node)
        copy[step] = _write(node.get(step, {}) if rest else None, rest, value, text, data)
        return copy
    if not isinstance(node, list) or step >= len(node):
        raise StatesRuntimeError(
            RESULT_PATH_MATCH_FAILURE,
            f"Unable to apply ResultPath {text!r} to input {short_json(data)!r}: "
            f"index [{step}] is not in an array that long",
        )
    copy_list = list(node)
    copy_list[step] = _write(node[step], rest, value, text, data)
    return copy_list
