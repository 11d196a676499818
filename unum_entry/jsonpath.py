r"""JSONPath as Step Functions reads it: the one parser and selector of every path in unum.

Choice rules and IR paths (`conditions.py`) and the States Language's InputPath, OutputPath,
`.$` templates, ItemsPath, ResultPath ... (`asl/paths.py`) all parse and select here. This module
lives outside `asl/` because plain IR workflows use it too; it knows no error wording of its
callers: a path that does not parse raises PathSyntaxError, a path that selects nothing gives
MISSING, and each caller words that as its platform does.

Semantics are Jayway's (the library Step Functions runs):
* a *definite* path (only `.name`, `['name']` / `["name"]`, `[index]` and Jayway's
  `[(@.length-n)]` steps) selects one value or nothing;
* an *indefinite* path (wildcards, slices, unions, filters, `..`) selects a list, possibly empty;
* every path starts at one of three roots: `$` the data, `$$` the context object, `$name` a
  workflow variable (`$name.field[0]` selects inside it);
* inside a quoted key a backslash escapes the key's own quote and `\\`, `\/`, `\b`, `\f`, `\n`,
  `\r`, `\t`; a backslash before the *other* quote is literal, both characters are kept
  (`$['Test\""Name"']` reads the key `Test\""Name"`), as AWS does.

jsonpath-ng (`jsonpath_ng.ext`, imported on first use) parses what the definite grammar does
not; selection walks its tree here, because jsonpath-ng's own `find` indexes into strings and
treats an object as a one-element list.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

MISSING: Any = object()  # sentinel: a definite path selected nothing

# A variable name is a Unicode identifier (UAX #31: ID_Start then ID_Continue); Python's `\w`
# classes approximate that closely enough for the names people write.
_VARIABLE = re.compile(r"\$([^\W\d]\w*)")
VARIABLE_NAME = re.compile(r"[^\W\d]\w*")


class Root(Enum):
    """Which document a path reads."""

    DATA = "$"
    CONTEXT = "$$"
    VARIABLE = "$var"


@dataclass(frozen=True, slots=True)
class Path:
    """A parsed path: its text, root, the variable it reads (if any) and its steps or tree."""

    text: str
    root: Root
    variable: str | None
    expression: Any  # jsonpath-ng tree relative to the root document; None for a definite path
    steps: tuple[str | int, ...] | None  # the steps of a definite path, None if indefinite

    @property
    def definite(self) -> bool:
        """True if the path selects at most one value."""
        return self.steps is not None


class PathSyntaxError(ValueError):
    """A string is not a valid path. `str()` names the path; `reason` is the why alone."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@functools.lru_cache(maxsize=1024)
def parse_path(text: str) -> Path:
    """Parse `text` as a path. Raises PathSyntaxError naming the problem."""
    if not isinstance(text, str) or not text.startswith("$"):
        raise PathSyntaxError(f"{text!r} is not a path: a path starts with '$'", "a path starts with '$'")
    if text.startswith("$$"):
        root, variable, rest = Root.CONTEXT, None, text[2:]
    else:
        match = _VARIABLE.match(text)
        if match is not None:
            root, variable, rest = Root.VARIABLE, match.group(1), text[match.end():]
        else:
            root, variable, rest = Root.DATA, None, text[1:]
    if rest and rest[0] not in ".[":
        reason = f"expected '.' or '[' after {text[: len(text) - len(rest)]!r}"
        raise PathSyntaxError(f"{text!r} is not a path: {reason}", reason)
    steps = _definite(rest)
    if steps is not None:  # parsed here: quoted keys with any characters, Jayway's (@.length-n)
        return Path(text, root, variable, None, steps)
    relative = _LENGTH_INDEX.sub(lambda match: f"[-{int(match.group(1))}]", rest)
    expression = _parse_jsonpath(text, "$" + relative)
    return Path(text, root, variable, expression, _definite_steps(expression))


# Jayway's script index `[(@.length-n)]`: the n-th element from the end (AWS accepts it).
_LENGTH_INDEX = re.compile(r"\[\s*\(\s*@\.length\s*-\s*(\d+)\s*\)\s*\]")
# A dot name may hold `$` or a backtick, but not start with one: `.$` and `` .`parent` `` are
# jsonpath-ng's root and parent operators, which select other than one named member.
_DOT_NAME = re.compile(r"\.([^\s.\[\]()'\",*?@$`][^\s.\[\]()'\",*?@]*)")
_INDEX = re.compile(r"\[\s*(-?\d+)\s*\]")
_ESCAPES = {"\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_QUOTES = "'\""


def _definite(rest: str) -> tuple[str | int, ...] | None:
    """The steps of `rest` (a path after its root) when it is definite: `.name`, `['key']` /
    `["key"]`, `[n]`, `[(@.length-n)]`; None for anything else (wildcards, filters, slices,
    unions: jsonpath-ng parses those)."""
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
    if not rest.startswith("[", pos) or pos + 1 >= len(rest) or rest[pos + 1] not in _QUOTES:
        return None
    quote, i, chars = rest[pos + 1], pos + 2, []
    while i < len(rest):
        char = rest[i]
        if char == "\\":
            following = rest[i + 1:i + 2]
            if following == quote:
                chars.append(quote)
            elif following and following in _QUOTES:
                chars.append(char + following)  # AWS keeps a backslash before the other quote
            elif following in _ESCAPES:
                chars.append(_ESCAPES[following])
            else:
                return None
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
        raise PathSyntaxError(f"{text!r} is not a valid JSONPath: {error}", str(error)) from None


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


# ---------------------------------------------------------------------------------------------
# Selection.
# ---------------------------------------------------------------------------------------------


def document(path: Path, data: Any, context: Any, variables: Mapping[str, Any]) -> Any:
    """The document `path` starts from: `data`, `context` or its variable; MISSING for a
    variable that is not in `variables`."""
    if path.root is Root.DATA:
        return data
    if path.root is Root.CONTEXT:
        return context
    return variables.get(path.variable or "", MISSING)


def walk(value: Any, steps: tuple[str | int, ...]) -> Any:
    """The value definite `steps` select in `value` (a negative index counts from the end),
    or MISSING."""
    for step in steps:
        if isinstance(step, str):
            if not isinstance(value, Mapping) or step not in value:
                return MISSING
        elif not isinstance(value, (list, tuple)) or not -len(value) <= step < len(value):
            return MISSING
        value = value[step]
    return value


def lookup(path: Path, data: Any, context: Any, variables: Mapping[str, Any]) -> Any:
    """The value definite `path` selects, or MISSING (also for an undefined variable)."""
    start = document(path, data, context, variables)
    return MISSING if start is MISSING else walk(start, path.steps or ())


def find(path: Path, start: Any) -> list[Any]:
    """Every value indefinite `path` selects in `start` (its root document), in Jayway's order."""
    return _find(path.expression, start, start)


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
