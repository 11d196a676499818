"""A workflow's execution history as one document (what `inspect --history --json` prints, the
web console's History tab, and the path `builder.runs.path` colours): the events numbered as a
Step Functions execution history (unum_entry.history; docs/history.md), its steps, and for a
compiled state machine its values as the states see them."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from unum_entry.history import History, Step
    from unum_entry.stores.base import Store

UNFINISHED = ("running", "waiting", "interrupted")  # statuses without an end (WorkflowStatus values)


def iso_ms(epoch_ms: int | None) -> str | None:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds (Step Functions' timestamps)."""
    if epoch_ms is None:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def machine_states(folder: str | None) -> dict[str, list[tuple[str, str, str]]]:
    """For a compiled state machine's workflow folder (or its state machine file): the states each
    function runs as `(name, Type, role)`, from its head following `Next` through Pass, Wait and
    Succeed states and the Task it hosts, up to another Task or a Map/Parallel it fans out (role
    "enter"); a join function starts with the Map/Parallel it completes (role "exit"). A Choice
    ends the walk (the rule taken is not recorded). Empty for a hand-written IR workflow or an
    unknown folder."""
    if not folder:
        return {}
    if Path(folder).is_file():  # a state machine run compiled on the fly: compile it again, aside
        return dict(_compiled_states(folder, Path(folder).stat().st_mtime_ns))
    return _folder_states(folder)


@lru_cache(maxsize=32)
def _compiled_states(path: str, _mtime: int) -> tuple[tuple[str, list[tuple[str, str, str]]], ...]:
    """`machine_states` of a state machine file, compiled once per version of the file (the UI
    redraws a run's history every second)."""
    import tempfile

    from builder.compiler import compile_state_machine
    from unum_entry.errors import UnumError

    with tempfile.TemporaryDirectory(prefix="unum-history-") as scratch:
        try:
            compile_state_machine(path, Path(scratch) / "machine")
        except (UnumError, OSError):
            return ()
        return tuple(_folder_states(str(Path(scratch) / "machine")).items())


def _folder_states(folder: str) -> dict[str, list[tuple[str, str, str]]]:
    """`machine_states` of a compiled workflow folder (each function's unum-asl.json)."""
    found: dict[str, list[tuple[str, str, str]]] = {}
    for path in sorted(Path(folder).glob("*/unum-asl.json")):
        try:
            doc = json.loads(path.read_text())
            states, name = doc["states"], doc["head"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        walk: list[tuple[str, str, str]] = []
        seen: set[str] = set()
        task_seen = False
        while isinstance(name, str) and name not in seen and isinstance(states.get(name), dict):
            seen.add(name)
            kind = str(states[name].get("Type"))
            if kind in ("Map", "Parallel"):
                if doc.get("join") and not walk:  # the join that completes it
                    walk.append((name, kind, "exit"))
                    name = states[name].get("Next")
                    continue
                walk.append((name, kind, "enter"))
                break
            if kind == "Task":
                if name != doc.get("task") or task_seen:
                    break
                task_seen = True
            elif kind not in ("Pass", "Wait", "Succeed"):
                break  # a Choice (or Fail): the rule it took is not recorded
            walk.append((name, kind, "both"))
            name = states[name].get("Next")
        found[str(doc.get("function", path.parent.name))] = walk
    return found


def state_view(value: Any) -> Any:
    """A compiled state machine's value as its states see it: the state input inside the
    runner's transfer object, the state output inside a function's decision (unum_entry.asl.
    runner); anything else as it is."""
    if isinstance(value, list):
        return [state_view(v) for v in value]
    if not isinstance(value, dict):
        return value
    if value.get("__unum_asl__") == 1 and "input" in value:
        return value["input"]
    if "__next__" in value:
        if "output" in value:
            return value["output"]
        if "error" in value:
            return value["error"]
        if isinstance(value.get("fanout"), dict):
            return value["fanout"].get("input")
        if isinstance(value.get("items"), list):
            return [state_view(item) for item in value["items"]]
        if isinstance(value.get("transfer"), dict):
            return value["transfer"].get("input")
    return value


def step_json(step: Step, history: History, by_key: dict[str, Step]) -> dict[str, Any]:
    from unum_entry.history import input_of

    shown: dict[str, Any] = {"key": step.key, "function": step.function,
                             "position": [list(f) for f in step.position], "attempts": step.attempts,
                             "started": iso_ms(step.started_ms), "committed": iso_ms(step.ended_ms),
                             "duration_ms": step.duration_ms, "input": input_of(step, by_key, history)}
    if len(step.position) > 1:
        shown["index"], shown["size"] = step.position[-1][0], step.position[-1][1]
    if step.failed_attempts:  # the attempts before the last, each retried (oldest first)
        shown["failed_attempts"] = [{"failed": iso_ms(at), "error": text} for at, text in step.failed_attempts]
    if step.error is not None:
        shown["error"] = step.error
    else:
        shown["output"] = step.output
    return shown


def history_document(store: Store, workflow_id: str, status: str, failure: dict[str, Any] | None,
                     folder: str | None) -> dict[str, Any]:
    """What `inspect --history --json` prints (also the UI's History tab)."""
    from unum_entry.history import events, read_history

    history = read_history(store, workflow_id)
    by_key = {s.key: s for s in history.steps}
    states = machine_states(folder)
    numbered = events(history, status, states=states, failure=failure)
    steps = [step_json(s, history, by_key) for s in history.steps]
    for event in numbered:
        event["timestamp"] = iso_ms(event["timestamp"])
        event.pop("key", None)
        event.pop("step", None)
    if states:  # a compiled state machine: show values as its states see them
        for shown in (*(e.get("details", {}) for e in numbered), *steps):
            for field in ("input", "output"):
                if field in shown:
                    shown[field] = state_view(shown[field])
    document = {"workflow": workflow_id, "status": status, "input": history.input,
                "started": iso_ms(history.started_ms),
                "ended": iso_ms(history.ended_ms) if status not in UNFINISHED else None,
                "duration_ms": history.duration_ms if status not in UNFINISHED else None,
                "events": numbered, "steps": steps}
    from unum_entry.durable_functions.history import durable_operations
    operations = durable_operations(store, workflow_id)  # Lambda durable functions (docs/durable-functions.md)
    if operations:
        for op in operations:
            op["started"], op["ended"] = iso_ms(op["started"]), iso_ms(op["ended"])
        document["durable"] = operations
    return document
