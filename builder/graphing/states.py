"""A state machine drawn as the Step Functions console draws it (`graph FILE --view states`):
every state in definition order, a Map or Parallel as a box holding its branches, Choice rules
and Catch errors as edge labels, every end; optionally coloured by the path a run took
(`inspect WF --graph --view states`: the states its history entered, the state that failed).

The hosting functions (what unum deploys) are the other view (`--view functions`, the default:
builder.graphing.build)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from builder.graphing.build import condition_label

RAN_FILL, RAN_STROKE = "#d9ead3", "#6aa84f"
FAILED_FILL, FAILED_STROKE = "#f4cccc", "#cc0000"


@dataclass
class StateView:
    """States (id -> (name, type)), containers (id -> (label, member ids, child containers)),
    edges (source id, target id, label, dashed), in definition order."""

    name: str
    states: dict[str, tuple[str, str]] = field(default_factory=dict)
    containers: dict[str, tuple[str, list[str], list[str]]] = field(default_factory=dict)
    top: list[str] = field(default_factory=list)          # ids of top-level states and containers
    top_containers: list[str] = field(default_factory=list)
    edges: list[tuple[str, str, str, bool]] = field(default_factory=list)


def state_view(doc: Mapping[str, Any], name: str) -> StateView:
    """The view of a (validated) state machine definition."""
    view = StateView(name=name)
    view.states["st_start"] = ("Start", "Start")
    view.states["st_end"] = ("End", "End")
    first = _scope(view, doc, "s", view.top, view.top_containers, end="st_end")
    view.top[:0] = ["st_start"]
    view.top.append("st_end")
    view.edges.insert(0, ("st_start", first, "", False))
    return view


def _scope(view: StateView, doc: Mapping[str, Any], prefix: str, members: list[str], containers: list[str],
           *, end: str | None) -> str:
    """Add the states of `doc` (StartAt, States) under ids `prefix`-i; returns the StartAt id."""
    states: Mapping[str, Any] = doc.get("States", {})
    ids = {state: f"{prefix}_{i}" for i, state in enumerate(states)}
    for state, body in states.items():
        sid = ids[state]
        kind = str(body.get("Type", "?"))
        view.states[sid] = (state, kind)
        branches = _branches(body)
        if branches:
            inner_members: list[str] = [sid]
            inner_containers: list[str] = []
            for b, branch in enumerate(branches):
                cid = f"{sid}_b{b}"
                branch_members: list[str] = []
                start = _scope(view, branch, cid, branch_members, inner_containers, end=None)
                view.containers[cid] = (f"branch {b + 1}" if kind == "Parallel" else "each item", branch_members, [])
                inner_containers.append(cid)
                view.edges.append((sid, start, "", True))
            view.containers[f"{sid}_box"] = ("", inner_members, inner_containers)  # the state's node names it
            containers.append(f"{sid}_box")
        else:
            members.append(sid)
        _edges(view, body, sid, ids, end)
    return ids.get(str(doc.get("StartAt")), next(iter(ids.values()), "st_end"))


def _branches(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if body.get("Type") == "Parallel":
        return list(body.get("Branches", []))
    if body.get("Type") == "Map":
        inner = body.get("ItemProcessor") or body.get("Iterator")
        return [inner] if isinstance(inner, Mapping) else []
    return []


def _edges(view: StateView, body: Mapping[str, Any], sid: str, ids: Mapping[str, str], end: str | None) -> None:
    kind = body.get("Type")
    if kind == "Choice":
        for rule in body.get("Choices", []):
            if rule.get("Next") in ids:
                view.edges.append((sid, ids[rule["Next"]], condition_label(rule), False))
        if body.get("Default") in ids:
            view.edges.append((sid, ids[body["Default"]], "default", False))
    elif body.get("Next") in ids:
        view.edges.append((sid, ids[body["Next"]], "", False))
    elif (body.get("End") or kind == "Succeed") and end is not None:
        view.edges.append((sid, end, "", False))
    for catcher in body.get("Catch", []):
        if catcher.get("Next") in ids:
            view.edges.append((sid, ids[catcher["Next"]], "catch " + ", ".join(catcher.get("ErrorEquals", [])), True))


def states_to_dot(view: StateView, *, ran: Collection[str] = (), failed: Collection[str] = ()) -> str:
    """DOT text; states named in `ran` are green, in `failed` red (by state name)."""
    lines = [f'digraph "{_esc(view.name)}" {{', "  graph [rankdir=TB, fontname=Helvetica, fontsize=11];",
             '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", color="#888888", fontname=Helvetica, fontsize=11];',
             '  edge [fontname=Helvetica, fontsize=9, color="#444444"];']

    def node(sid: str, indent: str) -> None:
        name, kind = view.states[sid]
        shape = {"Start": "circle", "End": "doublecircle", "Choice": "diamond"}.get(kind, "box")
        colour = ""
        if name in failed and kind not in ("Start", "End"):
            colour = f', fillcolor="{FAILED_FILL}", color="{FAILED_STROKE}", penwidth=2'
        elif name in ran and kind not in ("Start", "End"):
            colour = f', fillcolor="{RAN_FILL}", color="{RAN_STROKE}", penwidth=2'
        label = name if kind in ("Start", "End", "Task") else f"{name}\n({kind})"
        lines.append(f'{indent}{sid} [label="{_esc(label)}", shape={shape}{colour}];')

    def container(cid: str, indent: str) -> None:
        label, members, children = view.containers[cid]
        lines.append(f'{indent}subgraph cluster_{cid} {{ label="{_esc(label)}"; style="rounded"; color="#999999";')
        for sid in members:
            node(sid, indent + "  ")
        for child in children:
            container(child, indent + "  ")
        lines.append(f"{indent}}}")

    for sid in view.top:
        node(sid, "  ")
    for cid in view.top_containers:
        container(cid, "  ")
    for source, target, label, dashed in view.edges:
        attrs = ([f'label="{_esc(label)}"'] if label else []) + (["style=dashed"] if dashed else [])
        lines.append(f"  {source} -> {target} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def states_to_mermaid(view: StateView, *, ran: Collection[str] = (), failed: Collection[str] = ()) -> str:
    """Mermaid flowchart text of the same view (subgraphs for Map/Parallel and their branches)."""
    lines = ["flowchart TD", f"  %% {view.name}: states in definition order"]

    def node(sid: str, indent: str) -> None:
        name, kind = view.states[sid]
        text = name.replace('"', "'") if kind in ("Start", "End", "Task") else f"{name} ({kind})".replace('"', "'")
        opening, closing = {"Start": ("((", "))"), "End": ("(((", ")))"), "Choice": ("{", "}")}.get(kind, ("[", "]"))
        lines.append(f'{indent}{sid}{opening}"{text}"{closing}')
        if name in failed and kind not in ("Start", "End"):
            lines.append(f"{indent}style {sid} fill:{FAILED_FILL},stroke:{FAILED_STROKE}")
        elif name in ran and kind not in ("Start", "End"):
            lines.append(f"{indent}style {sid} fill:{RAN_FILL},stroke:{RAN_STROKE}")

    def container(cid: str, indent: str) -> None:
        label, members, children = view.containers[cid]
        lines.append(f'{indent}subgraph {cid}["{label or " "}"]')
        for sid in members:
            node(sid, indent + "  ")
        for child in children:
            container(child, indent + "  ")
        lines.append(f"{indent}end")

    for sid in view.top:
        node(sid, "  ")
    for cid in view.top_containers:
        container(cid, "  ")
    for source, target, label, dashed in view.edges:
        arrow = "-.->" if dashed else "-->"
        shown = label.replace('"', "'").replace("|", "/")
        lines.append(f'  {source} {arrow}|"{shown}"| {target}' if label else f"  {source} {arrow} {target}")
    return "\n".join(lines) + "\n"


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
