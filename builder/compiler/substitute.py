"""SAM's `DefinitionSubstitutions` for state machine files: `${Key}` placeholders and
CloudFormation intrinsic objects replaced by values given on the command line.

As CloudFormation does, a `${Key}` placeholder is replaced in the definition's *text* before it
is parsed, so `"Resource": "${DoubleArn}"` and an unquoted `"Seconds": ${Wait}` both work; a
placeholder without a value is left as it is (validation then names the state and field).
After parsing, an intrinsic object (`{"Ref": "Fn"}`, `{"Fn::GetAtt": ["Fn", "Arn"]}`,
`{"Fn::Sub": "...${Fn}..."}`) whose value is known (keys `Fn`, `Fn.Arn`) becomes that string.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from unum_entry.errors import UnumError

_KEY = re.compile(r"[A-Za-z0-9_.:-]+")
_PLACEHOLDER = re.compile(r"\$\{([^{}]*)\}")


class SubstitutionError(UnumError):
    """A `--substitution` argument is not KEY=VALUE."""


def parse_substitutions(items: Iterable[str] | None) -> dict[str, str]:
    """`KEY=VALUE` arguments as a dict (a later KEY wins). Raises SubstitutionError."""
    found: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not _KEY.fullmatch(key):
            raise SubstitutionError(f"--substitution {item!r}: expected KEY=VALUE with KEY made of letters, digits, "
                                    "'_', '.', ':' or '-' (as in SAM's DefinitionSubstitutions)")
        found[key] = value
    return found


def substitute_text(text: str, values: Mapping[str, str]) -> str:
    """`text` with every `${Key}` that has a value replaced by it (others left in place)."""
    if not values:
        return text
    return _PLACEHOLDER.sub(lambda match: values.get(match.group(1), match.group(0)), text)


def resolve_intrinsics(doc: Any, values: Mapping[str, str]) -> Any:
    """`doc` with every CloudFormation intrinsic object whose value is known replaced by it."""
    if isinstance(doc, list):
        return [resolve_intrinsics(item, values) for item in doc]
    if not isinstance(doc, Mapping):
        return doc
    if len(doc) == 1:
        (key, arg), = doc.items()
        resolved = _intrinsic_value(key, arg, values)
        if resolved is not None:
            return resolved
    return {key: resolve_intrinsics(item, values) for key, item in doc.items()}


def _intrinsic_value(key: str, arg: Any, values: Mapping[str, str]) -> str | None:
    if key == "Ref" and isinstance(arg, str):
        return values.get(arg)
    if key == "Fn::GetAtt":
        if isinstance(arg, list) and len(arg) == 2 and all(isinstance(a, str) for a in arg):
            return values.get(f"{arg[0]}.{arg[1]}")
        if isinstance(arg, str):
            return values.get(arg)
    if key == "Fn::Sub" and isinstance(arg, str):
        text = substitute_text(arg, values)
        return None if _PLACEHOLDER.search(text) else text
    return None
