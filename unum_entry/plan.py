"""Egress planning: a pure function from (IR, envelope, committed output) to what egress does.

No I/O here, so every execution of one invocation (they all see the same committed output)
computes the same plan: the same sets, the same invocations with the same names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Final, overload

from unum_entry import naming
from unum_entry.codec import MSGPACK_INTS, encode
from unum_entry.conditions import evaluate, resolve_path
from unum_entry.envelope import DataRef, Envelope, Frame, Gather
from unum_entry.errors import PlanError
from unum_entry.frozen import ReadOnly
from unum_entry.ir import (CreateSet, Fail, FanIn, FanOut, FunctionIR, Invoke, Map, Next, Pop, Shape,
                           Succeed, Suspend)


class Call(ReadOnly):
    """One asynchronous invocation to dispatch."""

    __slots__ = ("function", "envelope")

    def __init__(self, function: str, envelope: Envelope) -> None:
        self.function: Final = function
        self.envelope: Final = envelope

    def with_envelope(self, envelope: Envelope) -> Call:
        """This call with `envelope` instead."""
        return Call(self.function, envelope)


class Join(ReadOnly):
    """Add this invocation's checkpoint at `slot` of the join set `set_key` of `width` branches
    (unum_entry.fanin); whoever sees every branch joined invokes `target`."""

    __slots__ = ("set_key", "width", "slot", "target", "target_frames")

    def __init__(self, set_key: str, width: int, slot: int, target: str, target_frames: tuple[Frame, ...]) -> None:
        self.set_key: Final = set_key
        self.width: Final = width
        self.slot: Final = slot
        self.target: Final = target
        self.target_frames: Final = target_frames

    def target_call(self, env: Envelope) -> Call:
        """The target's invocation: its inputs are the join set's members (read by its ingress)."""
        return Call(self.target, Envelope(workflow=env.workflow, frames=self.target_frames, gathered=True,
                                          gather=Gather(self.set_key, self.width), deadline=env.deadline))


class Selected(ReadOnly):
    """A part of the committed output picked by an IR path (the terminal result of `succeed`)."""

    __slots__ = ("value",)

    value: Final[Any]

    def __init__(self, value: Any) -> None:
        self.value = value


class Plan(ReadOnly):
    """What egress does over the committed output: the calls to dispatch (a tuple, or a
    fan-out's `FanOutCalls`, built when read), the set to join, the end (`terminal`: with
    `result`, the workflow result when not the whole output; with `failure`, the workflow fails
    with this {"Error", "Cause"})."""

    __slots__ = ("calls", "join", "terminal", "result", "failure")

    def __init__(self, calls: Sequence[Call] = (), join: Join | None = None, terminal: bool = False,
                 result: Selected | None = None, failure: dict[str, Any] | None = None) -> None:
        self.calls: Final = calls
        self.join: Final = join
        self.terminal: Final = terminal
        self.result: Final = result
        self.failure: Final = failure


class Committed(ReadOnly):
    """The committed output of the invocation being planned."""

    __slots__ = ("value", "encoded_size", "checkpoint")

    value: Final[Any]
    encoded_size: Final[int]
    checkpoint: Final[str | None]  # None when the function runs without a checkpoint

    def __init__(self, value: Any, encoded_size: int, checkpoint: str | None) -> None:
        self.value = value
        self.encoded_size = encoded_size
        self.checkpoint = checkpoint


def condition_context(ir: FunctionIR, env: Envelope, invocation: str) -> dict[str, Any]:
    """What `$$` means in a condition: the invocation's identity (the same in every execution)."""
    top = env.top
    return {
        "Execution": {"Id": env.workflow},
        "Function": {"Name": ir.function, "Invocation": invocation},
        "Fanout": {"Index": top.index, "Size": top.size, "Iteration": top.iteration, "Depth": len(env.frames) - 1},
    }  # no Attempt: it differs between executions of one invocation (the IR rejects it)


def plan(ir: FunctionIR, env: Envelope, out: Committed, *, invocation: str, inline_limit: int) -> Plan:
    """Run the IR program over the committed output (see unum_entry.ir for the semantics)."""
    frames = list(env.frames)
    pending_sets: list[CreateSet] = []
    context: dict[str, Any] | None = None  # built at the first condition (most programs have none)
    for ins in ir.instructions:
        if isinstance(ins, Pop):
            if len(frames) == 1:
                raise PlanError(f"{ir.source}: pop at the root frame (no fan-out to pop)")
            frames.pop()
        elif isinstance(ins, Next):
            top = frames[-1]
            frames[-1] = Frame(top.index, top.size, top.iteration + 1)
        elif isinstance(ins, CreateSet):
            pending_sets.append(ins)
        elif ins.when is not None and not evaluate(ins.when, out.value,
                                                   context or (context := condition_context(ir, env, invocation))):
            if isinstance(ins, (Map, FanOut)):
                pending_sets.clear()  # they belonged to this fan-out
        else:
            built = _transition(ins, ir, env, out, tuple(frames), pending_sets, inline_limit)
            if built is not None:
                return built
    return Plan(terminal=True)


class Program:
    """One function's IR precompiled for planning, once per Runtime: what depends on the IR
    alone is decided here, so a transition does only the work that depends on its envelope
    and output. `plan` answers exactly what the module's `plan` answers; a program of one
    unconditional `invoke` (a chain hop) or `fan_in` (a fan-out branch) skips the
    interpreter loop, and a fan-in branch reuses the join set's name of the previous branch
    of the same fan-out (the same digest for every branch of a join)."""

    __slots__ = ("ir", "_only", "_set", "hop", "branch")

    def __init__(self, ir: FunctionIR) -> None:
        self.ir = ir
        ins = ir.instructions
        only = ins[0] if len(ins) == 1 else None
        self._only = only if isinstance(only, (Invoke, FanIn)) and only.when is None else None
        # A chain hop's program (one unconditional invoke): `hop_call` is its whole plan.
        self.hop = self._only if isinstance(self._only, Invoke) else None
        # A fan-in branch's program (one unconditional fan_in): its join depends on the envelope alone.
        self.branch = self._only if isinstance(self._only, FanIn) else None
        self._set: tuple[Any, str] = ((), "")  # (what names a join set, its name): one tuple, swapped whole

    def plan(self, env: Envelope, out: Committed, *, invocation: str, inline_limit: int) -> Plan:
        """`plan(...)` of the module."""
        only = self._only
        if only is None:
            return plan(self.ir, env, out, invocation=invocation, inline_limit=inline_limit)
        if isinstance(only, Invoke):
            return Plan(calls=(self.hop_call(env, out.value, out.encoded_size, out.checkpoint, inline_limit),))
        return _fan_in(only, env, env.frames, self) or Plan(terminal=True)

    def branch_plan(self, env: Envelope) -> Plan | None:
        """The plan of a fan-in branch's program (one unconditional `fan_in`), which depends on
        the envelope alone: `plan(...)` of any output, known before the output is (so the
        branch's commit may make its join's first set add: unum_entry.checkpoint.commit_joining),
        and its egress's plan (`egress.egress`). None for any other program, or a delivery outside a fan-out."""
        branch = self.branch
        if branch is None or len(env.frames) == 1:
            return None
        return _fan_in(branch, env, env.frames, self) or Plan(terminal=True)

    def hop_call(self, env: Envelope, value: Any, encoded_size: int, checkpoint: str | None, inline_limit: int) -> Call:
        """The one call of a chain hop's plan (`hop` is set) over the committed output (`value`,
        as in `Committed`): `plan(...).calls[0]`, the only thing that plan holds, without
        building the Plan."""
        hop = self.hop
        if hop is None:
            raise PlanError(f"{self.ir.source}: hop_call of a program that is not one unconditional invoke")
        return Call(hop.function, _chain_envelope(env, value, encoded_size, checkpoint, env.frames, inline_limit,
                                                  hop.path))

    def set_key(self, workflow: str, target: str, target_frames: tuple[Frame, ...], size: int) -> str:
        """`naming.fan_in_set_key`, remembered for the last join set named (threads may race:
        each reads and replaces the whole tuple, so a name always goes with its own parts)."""
        parts = (workflow, target, target_frames, size)
        known, name = self._set
        if known == parts:
            return name
        name = naming.fan_in_set_key(workflow, target, target_frames, size)
        self._set = (parts, name)
        return name


def _transition(ins, ir: FunctionIR, env: Envelope, out: Committed, frames: tuple[Frame, ...],
                pending_sets: Sequence[CreateSet], inline_limit: int) -> Plan | None:
    if isinstance(ins, Invoke):
        return Plan(calls=(Call(ins.function, _chain_envelope(env, out.value, out.encoded_size, out.checkpoint, frames,
                                                              inline_limit, ins.path)),))
    if isinstance(ins, Succeed):
        return Plan(terminal=True, result=None if ins.path is None else Selected(resolve_path(ins.path, out.value, {})))
    if isinstance(ins, Fail):
        return Plan(terminal=True, failure=_failure(ins, ir, out.value))
    if isinstance(ins, Suspend):  # waits for a callback: nothing to invoke, no result (unum_entry.asl.callbacks)
        return Plan()
    if isinstance(ins, FanIn):
        return _fan_in(ins, env, frames)
    if isinstance(ins, Map):
        items = _map_items(ins, ir, out.value)
        checkpoint, path = out.checkpoint, ins.items

        def item_ref(i: int) -> DataRef:  # built when the call is sent: a wide map is not all in memory at once
            item = items[i]
            if _small(item, inline_limit):
                return DataRef(checkpoint, item, i, path)
            return DataRef(checkpoint, item=i, path=path)

        fanned = _fan_out(env, out, frames, [ins.function] * len(items), item_ref, pending_sets)
        lanes = _lanes(ins, ir, out.value)
        if 0 < lanes < len(items):
            # Only the first `lanes` items now; each passes its lane on (`continuation`).
            calls = tuple(call.with_envelope(replace(call.envelope, lanes=lanes)) for call in fanned.calls[:lanes])
            fanned = Plan(calls, fanned.join, fanned.terminal, fanned.result, fanned.failure)
        return fanned
    if isinstance(ins, FanOut):
        whole = _inline_if_small(out, inline_limit)
        return _fan_out(env, out, frames, list(ins.branches), lambda _: DataRef(ref=out.checkpoint, **whole),
                        pending_sets)
    raise PlanError(f"{ir.source}: unsupported instruction {ins!r}")  # pragma: no cover


def _chain_envelope(env: Envelope, value: Any, encoded_size: int, checkpoint: str | None, frames: tuple[Frame, ...],
                    inline_limit: int, path: str | None = None) -> Envelope:
    """The successor's envelope of a chain hop over the committed output (as in `Committed`)."""
    sent = value if path is None else resolve_path(path, value, {})
    if checkpoint is None:
        # No checkpoint of ours to reference: the value must travel inline.
        return Envelope(workflow=env.workflow, frames=frames, inputs=(DataRef(value=sent),), deadline=env.deadline)
    # Inline when small (`_inline_if_small`, or `_small` of the part a path picks), always by reference.
    small = encoded_size <= inline_limit if path is None else len(encode(sent)) <= inline_limit
    data = DataRef(checkpoint, sent, None, path) if small else DataRef(checkpoint, path=path)
    return _successor(env.workflow, frames, (data,), env.deadline)


def _successor(workflow: str, frames: tuple[Frame, ...], inputs: tuple[DataRef, ...], deadline: int) -> Envelope:
    """`Envelope(workflow=..., frames=..., inputs=..., deadline=...)` (every other field its
    default), positionally: the envelopes a plan builds per transition."""
    return Envelope(workflow, frames, inputs, False, None, 0, False, deadline)


def _fan_out(env: Envelope, out: Committed, frames: tuple[Frame, ...], functions: list[str],
             ref_of: Callable[[int], DataRef], pending_sets: Sequence[CreateSet]) -> Plan:
    n = len(functions)
    if out.checkpoint is None:  # IR validation rejects this; keep the plan total anyway
        raise PlanError("a fan-out needs the origin's checkpoint (set \"checkpoint\": true)")
    if n == 0:
        return _empty_fan_out(env, frames, pending_sets)
    workflow, deadline = env.workflow, env.deadline

    def call(i: int) -> Call:
        return Call(functions[i], _successor(workflow, frames + (Frame(i, n, 0),), (ref_of(i),), deadline))

    return Plan(calls=FanOutCalls(call, range(n), workflow=workflow, functions=functions))


class FanOutCalls(Sequence[Call]):
    """A fan-out's calls, each built when read (`make(i)` for position i; pure, so any thread
    may read any, any number of times): egress sends a million-item map without a million
    envelopes in memory at once, and the embedded engine queues each call as (these calls, its
    position) and builds it when a worker takes it (unum_entry.local.handoff). Slices are
    views; equal to any sequence of the same calls. `workflow` and `functions` (indexed by
    position; empty when unknown) say where each call goes without building it."""

    __slots__ = ("_make", "_positions", "workflow", "functions")

    def __init__(self, make: Callable[[int], Call], positions: range, *, workflow: str = "",
                 functions: Sequence[str] = ()) -> None:
        self._make = make
        self._positions = positions
        self.workflow = workflow
        self.functions = functions

    @property
    def positions(self) -> range:
        """The positions of these calls in the whole fan-out (a slice's are a sub-range)."""
        return self._positions

    def build(self, position: int) -> Call:
        """The call at `position` of the whole fan-out (not an index into a slice)."""
        return self._make(position)

    def redelivered(self) -> FanOutCalls:
        """These calls as a duplicate of their sender sends them again: each envelope marked
        `redelivered`, so its ingress reads its checkpoint before the handler (a call that
        committed runs only its egress again)."""
        make = self._make
        return FanOutCalls(lambda i: _redelivered(make(i)), self._positions, workflow=self.workflow,
                           functions=self.functions)

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> Call: ...
    @overload
    def __getitem__(self, index: slice) -> FanOutCalls: ...
    def __getitem__(self, index: int | slice) -> Call | FanOutCalls:
        if isinstance(index, slice):
            return FanOutCalls(self._make, self._positions[index], workflow=self.workflow, functions=self.functions)
        return self._make(self._positions[index])

    def __iter__(self) -> Iterator[Call]:
        make = self._make
        return (make(i) for i in self._positions)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(other) == len(self) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"FanOutCalls({list(self)!r})"


def _redelivered(call: Call) -> Call:
    return Call(call.function, replace(call.envelope, redelivered=True))


def _empty_fan_out(env: Envelope, frames: tuple[Frame, ...], pending_sets: Sequence[CreateSet]) -> Plan:
    """A map over nothing: with no join the origin is terminal; an aggregate join still owes
    its target a call (the aggregate of nothing is []); a neighbour join has nothing to fold."""
    if not pending_sets:
        return Plan(terminal=True)
    if any(cs.shape is Shape.NEIGHBOUR for cs in pending_sets):
        names = ", ".join(repr(cs.function) for cs in pending_sets if cs.shape is Shape.NEIGHBOUR)
        raise PlanError(f"map over zero items cannot feed the neighbour join of {names} (a fold needs at least one item)")
    if len(pending_sets) > 1:
        raise PlanError(f"map over zero items has {len(pending_sets)} join targets; only one can receive the empty list")
    empty = Envelope(workflow=env.workflow, frames=frames, inputs=(), gathered=True, deadline=env.deadline)
    return Plan(calls=(Call(pending_sets[0].function, empty),))


def _fan_in(ins: FanIn, env: Envelope, frames: tuple[Frame, ...], program: Program | None = None) -> Plan | None:
    if len(frames) == 1:
        raise PlanError(f"fan_in to {ins.function!r} outside any fan-out (no frame to join on)")
    top = frames[-1]
    if ins.shape is Shape.AGGREGATE:
        target_frames, slot, width = frames[:-1], top.index, top.size
    else:
        # neighbour: target i joins branch i (slot 0) and the target's own output at i-1 (slot 1)
        index = top.index + ins.offset
        if index >= top.size:
            return None  # no neighbour to the right: this transition does not fire
        target_frames, slot, width = frames[:-1] + (Frame(index, top.size, 0),), ins.slot, 1 if index == 0 else 2
    set_key = (naming.fan_in_set_key(env.workflow, ins.function, target_frames, top.size) if program is None
               else program.set_key(env.workflow, ins.function, target_frames, top.size))
    return Plan((), Join(set_key, width, slot, ins.function, target_frames))


def _failure(ins: Fail, ir: FunctionIR, value: Any) -> dict[str, Any]:
    """The `{"Error", "Cause"}` a `fail` transition ends the workflow with (strings or null, as Step Functions)."""
    error = value if ins.path is None else resolve_path(ins.path, value, {})
    if not isinstance(error, dict):
        raise PlanError(f"function {ir.function!r}: fail needs an object with Error and Cause, found {type(error).__name__}")
    # Step Functions allows a Fail without Error/Cause: they stay null then.
    return {key: None if error.get(key) is None else str(error[key]) for key in ("Error", "Cause")}


def continuation(ir: FunctionIR, env: Envelope) -> Call | None:
    """The next item of this map item's lane (`Envelope.lanes`), or None at the lane's end.

    It is derived from our own request alone: same function, same origin checkpoint (the item
    travels by reference: we do not hold it).
    """
    if not env.lanes or env.gathered or len(env.inputs) != 1:
        return None
    top = env.top
    index = top.index + env.lanes
    source = env.inputs[0]
    if index >= top.size or source.ref is None or source.item is None:
        return None
    item = DataRef(ref=source.ref, item=source.item + env.lanes, path=source.path)
    frames = env.frames[:-1] + (Frame(index, top.size, top.iteration),)
    return Call(ir.function, Envelope(workflow=env.workflow, frames=frames, inputs=(item,), lanes=env.lanes,
                                      deadline=env.deadline))


def _lanes(ins: Map, ir: FunctionIR, value: Any) -> int:
    limit = ins.max_concurrency
    if isinstance(limit, str):
        limit = resolve_path(limit, value, {})
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise PlanError(f"function {ir.function!r}: map max_concurrency at {ins.max_concurrency} must be an integer >= 0, found {limit!r}")
    return limit or 0


def _map_items(ins: Map, ir: FunctionIR, value: Any) -> list[Any]:
    items = value if ins.items is None else resolve_path(ins.items, value, {})
    if not isinstance(items, list):
        where = f" at {ins.items}" if ins.items else ""
        raise PlanError(f"function {ir.function!r}: map over {ins.function!r} needs a list{where}, found {type(items).__name__}")
    return items


def _inline_if_small(out: Committed, inline_limit: int) -> dict[str, Any]:
    return {"value": out.value} if out.encoded_size <= inline_limit else {}


#: Types whose msgpack encoding is at most 9 bytes (an int in msgpack's range, a float64, true,
#: false, nil): `_small` inlines them without encoding when the limit allows 9.
_FIXED_WIDTH = frozenset((int, float, bool, type(None)))


def _small(item: Any, inline_limit: int) -> bool:
    """Whether a map item travels inline (its encoding within `inline_limit`) besides by reference."""
    kind = type(item)
    if kind in _FIXED_WIDTH and inline_limit >= 9 and (kind is not int or item in MSGPACK_INTS):
        return True
    return len(encode(item)) <= inline_limit
