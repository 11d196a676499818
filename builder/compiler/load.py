"""Reading a state machine definition (JSON or YAML) into a plain dict."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builder.compiler.substitute import resolve_intrinsics, substitute_text
from unum_entry.errors import AslDefinitionError

STATE_MACHINE_SUFFIXES = (".json", ".yaml", ".yml")
DEFAULT_NAMES = ("statemachine.json", "statemachine.asl.json", "statemachine.yaml", "statemachine.yml",
                 "statemachine.asl.yaml", "definition.json", "definition.asl.json")


def find_definition(folder: Path) -> Path | None:
    """The state machine file in a folder (statemachine.json / .asl.json / .yaml ...), if any."""
    for name in DEFAULT_NAMES:
        if (folder / name).is_file():
            return folder / name
    found = sorted(folder.glob("*.asl.json")) + sorted(folder.glob("*.asl.yaml"))
    return found[0] if found else None


def load_definition(path: Path, substitutions: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Parse the file, `${Key}` placeholders and CloudFormation intrinsics replaced from
    `substitutions` (see `substitute`); raises AslDefinitionError naming the file (and line)
    when it cannot be read."""
    source = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise AslDefinitionError(source, None, "<file>", f"cannot read: {exc.strerror or exc}") from exc
    values = dict(substitutions or {})
    text = substitute_text(text, values)
    if path.suffix in (".yaml", ".yml"):
        import yaml  # type: ignore[import-untyped]  # lazy: only YAML definitions need it

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            raise AslDefinitionError(source, None, "<file>", f"not valid YAML{where}: {getattr(exc, 'problem', exc)}") from exc
    else:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            hint = " (an unquoted ${…} placeholder needs --substitution KEY=VALUE)" if "${" in text else ""
            raise AslDefinitionError(source, None, "<file>",
                                     f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}){hint}") from exc
    if not isinstance(doc, dict):
        raise AslDefinitionError(source, None, "<root>", f"expected an object with StartAt and States, found {type(doc).__name__}")
    resolved: dict[str, Any] = resolve_intrinsics(doc, values)
    return resolved
