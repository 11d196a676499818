"""A Map state's numeric settings resolved at run time, refused with Step Functions' own errors.

`MaxConcurrency(Path)`, `ToleratedFailureCount(Path)`, `ToleratedFailurePercentage(Path)`, the
ItemBatcher's `MaxItemsPerBatch(Path)` / `MaxInputBytesPerBatch(Path)` and the ItemReader's
`MaxItems(Path)` may come from the state input (a `…Path`) or, in JSONata, from an expression.
A literal is checked at compile time; a value found at run time is checked here, as AWS does:
- a count (concurrency, tolerated count, batch sizes) must be an integer >= 0; a string holding
  an integer counts as that integer (AWS parses it); anything else fails the state with
  `States.Runtime` and AWS's cause (`The MaxConcurrencyPath field refers to value "x" which is
  not a valid integer: $.p`, `Expected non-negative integer for MaxConcurrency, got '-1' instead.`,
  `ToleratedFailureCount cannot be negative.`);
- a tolerated percentage must be a number from 0 to 100 (`… which is not a valid float: $.p`,
  `ToleratedFailurePercentage must be between 0 and 100.`);
- the reader's MaxItems failing either way is `States.ItemReaderFailed` (AWS fails the map run,
  not the state's evaluation): `The MaxItemsPath field refers to value 'x' which is not a valid
  integer: $.p`, `field MaxItems must be positive`.

Each function takes `resolve(key) -> value` (the field resolved against the state's effective
input) and returns the checked value, or the default when the state has neither field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from unum_entry.errors import StatesRuntimeError

Resolve = Callable[[str], Any]
RUNTIME, READER_FAILED = "States.Runtime", "States.ItemReaderFailed"


def max_concurrency(state: Mapping[str, Any], resolve: Resolve) -> int:
    """MaxConcurrency(Path): 0 (no limit) when absent."""
    key, value = _find(state, "MaxConcurrency", resolve)
    if key is None:
        return 0
    number = _integer(value, truncate=True)
    if number is None:
        raise StatesRuntimeError(RUNTIME, _not_valid(key, value, state[key], "integer"))
    if number < 0:
        raise StatesRuntimeError(RUNTIME, f"Expected non-negative integer for MaxConcurrency, got '{number}' instead.")
    return number


def tolerated(state: Mapping[str, Any], resolve: Resolve) -> dict[str, float]:
    """The tolerated failure limits the Map sets: {"ToleratedFailureCount": n,
    "ToleratedFailurePercentage": p} (either, both or none)."""
    limits: dict[str, float] = {}
    key, value = _find(state, "ToleratedFailureCount", resolve)
    if key is not None:
        count = _integer(value)
        if count is None:
            raise StatesRuntimeError(RUNTIME, _not_valid(key, value, state[key], "integer"))
        if count < 0:
            raise StatesRuntimeError(RUNTIME, "ToleratedFailureCount cannot be negative.")
        limits["ToleratedFailureCount"] = count
    key, value = _find(state, "ToleratedFailurePercentage", resolve)
    if key is not None:
        percentage = _integer(value) if isinstance(value, str) else value
        if isinstance(percentage, bool) or not isinstance(percentage, (int, float)):
            raise StatesRuntimeError(RUNTIME, _not_valid(key, value, state[key], "float"))
        if not 0 <= percentage <= 100:
            raise StatesRuntimeError(RUNTIME, "ToleratedFailurePercentage must be between 0 and 100.")
        limits["ToleratedFailurePercentage"] = float(percentage)
    return limits


def batch_limits(batcher: Mapping[str, Any], resolve: Resolve) -> tuple[int | None, int | None]:
    """(MaxItemsPerBatch, MaxInputBytesPerBatch) of an ItemBatcher; None where unset (0 also
    means no limit)."""
    found: list[int | None] = []
    for base in ("MaxItemsPerBatch", "MaxInputBytesPerBatch"):
        key, value = _find(batcher, base, resolve)
        if key is None:
            found.append(None)
            continue
        number = _integer(value)
        if number is None:
            raise StatesRuntimeError(RUNTIME, _not_valid(key, value, batcher[key], "integer"))
        if number < 0:
            raise StatesRuntimeError(RUNTIME, f"{base} cannot be negative.")
        found.append(number or None)
    return found[0], found[1]


def max_items(config: Mapping[str, Any], resolve: Resolve) -> int | None:
    """ReaderConfig.MaxItems(Path): None (all items) when absent or 0."""
    key, value = _find(config, "MaxItems", resolve)
    if key is None:
        return None
    number = _integer(value)
    if number is None:
        shown = value if isinstance(value, str) else _json(value)
        where = f": {config[key]}" if key.endswith("Path") else ""
        raise StatesRuntimeError(READER_FAILED, f"The {key} field refers to value '{shown}' which is not a "
                                                f"valid integer{where}")
    if number < 0:
        raise StatesRuntimeError(READER_FAILED, "field MaxItems must be positive")
    return number or None


def _find(state: Mapping[str, Any], base: str, resolve: Resolve) -> tuple[str | None, Any]:
    for key in (base, f"{base}Path"):
        if key in state:
            return key, resolve(key)
    return None, None


def _integer(value: Any, *, truncate: bool = False) -> int | None:
    """The integer a value stands for (an int, an integral float, a string of an integer;
    with `truncate` any number, as AWS takes MaxConcurrency), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and (truncate or value.is_integer()):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _not_valid(key: str, value: Any, template: Any, kind: str) -> str:
    shown = value if isinstance(value, str) else _json(value)
    where = f": {template}" if key.endswith("Path") else ""  # a JSONata expression's result: no path to name
    return f'The {key} field refers to value "{shown}" which is not a valid {kind}{where}'


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
