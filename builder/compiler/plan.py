"""From a validated state machine to unum functions: which function runs which states, and the
IR each one routes with.

Every Task is a function. Non-Task states run inside their neighbours: after a Task, its
function's runner continues through Pass/Choice/Wait/Succeed/Fail until the next Task,
Parallel or Map (predecessor's egress). A *head* is where a function starts:
- a Task (reached from another function),
- the start of a scope (the machine, a branch, an iterator) that is not a Task,
- the completion of a Parallel/Map (the join: the target of its branches' fan-in).
A non-Task head that leads through Pass/Wait states to a Task reached from nowhere else is
folded into that Task's function (no hop). Otherwise it gets a function of its own: a router
(a start that branches with a Choice, a branch made of Pass states only, a join followed by a
Choice) - these are the only functions without user code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from builder.compiler.validate import Machine, Scope, successors
from unum_entry.asl.callbacks import waits  # a callback Task (`.waitForTaskToken` or an activity) suspends
from unum_entry.asl.runner import END, FAIL


@dataclass
class Function:
    """One unum function of the compiled workflow."""

    name: str
    head: str
    join: bool
    scope: Scope
    task: str | None = None
    exits: list[tuple[str, str | None]] = field(default_factory=list)  # ("goto"|"fan"|"end"|"fail"|"wait", state)


@dataclass
class Layout:
    functions: dict[str, Function]   # by function name
    entry: str                       # function name
    task_function: dict[str, str]    # Task state -> function
    start_function: dict[int, str]   # id(scope) -> function entered at the scope's start
    join_function: dict[str, str]    # Parallel/Map state -> function joining its branches


def plan(machine: Machine) -> Layout:
    inbound = _inbound(machine)
    names = _Names()
    functions: dict[str, Function] = {}
    task_function: dict[str, str] = {}
    for scope in machine.scopes:
        for state_name, state in scope.states.items():
            if state["Type"] == "Task":
                fn = Function(names.make(state_name), head=state_name, join=False, scope=scope, task=state_name)
                functions[fn.name] = fn
                task_function[state_name] = fn.name
    start_function: dict[int, str] = {}
    join_function: dict[str, str] = {}
    for scope in machine.scopes:
        if scope.states[scope.start]["Type"] == "Task":
            start_function[id(scope)] = task_function[scope.start]
        else:
            start_function[id(scope)] = _head(scope, scope.start, False, [scope.start], inbound, functions, task_function, names)
        for state_name, state in scope.states.items():
            if state["Type"] in ("Parallel", "Map"):
                chain = [state["Next"]] if "Next" in state else []
                join_function[state_name] = _head(scope, state_name, True, chain, inbound, functions, task_function, names)
    for fn in functions.values():
        fn.exits = _exits(fn)
    entry = start_function[id(machine.scopes[0])]
    return Layout(functions, entry, task_function, start_function, join_function)


def _head(scope: Scope, head: str, join: bool, chain_start: list[str], inbound: dict[str, int],
          functions: dict[str, Function], task_function: dict[str, str], names: _Names) -> str:
    """The function for a non-Task head: the Task it folds into, or a new router."""
    task = _fold_target(scope, chain_start, inbound)
    if task is not None:
        fn = functions[task_function[task]]
        fn.head, fn.join = head, join
        return fn.name
    fn = Function(names.make(head), head=head, join=join, scope=scope)
    functions[fn.name] = fn
    return fn.name


def _fold_target(scope: Scope, chain_start: list[str], inbound: dict[str, int]) -> str | None:
    """The Task a chain of Pass/Wait states leads to, when every state on the way (and the Task)
    is reached from that chain only; else None."""
    if not chain_start:
        return None
    name, seen = chain_start[0], set()
    while name not in seen:
        seen.add(name)
        state = scope.states[name]
        if inbound.get(name, 0) != 1:
            return None
        if state["Type"] == "Task":
            return name
        if state["Type"] not in ("Pass", "Wait") or "Next" not in state:
            return None
        name = state["Next"]
    return None


def _inbound(machine: Machine) -> dict[str, int]:
    counts: dict[str, int] = {}
    for scope in machine.scopes:
        counts[scope.start] = counts.get(scope.start, 0) + 1
        for state in scope.states.values():
            for target in set(successors(state)):
                counts[target] = counts.get(target, 0) + 1
    return counts


def _exits(fn: Function) -> list[tuple[str, str | None]]:
    """Everywhere the runner of `fn` can leave it (a static over-approximation of run())."""
    states = fn.scope.states
    exits: list[tuple[str, str | None]] = []

    def add(kind: str, target: str | None) -> None:
        if (kind, target) not in exits:
            exits.append((kind, target))

    todo: list[str] = []
    seen: set[str] = set()
    own_done = False

    def after(state: Mapping[str, Any]) -> None:
        if state.get("End"):
            add("end", None)
        elif "Next" in state:
            todo.append(state["Next"])
        todo.extend(c["Next"] for c in state.get("Catch", []))

    if fn.join:
        head = states[fn.head]
        after(head)
        if head.get("Retry"):
            add("fan", fn.head)
            add("wait", None)  # a long Retry back-off waits on a timer (unum_entry/asl/timing.py)
    else:
        todo.append(fn.head)
    while todo:
        name = todo.pop(0)
        state = states[name]
        kind = state["Type"]
        if kind == "Task":
            if name == fn.task and not own_done:
                own_done = True
                after(state)
                if state.get("Retry"):
                    add("wait", None)  # a long Retry back-off waits on a timer
            else:
                add("goto", name)
            continue
        if name in seen:
            continue
        seen.add(name)
        if kind == "Parallel":
            add("fan", name)
            todo.extend(c["Next"] for c in state.get("Catch", []))  # its input can fail here
        elif kind == "Map":
            add("fan", name)
            after(state)  # an empty Map completes in place; errors go to its Catch
        elif kind in ("Pass", "Wait"):
            after(state)
            if kind == "Wait":
                add("wait", None)  # a Wait longer than a second commits a timer wait and stops
        elif kind == "Choice":
            todo.extend(successors(state))
        elif kind == "Succeed":
            add("end", None)
        elif kind == "Fail":
            add("fail", None)
    add("end", None)
    add("fail", None)  # any state can fail at run time (States.Runtime, an uncaught error)
    return exits


def instructions(fn: Function, layout: Layout, machine: Machine) -> list[dict[str, Any]]:
    """The IR program of one function: route on the runner's `__next__`."""
    program: list[dict[str, Any]] = [{"op": "next"}]  # fresh invocation names on every hop (cycles)
    for kind, target in fn.exits:
        if target is None:  # "end" / "fail": routed below, by the function's scope
            continue
        when = {"Variable": "$.__next__", "StringEquals": target}
        if kind == "goto":
            program.append({"op": "invoke", "function": layout.task_function[target], "path": "$.transfer", "when": when})
        elif kind == "fan":
            state = fn.scope.states[target]
            program.append({"op": "create_set", "function": layout.join_function[target]})
            if state["Type"] == "Parallel":
                branches = [layout.start_function[id(s)] for s in machine.scopes if s.owner == target]
                program.append({"op": "fan_out", "branches": branches, "when": when})
            else:
                iterator = next(s for s in machine.scopes if s.owner == target)
                program.append({"op": "map", "function": layout.start_function[id(iterator)], "items": "$.items",
                                "max_concurrency": "$.max_concurrency", "when": when})
    if ("wait", None) in fn.exits or (fn.task is not None and waits(fn.scope.states[fn.task])):
        # waits for its callback (unum_entry/asl/callbacks.py) or a timer (unum_entry/asl/timing.py):
        # no successor, no result until then
        program.append({"op": "suspend", "when": {"Variable": "$.__next__", "StringEquals": "__wait__"}})
    if fn.scope.owner is None:
        program.append({"op": "succeed", "path": "$.output", "when": {"Variable": "$.__next__", "StringEquals": END}})
        program.append({"op": "fail", "path": "$.error", "when": {"Variable": "$.__next__", "StringEquals": FAIL}})
    else:
        if fails_the_workflow(fn.scope.owner, machine):  # fail fast: record it now, not after the last item
            program.append({"op": "fail", "path": "$.error", "when": {"Variable": "$.__next__", "StringEquals": FAIL}})
        program.append({"op": "fan_in", "function": layout.join_function[fn.scope.owner]})
    return program


# What lets a failed branch or item NOT fail its Parallel/Map (and that state not fail the workflow).
_ABSORBS = ("Retry", "Catch", "ToleratedFailureCount", "ToleratedFailureCountPath", "ToleratedFailurePercentage",
            "ToleratedFailurePercentagePath")


def fails_the_workflow(owner: str | None, machine: Machine) -> bool:
    """Whether a branch (or Map item) of the Parallel/Map `owner` that ends in failure certainly
    fails the whole workflow: neither `owner` nor any Parallel/Map enclosing it has a Retry, a
    Catch or a tolerated failure limit, and none is a nested state machine (whose failure is
    re-shaped as the Task's). Then the branch records the workflow's failure at once, as Step
    Functions fails the execution at the first failed item, instead of its join doing so after
    every sibling finished; the siblings still running find the workflow ended (docs/step-functions.md)."""
    while owner is not None:
        state = machine.state(owner)
        if any(key in state for key in _ABSORBS) or any(str(key).startswith("__unum") for key in state):
            return False
        owner = machine.scope_of[owner].owner
    return True


class _Names:
    """Function (folder) names from state names: safe characters, unique."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def make(self, state: str) -> str:
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", state).strip("-.") or "state"
        name, i = base, 2
        while name.lower() in self.used:
            name, i = f"{base}-{i}", i + 1
        self.used.add(name.lower())
        return name
