"""Nested state machines: a `states:startExecution.sync` / `.sync:2` Task runs its child on unum.

The child definition is compiled together with its parent, without a coordinator: the Task becomes
a fan-out to one branch holding the child's states (renamed `Task.State`, so they cannot collide
with the parent's), marked `"__unum_nested__"` so that the runner (unum_entry/asl/nested.py)
gives the branch the child's own execution (`$$.Execution`, no variables of the parent) and the
join turns the child's end into AWS's result shape (`.sync`: Input/Output as JSON text, `.sync:2`:
as JSON) or its failure into `States.TaskFailed`. The parent waits as a Parallel waits for its
branches: the fan-in completes the Task exactly once, whatever is redelivered.

The child is found by the last part of `Parameters.StateMachineArn` (an ARN or a name, given
literally) next to the parent's file: `NAME.asl.json`, `NAME.json`, `NAME.asl.yaml`, `NAME.yaml`,
`NAME.yml`, or a folder `NAME/` holding a state machine. A child may nest its own children; a
cycle is refused. The Task's TimeoutSeconds(Path) is kept in the marker (its timer fails the Task
with States.Timeout when the child has not ended by then); so is HeartbeatSeconds(Path): AWS applies
it to the job-run (.sync) pattern, and as nothing can send a .sync Task a heartbeat here, a child
still running after it fails the Task with States.HeartbeatTimeout.

A fire-and-forget `states:startExecution` Task (no `.sync`) stays a Task, marked
`"__unum_detached__"` (unum_entry/asl/detached.py): its child is collected in `detached` and
compiled by the caller into the same folder as a state machine of its own (states renamed
`CHILD.STATE`), which the Task starts as its own workflow without waiting for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.compiler.load import find_definition, load_definition
from unum_entry.asl import detached as detached_start
from unum_entry.asl.nested import MARK, SYNC_RESOURCES
from unum_entry.errors import AslDefinitionError

# The Task's fields that keep their meaning on the fan-out that replaces it.
KEPT = ("Comment", "QueryLanguage", "Assign", "Next", "End", "InputPath", "OutputPath", "Parameters", "ResultPath",
        "ResultSelector", "Retry", "Catch", "Arguments", "Output")
SUFFIXES = (".asl.json", ".json", ".asl.yaml", ".yaml", ".yml")


@dataclass
class DetachedChild:
    """A state machine that fire-and-forget Tasks start: its definition with renamed states, where
    it was found, and the Tasks' markers (the caller sets their `entry` once it is compiled)."""

    name: str
    definition: dict[str, Any]
    path: Path
    markers: list[dict[str, Any]] = field(default_factory=list)


def inline_children(doc: dict[str, Any], path: Path, substitutions: Mapping[str, str] | None = None,
                    seen: tuple[str, ...] = (), detached: dict[str, DetachedChild] | None = None) -> dict[str, Any]:
    """`doc` with every `startExecution.sync(:2)` Task replaced by its child's inlined states; the
    children of fire-and-forget `startExecution` Tasks are added to `detached` (None: refused)."""
    return _scope(doc, path, substitutions, seen, "", detached)


def _scope(definition: Any, path: Path, substitutions: Mapping[str, str] | None, seen: tuple[str, ...],
           where: str, detached: dict[str, DetachedChild] | None) -> Any:
    if not isinstance(definition, Mapping) or not isinstance(definition.get("States"), Mapping):
        return definition  # the validator names what is wrong
    states = {name: _state(name, state, path, substitutions, seen, where, detached)
              for name, state in definition["States"].items()}
    return {**definition, "States": states}


def _state(name: str, state: Any, path: Path, substitutions: Mapping[str, str] | None, seen: tuple[str, ...],
           where: str, detached: dict[str, DetachedChild] | None) -> Any:
    if not isinstance(state, Mapping):
        return state
    full = f"{where}{name}"
    state = dict(state)
    if isinstance(state.get("Branches"), list):
        state["Branches"] = [_scope(b, path, substitutions, seen, f"{full}/Branches[{i}]/", detached)
                             for i, b in enumerate(state["Branches"])]
    for key in ("ItemProcessor", "Iterator"):
        if key in state:
            state[key] = _scope(state[key], path, substitutions, seen, f"{full}/{key}/", detached)
    resource = state.get("Resource")
    if state.get("Type") == "Task" and resource == detached_start.RESOURCE and detached is not None:
        return _detached(name, state, path, substitutions, seen, full, detached)
    if state.get("Type") != "Task" or not isinstance(resource, str) or resource not in SYNC_RESOURCES:
        return state
    arn, child_name, child_path = _child(state, path, seen, full)
    child = inline_children(load_definition(child_path, substitutions), child_path, substitutions, (*seen, child_name),
                            detached)
    branch = _renamed(child, f"{name}.")
    if "QueryLanguage" in child:
        branch["QueryLanguage"] = child["QueryLanguage"]
    replaced = {key: value for key, value in state.items() if key in KEPT}
    # The Task's TimeoutSeconds(Path) and HeartbeatSeconds(Path) travel in the marker (a Parallel
    # has none): the runner arms a timer for the earlier (unum_entry/asl/timing.py: nested_due).
    timeout = {key: state[key] for key in ("TimeoutSeconds", "TimeoutSecondsPath", "HeartbeatSeconds",
                                           "HeartbeatSecondsPath") if key in state}
    replaced.update(Type="Parallel", Branches=[branch], **{MARK: {
        "Resource": resource, "StateMachineArn": arn, "StateMachine": child_name, **timeout}})
    return replaced


def _detached(name: str, state: dict[str, Any], path: Path, substitutions: Mapping[str, str] | None,
              seen: tuple[str, ...], full: str, detached: dict[str, DetachedChild]) -> dict[str, Any]:
    """A fire-and-forget startExecution Task: marked, its child collected (compiled once however
    many Tasks start it)."""
    arn, child_name, child_path = _child(state, path, seen, full)
    if child_name not in detached:
        child = inline_children(load_definition(child_path, substitutions), child_path, substitutions,
                                (*seen, child_name), detached)
        renamed = _renamed(child, f"{child_name}.")
        for key in ("QueryLanguage", "TimeoutSeconds"):
            if key in child:
                renamed[key] = child[key]
        detached[child_name] = DetachedChild(child_name, renamed, child_path)
    marker = {"StateMachineArn": arn, "StateMachine": child_name, "state": name}
    detached[child_name].markers.append(marker)
    return {**state, detached_start.MARK: marker}


def _child(state: Mapping[str, Any], path: Path, seen: tuple[str, ...], full: str) -> tuple[str, str, Path]:
    """(the StateMachineArn as given, the child's name, its definition file) of a startExecution Task."""
    parameters = state.get("Parameters", state.get("Arguments"))
    field_name = "Parameters" if "Parameters" in state else "Arguments"
    arn = parameters.get("StateMachineArn") if isinstance(parameters, Mapping) else None
    if not isinstance(arn, str) or not arn or arn.startswith("{%"):
        raise AslDefinitionError(str(path), full, f"{field_name}.StateMachineArn",
                                 "a nested state machine must be named literally (an ARN or a name): the child is "
                                 "compiled with its parent, so it cannot be chosen at run time")
    child_name = arn.rsplit(":", 1)[-1]
    if child_name in seen:
        raise AslDefinitionError(str(path), full, f"{field_name}.StateMachineArn",
                                 f"state machine {child_name!r} starts itself ({' -> '.join((*seen, child_name))})")
    child_path = _find(path.parent, child_name)
    if child_path is None:
        raise AslDefinitionError(str(path), full, f"{field_name}.StateMachineArn",
                                 f"no definition of state machine {child_name!r} next to {path.name} (looked for "
                                 f"{', '.join(child_name + s for s in SUFFIXES)} and {child_name}/)")
    return arn, child_name, child_path


def _find(folder: Path, name: str) -> Path | None:
    for suffix in SUFFIXES:
        if (folder / f"{name}{suffix}").is_file():
            return folder / f"{name}{suffix}"
    return find_definition(folder / name) if (folder / name).is_dir() else None


def _renamed(definition: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """A definition whose state names (and every reference to them) start with `prefix`."""
    out = {key: value for key, value in definition.items() if key in ("StartAt", "States", "Comment", "QueryLanguage",
                                                                      "ProcessorConfig")}
    if isinstance(definition.get("StartAt"), str):
        out["StartAt"] = prefix + definition["StartAt"]
    states = definition.get("States")
    if isinstance(states, Mapping):
        out["States"] = {prefix + name: _renamed_state(state, prefix) for name, state in states.items()}
    return out


def _renamed_state(state: Any, prefix: str) -> Any:
    if not isinstance(state, Mapping):
        return state
    out = dict(state)
    for key in ("Next", "Default"):
        if isinstance(out.get(key), str):
            out[key] = prefix + out[key]
    for key in ("Choices", "Catch"):
        if isinstance(out.get(key), list):
            out[key] = [{**rule, "Next": prefix + rule["Next"]} if isinstance(rule, Mapping)
                        and isinstance(rule.get("Next"), str) else rule for rule in out[key]]
    if isinstance(out.get("Branches"), list):
        out["Branches"] = [_renamed(b, prefix) if isinstance(b, Mapping) else b for b in out["Branches"]]
    for key in ("ItemProcessor", "Iterator"):
        if isinstance(out.get(key), Mapping):
            out[key] = _renamed(out[key], prefix)
    return out
