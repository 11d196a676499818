"""Helpers every command shares: reading `--input`, printing results as strict JSON, UTC times,
the program's name and commands to suggest to the user."""

from __future__ import annotations

import base64
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from unum_entry.errors import UnumError


def parse_input(raw: str, option: str = "--input") -> Any:
    """`--input` (or `option`) is JSON text, or @file holding JSON."""
    if raw.startswith("@"):
        path = Path(raw[1:])
        try:
            raw = path.read_text()
        except OSError as exc:
            raise UnumError(f"{option} {path}: cannot read: {exc.strerror or exc}") from exc
        source = f"{option} {path}"
    else:
        source = option
    if not raw.strip():
        raise UnumError(f"{source}: empty (expected JSON; null for no input)")
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise UnumError(f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    except ValueError as exc:
        raise UnumError(f"{source}: {exc}") from exc


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def to_json(value: Any, compact: bool) -> str:
    """Results as strict JSON. Bytes print as {"$bytes": base64}; NaN/Infinity are refused."""
    def default(obj: Any) -> Any:
        if isinstance(obj, (bytes, bytearray)):
            return {"$bytes": base64.b64encode(obj).decode()}
        raise TypeError(f"{type(obj).__name__} is not JSON")

    try:
        return json.dumps(value, indent=None if compact else 2, allow_nan=False, default=default)
    except ValueError as exc:
        raise UnumError(f"the workflow result cannot be printed as JSON: {exc}") from exc


def utc(epoch: int) -> str:
    from datetime import UTC, datetime
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def program_name(argv0: str | None = None) -> str:
    """How the user started us: `unum` (the console script) or `python -m builder`."""
    name = Path(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")).name
    return "python -m builder" if name in ("__main__.py", "", "-c") else name


def command_line(*words: str) -> str:
    """A command the user can paste: our program name, then `words` shell-quoted."""
    return " ".join([program_name(), *(shlex.quote(w) for w in words)])
