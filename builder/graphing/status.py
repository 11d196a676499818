"""Colour a workflow's graph by what a store holds for one run of it.

Checkpoint names are hashes (unum_entry.naming), so the store cannot say which function wrote
what. Instead the run is *replayed* from committed data, as every egress does: start at the
entry (root frame), read the invocations' commit records in batches, run each committed
output through the pure planner (unum_entry.plan) to get the invocations it made, and follow
a fan-in to its target once every branch joining the set has committed. Reads only; bounded by
`limit` invocations.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from builder.graphing.model import Graph, NodeState
from unum_entry import naming
from unum_entry.checkpoint import commits_its_result
from unum_entry.codec import decode
from unum_entry.envelope import ROOT, Envelope
from unum_entry.errors import UnumError
from unum_entry.outcome import WATCHDOG_FIELD, Ending
from unum_entry.plan import Call, Committed, continuation, plan
from unum_entry.stores.base import Store

REPLAY_LIMIT = 100_000     # invocations followed at most
_INLINE = 256 * 1024       # envelope inlining does not change names; any limit will do


@dataclass(frozen=True)
class Progress:
    """What the replay found for one workflow."""

    invoked: Counter[str]     # per function: invocations the committed data shows were made
    committed: Counter[str]   # per function: of those, how many committed
    failed_function: str | None
    ended: bool
    truncated: bool           # stopped at the limit


def replay(graph: Graph, store: Store, workflow: str, *, limit: int = REPLAY_LIMIT) -> Progress:
    """Follow the run `workflow` of `graph`'s workflow through `store` (see the module doc)."""
    ending = Ending.of(workflow)
    found = store.read(ending.keys)
    raw_failure = found[ending.failure].value if ending.failure in found else None
    failure = decode(raw_failure) if raw_failure is not None else None
    invoked: Counter[str] = Counter()
    committed: Counter[str] = Counter()
    seen: set[str] = set()
    joins: dict[str, tuple[int, set[int], Call]] = {}   # set key -> (width, slots joined, target call)
    queue = [Call(graph.entry, Envelope(workflow=workflow, frames=ROOT))]
    while queue and len(seen) < limit:
        batch, queue = queue[: limit - len(seen)], []
        keyed: list[tuple[Call, str]] = []
        for call in batch:
            key = _commit_key(graph, call)
            if key is not None and key not in seen:
                seen.add(key)
                keyed.append((call, key))
        records = store.read([key for _, key in keyed])
        for call, key in keyed:
            invoked[call.function] += 1
            record = records.get(key)
            if record is None or record.value is None:
                continue
            committed[call.function] += 1
            queue.extend(_successors(graph, call, key, record.value, joins))
        if not queue:
            ready = [target for width, slots, target in joins.values() if len(slots) >= width]
            joins = {k: v for k, v in joins.items() if len(v[1]) < v[0]}
            queue = ready
    return Progress(invoked=invoked, committed=committed,
                    # the deadline watchdog's record names no function that failed (unum_entry.watchdog)
                    failed_function=None if failure is None or failure.get(WATCHDOG_FIELD) else failure.get("Function"),
                    ended=ending.reached(found), truncated=bool(queue))


def colour(graph: Graph, progress: Progress) -> Graph:
    """`graph` with a NodeState and a detail ("2/3 committed") per function."""
    states: dict[str, NodeState] = {}
    nodes = dict(graph.nodes)
    for name in graph.programs:
        made, done = progress.invoked[name], progress.committed[name]
        if name == progress.failed_function:
            state = NodeState.FAILED
        elif made > done and not progress.ended:
            state = NodeState.RUNNING
        elif done:
            state = NodeState.RETAINED if progress.ended else NodeState.COMMITTED
        else:
            state = NodeState.NOT_STARTED
        states[name] = state
        if made > 1 or made != done:
            nodes[name] = replace(nodes[name], detail=f"{done}/{made} committed")
    return replace(graph, nodes=nodes, states=states)


def _commit_key(graph: Graph, call: Call) -> str | None:
    ir = graph.programs.get(call.function)
    if ir is None or not ir.checkpoint:
        return None  # no commit record: its output (and successors) cannot be seen
    env = call.envelope
    if commits_its_result(ir):
        return naming.result_key(env.workflow, env.frames)
    return naming.checkpoint_key(env.workflow, call.function, env.frames)


def _successors(graph: Graph, call: Call, key: str, stored: bytes, joins: dict[str, Any]) -> list[Call]:
    ir = graph.programs[call.function]
    env = call.envelope
    out: list[Call] = []
    lane = continuation(ir, env)
    if lane is not None:
        out.append(lane)
    if commits_its_result(ir):
        return out
    try:
        the_plan = plan(ir, env, Committed(decode(stored), len(stored), key), invocation=key, inline_limit=_INLINE)
    except UnumError:
        return out  # the run failed here; its failure record says why
    out.extend(the_plan.calls)
    if the_plan.join is not None:
        join = the_plan.join
        width, slots, target = joins.setdefault(join.set_key, (join.width, set(), join.target_call(env)))
        slots.add(join.slot)
    return out


def entry_committed(graph: Graph, store: Store, workflow: str) -> bool:
    """Whether `store` holds the commit of `graph`'s entry for `workflow` (so the run is of it)."""
    key = _commit_key(graph, Call(graph.entry, Envelope(workflow=workflow, frames=ROOT)))
    return key is not None and key in store.read([key])
