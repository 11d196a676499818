"""A state machine drawn as the Step Functions console draws it (`graph FILE --view states`):
every state in definition order, a Map or Parallel as a box holding its branches, Choice rules
and Catch errors as edge labels, every end; optionally coloured by the path a run took
(`inspect WF --graph --view states`: the states its history entered, the state that failed).

The hosting functions (what unum deploys) are the other view (`--view functions`, the default:
builder.graphing.build)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from builder.graphing.build import condition_label
from builder.graphing.dot import NODE_AND_EDGE_DEFAULTS, quoted

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


def _layout(view: StateView) -> Iterator[tuple[str, str, str]]:
    """The view in drawing order, as (what, id, indent): ("node", state id), ("open", container id)
    ... its members and nested containers, one level deeper ... ("close", container id)."""
    def container(cid: str, indent: str) -> Iterator[tuple[str, str, str]]:
        _, members, children = view.containers[cid]
        yield "open", cid, indent
        for sid in members:
            yield "node", sid, indent + "  "
        for child in children:
            yield from container(child, indent + "  ")
        yield "close", cid, indent

    for sid in view.top:
        yield "node", sid, "  "
    for cid in view.top_containers:
        yield from container(cid, "  ")


def _colours(name: str, kind: str, ran: Collection[str], failed: Collection[str]) -> tuple[str, str] | None:
    """(fill, stroke) of a state the run failed in or went through; None for the others and for
    the Start/End markers."""
    if kind in ("Start", "End"):
        return None
    if name in failed:
        return FAILED_FILL, FAILED_STROKE
    return (RAN_FILL, RAN_STROKE) if name in ran else None


def states_to_dot(view: StateView, *, ran: Collection[str] = (), failed: Collection[str] = ()) -> str:
    """DOT text; states named in `ran` are green, in `failed` red (by state name)."""
    lines = [f"digraph {quoted(view.name)} {{", "  graph [rankdir=TB, fontname=Helvetica, fontsize=11];",
             *NODE_AND_EDGE_DEFAULTS]
    for what, ident, indent in _layout(view):
        if what == "open":
            label = view.containers[ident][0]
            lines.append(f'{indent}subgraph cluster_{ident} {{ label={quoted(label)}; style="rounded"; color="#999999";')
        elif what == "close":
            lines.append(f"{indent}}}")
        else:
            name, kind = view.states[ident]
            shape = {"Start": "circle", "End": "doublecircle", "Choice": "diamond"}.get(kind, "box")
            colours = _colours(name, kind, ran, failed)
            colour = f', fillcolor="{colours[0]}", color="{colours[1]}", penwidth=2' if colours else ""
            label = name if kind in ("Start", "End", "Task") else f"{name}\n({kind})"
            lines.append(f'{indent}{ident} [label={quoted(label)}, shape={shape}{colour}];')
    for source, target, label, dashed in view.edges:
        attrs = ([f"label={quoted(label)}"] if label else []) + (["style=dashed"] if dashed else [])
        lines.append(f"  {source} -> {target} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def states_to_mermaid(view: StateView, *, ran: Collection[str] = (), failed: Collection[str] = ()) -> str:
    """Mermaid flowchart text of the same view (subgraphs for Map/Parallel and their branches)."""
    lines = ["flowchart TD", f"  %% {view.name}: states in definition order"]
    for what, ident, indent in _layout(view):
        if what == "open":
            label = view.containers[ident][0]
            lines.append(f'{indent}subgraph {ident}["{label or " "}"]')
        elif what == "close":
            lines.append(f"{indent}end")
        else:
            name, kind = view.states[ident]
            text = name.replace('"', "'") if kind in ("Start", "End", "Task") else f"{name} ({kind})".replace('"', "'")
            opening, closing = {"Start": ("((", "))"), "End": ("(((", ")))"), "Choice": ("{", "}")}.get(kind, ("[", "]"))
            lines.append(f'{indent}{ident}{opening}"{text}"{closing}')
            colours = _colours(name, kind, ran, failed)
            if colours:
                lines.append(f"{indent}style {ident} fill:{colours[0]},stroke:{colours[1]}")
    for source, target, label, dashed in view.edges:
        arrow = "-.->" if dashed else "-->"
        shown = label.replace('"', "'").replace("|", "/")
        lines.append(f'  {source} {arrow}|"{shown}"| {target}' if label else f"  {source} {arrow} {target}")
    return "\n".join(lines) + "\n"

