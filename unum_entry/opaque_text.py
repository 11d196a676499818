"""Opaque texts handed to users that name a record of ours: task tokens (unum_entry.task_tokens)
and durable callback ids (unum_entry.durable_functions.callback_ids). One form for both: a
prefix naming the kind and version, then the unpadded base64url of a compact JSON list."""

from __future__ import annotations

import base64
import json
from typing import Any


def opaque_text(prefix: str, fields: list[Any]) -> str:
    """`prefix` followed by `fields` as compact JSON, base64url-encoded without padding."""
    raw = json.dumps(fields, separators=(",", ":"))
    return prefix + base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def opaque_fields(prefix: str, text: Any) -> Any:
    """The JSON value inside an `opaque_text(prefix, ...)`. Raises ValueError (also as its
    subclass UnicodeDecodeError) or TypeError for anything else; callers turn that into their
    own one-line refusal."""
    if not isinstance(text, str) or not text.startswith(prefix):
        raise ValueError(f"not prefixed {prefix!r}")
    body = text[len(prefix):]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
