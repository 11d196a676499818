"""Tracing workflows and the exactly-once checker used by the fault-injection suite.

Every handler of a tracing workflow returns `{"v": value, "t": trace, "n": nonce}`: a random
nonce per execution, so two executions of one invocation never return the same thing, and a
trace mapping every upstream invocation to the nonce of the output it consumed. Control flow
(branches, loop exits, map sizes) depends on random numbers too, so a divergence changes the
result.

`check_exactly_once` then proves the definition in ../shared/DESIGN.md: it replays the workflow
fault-free with an oracle for handlers that returns, for each invocation, the one recorded
execution output named by the result's trace, and insists that (a) that execution saw exactly
the input the fault-free replay gives it (every consumer saw the same output of each node),
(b) the replay runs exactly the invocations in the trace, and (c) it yields the same results.

What the store holds afterwards is checked too: `check_checkpoints` (the committed checkpoints
are exactly the invocations of that fault-free run, each holding the output its consumers saw),
`CommitWatch` (no key is ever created twice: with retained checkpoints nothing a duplicate needs
is ever gone) and `retention_violations` (only retained kinds stay, each with an expiry between
the workflow's deadline and now + TTL; docs/coordination.md).
"""

from __future__ import annotations

import textwrap
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.faulty_store import StoreWrapper, innermost, raw_records
from unum_entry.codec import decode
from unum_entry.local.platform import LocalPlatform
from unum_entry.outcome import RunResult
from unum_entry.retention import DEFAULT_REDELIVERY_SECONDS
from unum_entry.runtime import Handler, InvocationContext
from unum_entry.stores.base import AppOp, Guard, Kind, Store
from unum_entry.workflow import FunctionSource, Workflow, write_workflow

PRELUDE = textwrap.dedent('''
    import random

    def _merge(events):
        trace, conflicts = {}, []
        for e in events:
            for inv, nonce in e["t"].items():
                if inv == "!conflict":
                    conflicts.extend(nonce)
                elif trace.setdefault(inv, nonce) != nonce:
                    conflicts.append([inv, trace[inv], nonce])
        if conflicts:
            trace["!conflict"] = conflicts
        return trace

    def traced(step, gathered=False, items=False):
        def handler(event, context):
            events = event if gathered else [event]
            values = [e["v"] for e in events]
            value = step(values if gathered else values[0], context)
            nonce = random.getrandbits(48)
            trace = _merge(events)
            trace[context.invocation] = nonce
            out = {"v": value, "t": trace, "n": nonce}
            if items:
                out["items"] = [{"v": x, "t": trace} for x in value["list"]]
            return out
        return handler
''')


@dataclass(frozen=True)
class Fn:
    """One function of a tracing workflow: its step body (Python source of `step(v, ctx)`),
    its IR instructions, and how it receives/produces data."""

    body: str
    instructions: list[dict[str, Any]]
    gathered: bool = False
    items: bool = False


# Random control flow reads `$.v.r`, a float each step draws.
R = "random.random()"
LOOP_EXIT = {"Or": [{"Variable": "$.v.r", "NumericGreaterThanEquals": 0.55},
                    {"Variable": "$$.Fanout.Iteration", "NumericGreaterThanEquals": 3}]}

SHAPES: dict[str, tuple[str, dict[str, Fn]]] = {
    "chain": ("A", {
        "A": Fn(f"return {{'x': v, 'r': {R}}}", [{"op": "invoke", "function": "B"}]),
        "B": Fn(f"return {{'x': v['x'], 'r': {R}}}", [{"op": "invoke", "function": "C"}]),
        "C": Fn(f"return {{'done': True, 'r': {R}}}", []),
    }),
    "fan-out-fan-in": ("A", {
        "A": Fn(f"return {{'r': {R}}}", [{"op": "create_set", "function": "Join"},
                                        {"op": "fan_out", "branches": ["B0", "B1", "B2"]}]),
        "B0": Fn(f"return {R}", [{"op": "fan_in", "function": "Join"}]),
        "B1": Fn(f"return {R}", [{"op": "invoke", "function": "B1b"}]),
        "B1b": Fn(f"return {R}", [{"op": "fan_in", "function": "Join"}]),
        "B2": Fn(f"return {R}", [{"op": "fan_in", "function": "Join"}]),
        "Join": Fn("return sum(v)", [], gathered=True),
    }),
    "map-aggregate": ("A", {
        "A": Fn(f"return {{'list': [{R} for _ in range(random.randint(1, 4))]}}",
                [{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "W", "items": "$.items"}],
                items=True),
        "W": Fn(f"return v * {R}", [{"op": "fan_in", "function": "Sum"}]),
        "Sum": Fn("return {'n': len(v), 's': sum(v)}", [], gathered=True),
    }),
    "branch": ("A", {
        "A": Fn(f"return {{'r': {R}}}", [{"op": "invoke", "function": "Yes", "when": {"Variable": "$.v.r", "NumericLessThan": 0.5}},
                                        {"op": "invoke", "function": "No"}]),
        "Yes": Fn(f"return {{'yes': {R}}}", []),
        "No": Fn(f"return {{'no': {R}}}", [{"op": "invoke", "function": "After"}]),
        "After": Fn(f"return {{'after': {R}}}", []),
    }),
    "loop": ("A", {
        "A": Fn(f"return {{'r': {R}}}", [{"op": "invoke", "function": "L"}]),
        "L": Fn(f"return {{'r': {R}, 'i': ctx.iteration}}",
                [{"op": "invoke", "function": "Done", "when": LOOP_EXIT},
                 {"op": "next"}, {"op": "invoke", "function": "L"}]),
        "Done": Fn("return {'iterations': v['i'] + 1}", []),
    }),
    "fold": ("A", {
        "A": Fn(f"return {{'list': [{R} for _ in range(random.randint(1, 4))]}}",
                [{"op": "create_set", "function": "F", "shape": "neighbour"}, {"op": "map", "function": "C", "items": "$.items"}],
                items=True),
        "C": Fn(f"return v + {R}", [{"op": "fan_in", "function": "F", "shape": "neighbour", "slot": 0}]),
        "F": Fn("return v[0] if len(v) == 1 else v[0] + v[1]",
                [{"op": "fan_in", "function": "F", "shape": "neighbour", "slot": 1, "offset": 1},
                 {"op": "pop"}, {"op": "invoke", "function": "Final"}], gathered=True),
        "Final": Fn(f"return {{'folded': v, 'r': {R}}}", []),
    }),
    "neighbour": ("A", {
        "A": Fn("return {'list': list(range(3))}",
                [{"op": "create_set", "function": "Re", "shape": "neighbour"}, {"op": "map", "function": "Enc", "items": "$.items"}],
                items=True),
        "Enc": Fn(f"return v + {R}", [{"op": "invoke", "function": "Enc2"}]),
        "Enc2": Fn(f"return v * {R}", [{"op": "fan_in", "function": "Re", "shape": "neighbour", "slot": 0}]),
        "Re": Fn(f"return sum(v) + {R}",
                 [{"op": "fan_in", "function": "Re", "shape": "neighbour", "slot": 1, "offset": 1},
                  {"op": "pop"}, {"op": "invoke", "function": "Final"}], gathered=True),
        "Final": Fn("return v", []),
    }),
    "nested-map": ("A", {
        "A": Fn(f"return {{'r': {R}}}", [{"op": "create_set", "function": "Top"},
                                        {"op": "fan_out", "branches": ["M", "M2"]}]),
        "M": Fn("return {'list': [1, 2]}", [{"op": "create_set", "function": "J"},
                                            {"op": "map", "function": "W", "items": "$.items"}], items=True),
        "M2": Fn(f"return {R}", [{"op": "fan_in", "function": "Top"}]),
        "W": Fn(f"return v * {R}", [{"op": "fan_in", "function": "J"}]),
        "J": Fn("return sum(v)", [{"op": "fan_in", "function": "Top"}], gathered=True),
        "Top": Fn("return v", [], gathered=True),
    }),
    "map-lanes": ("A", {  # max_concurrency 2: items run in two lanes, each item invokes the next of its lane
        "A": Fn(f"return {{'list': [{R} for _ in range(random.randint(1, 6))]}}",
                [{"op": "create_set", "function": "Sum"},
                 {"op": "map", "function": "W", "items": "$.items", "max_concurrency": 2}], items=True),
        "W": Fn(f"return v * {R}", [{"op": "invoke", "function": "W2"}]),
        "W2": Fn(f"return v + {R}", [{"op": "fan_in", "function": "Sum"}]),
        "Sum": Fn("return {'n': len(v), 's': sum(v)}", [], gathered=True),
    }),
    "wide-map": ("A", {  # 15-40 branches: a two-level join tree (16-slot leaf shards, a root over them)
        "A": Fn(f"return {{'list': [{R} for _ in range(random.randint(15, 40))]}}",
                [{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "W", "items": "$.items"}],
                items=True),
        "W": Fn(f"return v * {R}", [{"op": "fan_in", "function": "Sum"}]),
        "Sum": Fn("return {'n': len(v), 's': sum(v)}", [], gathered=True),
    }),
    "map-no-join": ("A", {
        "A": Fn("return {'list': [1, 2, 3]}", [{"op": "map", "function": "W", "items": "$.items"}], items=True),
        "W": Fn(f"return v * {R}", []),
    }),
}


# Too slow for the random draws; deterministic tests run them.
LARGE_SHAPES: dict[str, tuple[str, dict[str, Fn]]] = {
    "three-level-map": ("A", {  # 257-300 branches: 17-19 leaf shards, 2 shards above them, a root
        "A": Fn(f"return {{'list': [{R} for _ in range(random.randint(257, 300))]}}",
                [{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "W", "items": "$.items"}],
                items=True),
        "W": Fn(f"return v * {R}", [{"op": "fan_in", "function": "Sum"}]),
        "Sum": Fn("return {'n': len(v), 's': sum(v)}", [], gathered=True),
    }),
}


def write_shape(root: Path, shape: str, *, ingress_check: bool = False) -> Workflow:
    """Write the tracing workflow `shape` (of SHAPES or LARGE_SHAPES) under root/shape and load
    it. `ingress_check`: every function reads its own checkpoint before running its handler."""
    entry, functions = SHAPES[shape] if shape in SHAPES else LARGE_SHAPES[shape]
    fields = {"ingress_check": True} if ingress_check else {}
    sources = {
        name: FunctionSource(PRELUDE + f"\ndef step(v, ctx):\n    {fn.body}\n\n"
                                       f"handler = traced(step, gathered={fn.gathered}, items={fn.items})\n",
                             fn.instructions, fields)
        for name, fn in functions.items()
    }
    folder = root / (f"{shape}-checked" if ingress_check else shape)
    return write_workflow(folder, name=shape, entry=entry, functions=sources)


@dataclass
class ExecutionLog:
    """Every handler execution of a run: invocation → [(input, output)]."""

    executions: dict[str, list[tuple[Any, Any]]] = field(default_factory=lambda: defaultdict(list))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wrap(self, function: str, handler: Handler) -> Handler:
        """Platform `wrap`: run the real handler and record what it saw and returned."""
        def recorded(event: Any, context: InvocationContext) -> Any:
            output = handler(event, context)
            with self._lock:
                self.executions[context.invocation].append((event, output))
            return output

        return recorded


class _Oracle:
    """Handlers for the replay: return the recorded output the result's trace names."""

    def __init__(self, log: ExecutionLog, chosen: dict[str, int]) -> None:
        self.log = log
        self.chosen = chosen
        self.violations: list[str] = []
        self.replayed: set[str] = set()
        self._lock = threading.Lock()

    def wrap(self, function: str, _handler: Handler) -> Handler:
        def oracle(event: Any, context: InvocationContext) -> Any:
            inv = context.invocation
            with self._lock:
                self.replayed.add(inv)
            nonce = self.chosen.get(inv)
            if nonce is None:
                return self._fail(f"{function} {inv}: runs in the fault-free replay but no result traces it")
            matches = [(i, o) for i, o in self.log.executions.get(inv, []) if o["n"] == nonce]
            if not matches:
                return self._fail(f"{function} {inv}: the traced output {nonce} was never produced")
            seen_input, output = matches[0]
            if seen_input != event:
                return self._fail(f"{function} {inv}: the execution whose output was used saw input "
                                  f"{seen_input!r}, the fault-free replay gives {event!r}")
            return output

        return oracle

    def _fail(self, message: str) -> Any:
        with self._lock:
            self.violations.append(message)
        raise RuntimeError(message)


def chosen_outputs(results: list[Any]) -> tuple[dict[str, int], list[str]]:
    """The nonce per invocation named by the results' traces, and any conflicts."""
    chosen: dict[str, int] = {}
    conflicts: list[str] = []
    for result in results:
        for inv, nonce in result["t"].items():
            if inv == "!conflict":
                conflicts.extend(str(c) for c in nonce)
            elif chosen.setdefault(inv, nonce) != nonce:
                conflicts.append(f"{inv}: results disagree ({chosen[inv]} vs {nonce})")
    return chosen, conflicts


def check_exactly_once(workflow: Workflow, outcome: RunResult, log: ExecutionLog, input_value: Any,
                       replay_store: Store) -> dict[str, int]:
    """Assert the run's results equal one fault-free run (see module docstring). Returns the
    output (nonce) of each invocation of that run."""
    assert outcome.failure is None, f"workflow failed: {outcome.failure}"
    assert outcome.results, "workflow produced no result"
    chosen, conflicts = chosen_outputs(outcome.results)
    assert not conflicts, f"consumers saw different outputs of one invocation: {conflicts}"
    oracle = _Oracle(log, chosen)
    platform = LocalPlatform(workflow, replay_store, workers=2, wrap=oracle.wrap)
    try:
        replay = platform.run(input_value, workflow_id=outcome.workflow_id, timeout=30)
    finally:
        platform.close()
    assert not oracle.violations, "\n".join(oracle.violations)
    assert oracle.replayed == set(chosen), (
        f"trace names invocations the fault-free run does not make: {sorted(set(chosen) - oracle.replayed)}")
    assert replay.results == outcome.results, "fault-free replay yields different results"
    return chosen


# What a finished workflow may leave behind: nothing is deleted by the runtime before its expiry
# (docs/coordination.md, the retention rule), so these kinds stay — and nothing else.
RETAINED_KINDS = frozenset({Kind.RESULT, Kind.FAILURE, Kind.CHECKPOINT, Kind.SET, Kind.STEP,
                            Kind.COMPENSATION, Kind.CHUNK})
EXPIRY_SLACK = 5  # seconds: whole-second rounding of expiries and the time the checks take


def retention_violations(store: Store, workflow_id: str, *, started_at: float,
                         kinds: frozenset[Kind] = RETAINED_KINDS) -> list[str]:
    """What the backend holds for a finished workflow that the retention rule does not allow:
    a set shard that does not expire at the workflow's deadline, or any other record of another
    kind, without an expiry (or already expired), or one that expires
    before the workflow's deadline (its start + TTL: every object must outlive the workflow's
    possible duplicates) or after now + TTL (+ slack; + the redelivery window instead when a
    store's TTL is shorter than it). Reads the backend's raw records, which `Store.records`
    would filter (an expired or TTL-less record is invisible there)."""
    backend = innermost(store)
    now = backend._clock()
    ttl = backend.ttl_seconds
    earliest = int(started_at) + ttl
    latest = now + max(ttl, DEFAULT_REDELIVERY_SECONDS) + EXPIRY_SLACK
    problems = []
    for record in raw_records(store, workflow_id):
        where = f"{record.kind.value} {record.key} (expires_at {record.expires_at})"
        if record.kind not in kinds:
            problems.append(f"unexpected kind: {where}")
        if record.kind is Kind.SET and record.expires_at:
            # Set shards live exactly to the deadline: only a running workflow reads or adds to
            # them (a duplicate past the deadline never reaches a join), so they may have expired.
            # (The deadline is set when the entry first runs, so it may lie after `earliest`.)
            if record.expires_at < earliest - EXPIRY_SLACK or record.expires_at > latest:
                problems.append(f"a set shard expiring before the workflow's deadline ({earliest}) "
                                f"or after now + TTL ({latest:.0f}): {where}")
            continue
        if not record.expires_at or record.expires_at <= now:
            problems.append(f"no expiry, or expired: {where}")
        elif record.expires_at > latest:
            problems.append(f"expires after now + TTL ({latest:.0f}): {where}")
        elif record.expires_at < earliest:
            problems.append(f"expires before the workflow's deadline ({earliest}): {where}")
    return problems


def store_snapshot(store: Store, workflow_id: str) -> dict[str, tuple]:
    """Everything the backend holds for a workflow, comparable: key → (kind, expiry, value,
    set size, set members)."""
    return {r.key: (r.kind, r.expires_at, r.value, r.size, dict(r.members))
            for r in raw_records(store, workflow_id)}


def check_checkpoints(store: Store, workflow_id: str, chosen: dict[str, int], log: ExecutionLog) -> None:
    """For a tracing workflow: the committed invocations are exactly those of the fault-free
    run (no execution outside it committed anything), each committed the output every consumer
    saw (the one the results' traces name), which one of its executions produced; and every set
    shard is full (every join completed; no stray shard of a divergent fan-out).

    An invocation commits its checkpoint (named after it), or — a function without
    instructions, always terminal — its result record (docs/coordination.md), whose value's
    trace names the invocation that produced it."""
    committed: dict[str, int] = {}
    for record in store.records(workflow_id):
        if record.kind is Kind.CHECKPOINT:
            committed[record.key] = decode(record.value)["n"]
        elif record.kind is Kind.RESULT:
            output = decode(record.value)["value"]
            producer = [inv for inv, nonce in output["t"].items() if nonce == output["n"]]
            assert len(producer) == 1, f"result {record.key}: no single producer in its trace: {producer}"
            assert committed.setdefault(producer[0], output["n"]) == output["n"], (
                f"{producer[0]}: its checkpoint and its result record hold different outputs")
        elif record.kind is Kind.SET:
            assert record.size and all(slot in record.members for slot in range(record.size)), (
                f"set shard {record.key} is not full: {dict(record.members)} of {record.size}")
    assert set(committed) == set(chosen), (
        f"committed but not in the fault-free run: {sorted(set(committed) - set(chosen))}; "
        f"in it but not committed: {sorted(set(chosen) - set(committed))}")
    for invocation, nonce in committed.items():
        assert nonce == chosen[invocation], f"{invocation}: committed {nonce}, consumers saw {chosen[invocation]}"
        assert any(out["n"] == nonce for _, out in log.executions.get(invocation, [])), (
            f"{invocation}: committed output {nonce} was produced by none of its executions")


class CommitWatch(StoreWrapper):
    """Counts, per key, the creates (and step transactions) that *created* it. With retained
    checkpoints a key is created at most once: a second creation means an object was gone
    while a duplicate could still arrive — the one thing the retention rule must prevent.
    After `freeze()` (the workflow finished) any creation at all is recorded in `late`."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.creations: Counter[str] = Counter()
        self.kinds: dict[str, Kind] = {}
        self.late: list[str] = []
        self._frozen = False
        self._lock = threading.Lock()

    def freeze(self) -> None:
        self._frozen = True

    def _created(self, key: str, kind: Kind) -> None:
        with self._lock:
            self.creations[key] += 1
            self.kinds[key] = kind
            if self._frozen:
                self.late.append(f"{kind.value} {key}")

    def create(self, key: str, value: bytes, *, workflow: str, kind: Kind = Kind.CHECKPOINT,
               expires_at: int) -> tuple[bytes, bool]:
        stored, created = super().create(key, value, workflow=workflow, kind=kind, expires_at=expires_at)
        if created:
            self._created(key, kind)
        return stored, created

    def transact(self, key: str, value: bytes, ops: Iterable[AppOp], *, workflow: str,
                 kind: Kind = Kind.STEP, guards: Iterable[Guard] = (),
                 expires_at: int) -> tuple[bytes, bool]:
        stored, created = super().transact(key, value, ops, workflow=workflow, kind=kind, guards=guards,
                                           expires_at=expires_at)
        if created:
            self._created(key, kind)
        return stored, created

    @property
    def recommits(self) -> list[str]:
        """Keys created more than once (must be empty)."""
        return sorted(f"{self.kinds[k].value} {k} x{n}" for k, n in self.creations.items() if n > 1)
