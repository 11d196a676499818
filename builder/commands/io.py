"""Helpers every command shares: reading `--input`, printing results as strict JSON, UTC times,
the program's name and commands to suggest to the user."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from unum_entry.errors import UnumError

from builder.program import command_line as command_line  # the commands' helpers; their home is builder.program
from builder.program import program_name as program_name


def parse_input(raw: str, option: str = "--input") -> Any:
    """`--input` (or `option`) is JSON text, or @file holding JSON."""
    if raw.startswith("@"):
        path = Path(raw[1:])
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UnumError(f"{option} {path}: cannot read: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise UnumError(f"{option} {path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                            f"{exc.start}); JSON files are UTF-8") from exc
        source = f"{option} {path}"
    else:
        source = option
    if not raw.strip():
        raise UnumError(f"{source}: empty (expected JSON; null for no input)")
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
        if _depth(value) > MAX_DEPTH:
            raise RecursionError
        return value
    except json.JSONDecodeError as exc:
        raise UnumError(f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    except ValueError as exc:
        raise UnumError(f"{source}: {exc}") from exc
    except RecursionError as exc:
        raise UnumError(f"{source}: nested more than {MAX_DEPTH} levels deep (arrays and objects); a workflow "
                        f"input may nest at most {MAX_DEPTH} deep") from exc


MAX_DEPTH = 500  # a value nested deeper cannot be stored (msgpack's limit is 512) nor sent as a Lambda event


def _depth(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (list, dict)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def to_json(value: Any, compact: bool) -> str:
    """Results as strict JSON, non-ASCII text as itself (UTF-8 on output, not \\u escapes). Bytes
    print as {"$bytes": base64}; NaN/Infinity are refused."""
    def default(obj: Any) -> Any:
        if isinstance(obj, (bytes, bytearray)):
            return {"$bytes": base64.b64encode(obj).decode()}
        raise TypeError(f"{type(obj).__name__} is not JSON")

    try:
        return json.dumps(value, indent=None if compact else 2, allow_nan=False, default=default, ensure_ascii=False)
    except ValueError as exc:
        raise UnumError(f"the workflow result cannot be printed as JSON: {exc}") from exc


def utc(epoch: int) -> str:
    from datetime import UTC, datetime
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
