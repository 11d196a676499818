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
cycle is refused. The Task's TimeoutSeconds / HeartbeatSeconds are not enforced on the child.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builder.compiler.load import find_definition, load_definition
from unum_entry.asl.nested import MARK, SYNC_RESOURCES
from unum_entry.errors import AslDefinitionError

# The Task's fields that keep their meaning on the fan-out that replaces it.
KEPT = ("Comment", "QueryLanguage", "Assign", "Next", "End", "InputPath", "OutputPath", "Parameters", "ResultPath",
        "ResultSelector", "Retry", "Catch", "Arguments", "Output")
SUFFIXES = (".asl.json", ".json", ".asl.yaml", ".yaml", ".yml")


def inline_children(doc: dict[str, Any], path: Path, substitutions: Mapping[str, str] | None = None,
                    seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """`doc` with every `startExecution.sync(:2)` Task replaced by its child's inlined states."""
    return _scope(doc, path, substitutions, seen, "")


def _scope(definition: Any, path: Path, substitutions: Mapping[str, str] | None, seen: tuple[str, ...],
           where: str) -> Any:
    if not isinstance(definition, Mapping) or not isinstance(definition.get("States"), Mapping):
        return definition  # the validator names what is wrong
    states = {name: _state(name, state, path, substitutions, seen, where)
              for name, state in definition["States"].items()}
    return {**definition, "States": states}


def _state(name: str, state: Any, path: Path, substitutions: Mapping[str, str] | None, seen: tuple[str, ...],
           where: str) -> Any:
    if not isinstance(state, Mapping):
        return state
    full = f"{where}{name}"
    state = dict(state)
    if isinstance(state.get("Branches"), list):
        state["Branches"] = [_scope(b, path, substitutions, seen, f"{full}/Branches[{i}]/")
                             for i, b in enumerate(state["Branches"])]
    for key in ("ItemProcessor", "Iterator"):
        if key in state:
            state[key] = _scope(state[key], path, substitutions, seen, f"{full}/{key}/")
    resource = state.get("Resource")
    if state.get("Type") != "Task" or not isinstance(resource, str) or resource not in SYNC_RESOURCES:
        return state
    parameters = state.get("Parameters", state.get("Arguments"))
    field = "Parameters" if "Parameters" in state else "Arguments"
    arn = parameters.get("StateMachineArn") if isinstance(parameters, Mapping) else None
    if not isinstance(arn, str) or not arn or arn.startswith("{%"):
        raise AslDefinitionError(str(path), full, f"{field}.StateMachineArn",
                                 "a nested state machine must be named literally (an ARN or a name): the child is "
                                 "compiled with its parent, so it cannot be chosen at run time")
    child_name = arn.rsplit(":", 1)[-1]
    if child_name in seen:
        raise AslDefinitionError(str(path), full, f"{field}.StateMachineArn",
                                 f"state machine {child_name!r} starts itself ({' -> '.join((*seen, child_name))})")
    child_path = _find(path.parent, child_name)
    if child_path is None:
        raise AslDefinitionError(str(path), full, f"{field}.StateMachineArn",
                                 f"no definition of state machine {child_name!r} next to {path.name} (looked for "
                                 f"{', '.join(child_name + s for s in SUFFIXES)} and {child_name}/)")
    child = inline_children(load_definition(child_path, substitutions), child_path, substitutions, (*seen, child_name))
    branch = _renamed(child, f"{name}.")
    if "QueryLanguage" in child:
        branch["QueryLanguage"] = child["QueryLanguage"]
    replaced = {key: value for key, value in state.items() if key in KEPT}
    replaced.update(Type="Parallel", Branches=[branch], **{MARK: {
        "Resource": resource, "StateMachineArn": arn, "StateMachine": child_name}})
    return replaced


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
