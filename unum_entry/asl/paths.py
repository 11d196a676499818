"""JSONPath paths of the States Language: Step Functions' wording over the one selector, and
ResultPath writes.

A *path* (InputPath, OutputPath, `.$` template values, ItemsPath, SecondsPath, ...) is parsed and
selected by `unum_entry.jsonpath` (Jayway semantics, roots `$`, `$$` and `$name`): a *definite*
path selects one value, and selecting nothing is Step Functions' `States.Runtime` error; an
*indefinite* path selects a list, possibly empty. A *reference path* (ResultPath, Choice
`Variable`) must be definite; ResultPath must also start at `$`. This module words failures as
Step Functions does and writes ResultPath.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from unum_entry.errors import StatesRuntimeError
from unum_entry.jsonpath import (
    MISSING, VARIABLE_NAME, Path, PathSyntaxError, Root, document as root_document, find, parse_path, walk,
)

__all__ = ["MAX_VARIABLE_NAME", "MISSING", "RESULT_PATH_MATCH_FAILURE", "RUNTIME", "VARIABLE_NAME", "Path",
           "PathSyntaxError", "Root", "not_found_cause", "parse_path", "path_problem", "reference_path_problem",
           "select", "short_json", "write"]

RUNTIME = "States.Runtime"
RESULT_PATH_MATCH_FAILURE = "States.ResultPathMatchFailure"
MAX_VARIABLE_NAME = 80


def short_json(value: Any, limit: int = 200) -> str:
    """Compact JSON of `value` for error causes, cut to `limit` characters."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
    start = root_document(path, data, context, variables or {})
    if start is MISSING:
        raise StatesRuntimeError(RUNTIME, f"The variable '${path.variable}' (in {path.text!r}) is not defined")
    if path.steps is not None:
        value = walk(start, path.steps)
        if value is MISSING:
            raise StatesRuntimeError(RUNTIME, not_found_cause(text, path.steps, start, field))
        return value
    return find(path, start)


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
