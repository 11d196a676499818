"""Build a workflow's `Graph` from a workflow folder (its IR) or a Step Functions state machine
(compiled in memory: which functions the compiler makes, and which states each one hosts).

`load_graph(path)` accepts a workflow folder, its `unum-workflow.json`, a state machine file
(`.json`, `.asl.json`, `.yaml`) or a folder holding one. Raises UnumError subclasses naming the
file at fault (WorkflowDefinitionError, IRError, AslDefinitionError).
"""

from __future__ import annotations

import json
from dataclasses import replace
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from builder.graphing.model import END, FAIL, Edge, EdgeKind, Graph, Node
from unum_entry.errors import WorkflowDefinitionError
from unum_entry.ir import FanIn, FanOut, FunctionIR, Invoke, Map, Shape, Succeed, parse_ir
from unum_entry.ir import Fail as FailOp
from unum_entry.workflow import WORKFLOW_FILE_NAME, load_workflow

NEXT_STATE = "$.__next__"   # what a compiled state machine's functions route on
LABEL_LIMIT = 80             # longest condition label, in characters

_COMPARATORS = {"Equals": "==", "LessThan": "<", "GreaterThan": ">", "LessThanEquals": "<=",
                "GreaterThanEquals": ">=", "Matches": "matches"}
_TESTS = {"IsNull": "is null", "IsPresent": "is present", "IsNumeric": "is numeric", "IsString": "is string",
          "IsBoolean": "is boolean", "IsTimestamp": "is timestamp"}


def load_graph(path: str | Path) -> Graph:
    """The graph of the workflow or state machine at `path` (see the module doc)."""
    from builder.compiler.load import STATE_MACHINE_SUFFIXES, find_definition

    target = Path(path)
    if target.is_file() and target.name == WORKFLOW_FILE_NAME:
        target = target.parent
    if target.is_dir() and (target / WORKFLOW_FILE_NAME).is_file():
        return graph_of_workflow(target)
    if target.is_dir():
        found = find_definition(target)
        if found is None:
            raise WorkflowDefinitionError(f"{target}: neither a workflow folder ({WORKFLOW_FILE_NAME}) nor a folder "
                                          "holding a state machine (statemachine.json, *.asl.json, statemachine.yaml)")
        return graph_of_state_machine(found)
    if target.is_file() and target.suffix in STATE_MACHINE_SUFFIXES:
        return graph_of_state_machine(target)
    if not target.exists():
        raise WorkflowDefinitionError(f"{target}: no such file or folder")
    raise WorkflowDefinitionError(f"{target}: expected a workflow folder or a state machine file "
                                  f"({', '.join(sorted(STATE_MACHINE_SUFFIXES))})")


def graph_of_workflow(folder: str | Path) -> Graph:
    """The graph of a workflow folder (validated by `load_workflow`)."""
    workflow = load_workflow(folder)
    irs = [spec.ir for spec in workflow.functions.values()]
    return _graph(workflow.name, workflow.entry, irs, {})


def graph_of_state_machine(path: str | Path) -> Graph:
    """The graph of a state machine: the compiler's functions, each with the states it hosts;
    an edge's condition is the state it goes to."""
    from builder.compiler.load import load_definition
    from builder.compiler.plan import instructions, plan
    from builder.compiler.validate import successors, validate

    path = Path(path)
    machine = validate(load_definition(path), str(path))
    layout = plan(machine)
    irs: list[FunctionIR] = []
    hosted: dict[str, tuple[str, ...]] = {}
    inner: dict[str, tuple[tuple[str, str], ...]] = {}
    for fn in layout.functions.values():
        program = instructions(fn, layout, machine)
        irs.append(parse_ir({"unum_ir": 1, "function": fn.name, "handler": "unum_asl_main.handler",
                             "instructions": program}, source=f"{path} (function {fn.name})"))
        hosted[fn.name] = _hosted_states(fn)
        inner[fn.name] = tuple((a, b) for a in hosted[fn.name] for b in dict.fromkeys(successors(fn.scope.states[a]))
                               if b in hosted[fn.name])
    graph = _graph(path.resolve().parent.name if path.stem.lower().startswith("statemachine") else path.stem.split(".")[0],
                   layout.entry, irs, hosted)
    states_of = {name: [machine.state(s) for s in states if s in machine.scope_of] for name, states in hosted.items()}
    graph.edges = [e for e in graph.edges if _asl_terminal_possible(e, states_of.get(e.source, []))]
    graph.nodes = {name: replace(node, state_edges=inner.get(name, ())) for name, node in graph.nodes.items()}
    return graph


def _graph(name: str, entry: str, irs: Iterable[FunctionIR], hosted: Mapping[str, tuple[str, ...]]) -> Graph:
    irs = sorted(irs, key=lambda ir: (ir.function != entry, ir.function))
    nodes = {ir.function: Node(ir.function, states=hosted.get(ir.function, ())) for ir in irs}
    edges: list[Edge] = []
    for ir in irs:
        edges.extend(_edges(ir, asl=bool(hosted)))
    if any(e.target == END for e in edges):
        nodes[END] = Node(END)
    if any(e.target == FAIL for e in edges):
        nodes[FAIL] = Node(FAIL)
    back = _back_edges(entry, edges)
    edges = [Edge(e.source, e.target, e.kind, e.condition, (e.source, e.target) in back, e.note) for e in edges]
    return Graph(name=name, entry=entry, nodes=nodes, edges=list(dict.fromkeys(edges)),
                 programs={ir.function: ir for ir in irs})


def _edges(ir: FunctionIR, *, asl: bool) -> list[Edge]:
    out: list[Edge] = []
    for ins in ir.instructions:
        when = getattr(ins, "when", None)
        label = None if when is None else (_asl_label(when) if asl else condition_label(when))
        if asl and isinstance(ins, (Succeed, FailOp)):
            label = None  # routes on the runner's end marker: the edge says it all
        if isinstance(ins, Invoke):
            out.append(Edge(ir.function, ins.function, EdgeKind.INVOKE, label))
        elif isinstance(ins, Map):
            out.append(Edge(ir.function, ins.function, EdgeKind.MAP, label))
        elif isinstance(ins, FanOut):
            out.extend(Edge(ir.function, branch, EdgeKind.FAN_OUT, label) for branch in ins.branches)
        elif isinstance(ins, FanIn):
            note = f"neighbour +{ins.offset}" if ins.shape is Shape.NEIGHBOUR else None
            out.append(Edge(ir.function, ins.function, EdgeKind.FAN_IN, label, note=note))
        elif isinstance(ins, Succeed):
            out.append(Edge(ir.function, END, EdgeKind.SUCCEED, label))
        elif isinstance(ins, FailOp):
            out.append(Edge(ir.function, FAIL, EdgeKind.FAIL, label))
    return out


def _back_edges(entry: str, edges: list[Edge]) -> set[tuple[str, str]]:
    """Edges that close a cycle, by an iterative depth-first walk from the entry (then from any
    node it does not reach), visiting successors in edge order."""
    succ: dict[str, list[str]] = {}
    for e in edges:
        succ.setdefault(e.source, []).append(e.target)
    back: set[tuple[str, str]] = set()
    done: set[str] = set()
    for root in [entry, *succ]:
        if root in done:
            continue
        on_path = {root}
        stack = [(root, iter(succ.get(root, [])))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                back.add((node, child))
            elif child not in done:
                on_path.add(child)
                stack.append((child, iter(succ.get(child, []))))
    return back


def condition_label(rule: Mapping[str, Any]) -> str:
    """A Choice rule as short text: `$.total <= 1000 and not $.vip`; cut at LABEL_LIMIT."""
    text = _rule_text(rule, top=True)
    return text if len(text) <= LABEL_LIMIT else text[:LABEL_LIMIT - 1] + "…"


def _rule_text(rule: Any, *, top: bool = False) -> str:
    if not isinstance(rule, Mapping):
        return json.dumps(rule)
    for op, joiner in (("And", " and "), ("Or", " or ")):
        if op in rule:
            text = joiner.join(_rule_text(r) for r in rule[op])
            return text if top else f"({text})"
    if "Not" in rule:
        return "not " + _rule_text(rule["Not"])
    if "Condition" in rule:  # JSONata
        return str(rule["Condition"])
    variable = str(rule.get("Variable", "?"))
    for key, value in rule.items():
        if key in ("Variable", "Next", "Comment", "Assign", "Output"):
            continue
        if key in _TESTS:
            return f"{variable} {_TESTS[key]}" if value else f"{variable} not {_TESTS[key].removeprefix('is ')}"
        is_path = key.endswith("Path")
        base = key[:-4] if is_path else key
        for prefix in ("String", "Numeric", "Boolean", "Timestamp"):
            if base.startswith(prefix) and base[len(prefix):] in _COMPARATORS:
                shown = value if is_path else json.dumps(value)
                return f"{variable} {_COMPARATORS[base[len(prefix):]]} {shown}"
        return f"{variable} {key} {json.dumps(value)}"
    return variable


def _asl_label(rule: Mapping[str, Any]) -> str:
    """A compiled state machine routes on `$.__next__ == "State"`: label the edge with the state."""
    if rule.get("Variable") == NEXT_STATE and "StringEquals" in rule:
        return str(rule["StringEquals"])
    return condition_label(rule)


def _hosted_states(fn: Any) -> tuple[str, ...]:
    """The states a compiled function's runner goes through: from its head through
    Pass/Choice/Wait/Succeed/Fail (and its own Task) up to the next Task, Parallel or Map (a
    Parallel/Map state is hosted by the function that joins its branches)."""
    from builder.compiler.validate import successors

    states = fn.scope.states
    out: list[str] = []
    todo: list[str] = []
    if fn.join:
        out.append(fn.head)
        todo.extend(successors(states[fn.head]))
    else:
        todo.append(fn.head)
    while todo:
        name = todo.pop(0)
        if name in out:
            continue
        kind = states[name]["Type"]
        if (kind == "Task" and name != fn.task) or kind in ("Parallel", "Map"):
            continue
        out.append(name)
        todo.extend(successors(states[name]))
    return tuple(out)


def _asl_terminal_possible(edge: Edge, states: Sequence[Mapping[str, Any]]) -> bool:
    """Keep an edge to (end)/(fail) only when the function hosts a state that ends there (the
    compiler adds both to every top-level function: any state may fail at run time)."""
    if edge.kind is EdgeKind.FAIL:
        return any(s.get("Type") == "Fail" for s in states)
    if edge.kind is EdgeKind.SUCCEED:
        return any(s.get("Type") == "Succeed" or s.get("End") is True for s in states)
    return True
