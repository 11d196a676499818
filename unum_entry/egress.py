"""Egress: after the handler (seed 003 §3.3-3.5).

1. Commit: create-if-absent checkpoint; the stored value (first writer's) is the output from here on.
2. Plan the IR over that output (pure, see unum_entry.plan).
3. Create the fan-out's sets; collect the garbage this invocation is responsible for (its
   consumed inputs, its slot in the fan-out GC set).
4. Dispatch every invocation concurrently; or join a fan-in set and invoke the target when the
   set is full; or, when terminal, record the workflow result and drop our own checkpoint.

Every step is safe to repeat: a retry that crashes anywhere re-runs the same steps with the same
committed output, so the same names and sets come out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Any, Protocol

from unum_entry import naming
from unum_entry.codec import decode, encode
from unum_entry.envelope import ROOT, DataRef, Envelope, GcDuty
from unum_entry.errors import SetGone
from unum_entry.hooks import FaultPoint, Hooks
from unum_entry.ir import FunctionIR
from unum_entry.plan import Call, Committed, Join, Plan, continuation, plan
from unum_entry.steps import abort_workflow
from unum_entry.stores.base import Kind, Store


class Invoker(Protocol):
    """Asynchronous invocation of a function by name (Lambda Event invoke, Pub/Sub, local queue)."""

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        """Queue one invocation; return once the platform accepted it."""


@dataclass(frozen=True)
class EgressContext:
    """What egress works with; one per Runtime."""

    ir: FunctionIR
    store: Store
    invoker: Invoker
    executor: Executor
    hooks: Hooks
    inline_limit: int
    dispatch_workers: int = 64
    # Steps the invocation being egressed recorded (unum_entry.steps; 0 for most functions): its
    # step journal is collected together with its checkpoint, by whoever collects that.
    steps: int = 0


@dataclass(frozen=True)
class EgressReport:
    """What one egress did (logs, tests, bench)."""

    value: Any
    created: bool
    invoked: int
    terminal: bool
    failed: bool = False  # terminal through an IR `fail`: the workflow aborted


def commit(ctx: EgressContext, env: Envelope, checkpoint: str | None, encoded: bytes) -> tuple[bytes, bool]:
    """Create the checkpoint unless it exists; returns (the committed bytes, created?)."""
    if checkpoint is None:
        return encoded, True
    return ctx.store.create(checkpoint, encoded, workflow=env.workflow)


def egress(ctx: EgressContext, env: Envelope, invocation: str, checkpoint: str | None,
           stored: bytes, created: bool) -> EgressReport:
    """Run steps 2-4 over the committed bytes `stored`."""
    value = decode(stored)
    the_plan = plan(ctx.ir, env, Committed(value, len(stored), checkpoint),
                    invocation=invocation, inline_limit=ctx.inline_limit)
    journal = naming.journal_keys(checkpoint, ctx.steps) if ctx.steps and checkpoint is not None else []
    if journal:
        the_plan = _collect_journal_with(the_plan, checkpoint, journal)
    gc_set = the_plan.gc_set.key if the_plan.gc_set is not None else None
    marker = naming.started_key(env.workflow) if env.start and checkpoint is not None else None
    missing = {gc_set, marker} - {None}
    if not created and missing and checkpoint is not None:
        missing = _still_missing(ctx, checkpoint, missing)
        if missing is None:
            return EgressReport(value=value, created=created, invoked=0, terminal=False)
    if gc_set in missing and _create_sets(ctx, env, the_plan) and ctx.store.get(checkpoint) is None:
        # We made the GC set, yet our checkpoint is gone: another execution of ours ran the
        # whole fan-out meanwhile, and its last branch deleted the checkpoint, then the set —
        # maybe before ours appeared. Deleting it is safe either way (a full set is only
        # deleted). Join sets we made are left alone: ours may be the one the branches are
        # still joining through (we may have created it first); a zombie one stays to its TTL.
        ctx.store.delete([gc_set])
        return EgressReport(value=value, created=created, invoked=0, terminal=False)
    if marker in missing:
        # Before anyone can consume (and collect) our checkpoint: the witness for late
        # duplicates of the workflow's first invocation (see ingress).
        _, made_marker = ctx.store.create(marker, b"", workflow=env.workflow, kind=Kind.MARKER)
        if made_marker and not created and _finished(ctx.store, env.workflow):
            # A replay: the workflow ran to its end (whose last step deletes the marker) while
            # it was between its check and its create, so ours would be a zombie. (A first
            # execution has the same window between its commit and this create, but a whole
            # workflow must run through it; checking there too would cost every workflow reads.)
            ctx.store.delete([marker])
            return EgressReport(value=value, created=created, invoked=0, terminal=False)
    # Collect our inputs BEFORE invoking anyone: then a consumer can only have committed (and
    # collected our checkpoint) after our inputs are gone, so a retry of ours that finds its
    # checkpoint gone also finds its inputs gone and is dropped as stale instead of re-running.
    ctx.hooks.at(FaultPoint.BEFORE_GC, invocation)
    collect(ctx.store, env.gc if checkpoint is not None else GcDuty())
    lane = continuation(ctx.ir, env)
    # Our lane's next item first: a consumer of ours (which may collect our checkpoint, making
    # our retries stale) is invoked only after it was sent.
    invoked = _dispatch(ctx, invocation, [lane]) if lane is not None else 0
    invoked += _dispatch(ctx, invocation, the_plan.calls)
    if the_plan.join is not None:
        invoked += _join(ctx, env, invocation, checkpoint, the_plan.join)
    if the_plan.terminal and the_plan.failure is not None:
        _record_failure(ctx, env, invocation, the_plan.failure)
    elif the_plan.terminal:
        result = value if the_plan.result is None else the_plan.result.value
        record = encode({"at": [f.index for f in env.frames[1:]], "value": result})
        ctx.store.create(naming.result_key(env.workflow, env.frames), record, workflow=env.workflow, kind=Kind.RESULT)
    if the_plan.terminal:
        done = [checkpoint, *journal] if checkpoint is not None else []
        if len(env.frames) == 1 or the_plan.failure is not None:  # the workflow has finished
            done.append(naming.started_key(env.workflow))
        ctx.store.delete(done)  # the result record now holds the value
    return EgressReport(value=value, created=created, invoked=invoked, terminal=the_plan.terminal,
                        failed=the_plan.failure is not None)


def _record_failure(ctx: EgressContext, env: Envelope, invocation: str, failure: dict[str, Any]) -> None:
    """An IR `fail` (a Step Functions Fail state) aborts the workflow: its failure record (first
    one wins, the shape `Runtime.fail` writes after a handler's last attempt), then the
    compensations of its completed steps (none: one read)."""
    record = {**failure, "Function": ctx.ir.function, "Invocation": invocation, "Attempts": env.attempt + 1}
    abort_workflow(ctx.store, ctx.invoker, env.workflow, record)


def _still_missing(ctx: EgressContext, checkpoint: str, wanted: set[str]) -> set[str] | None:
    """For a replay about to create its fan-out sets or the start marker: which of `wanted`
    still have to be made, or None when our checkpoint is gone and we must stop.

    Our consumers may have committed and collected our checkpoint (and then the sets and the
    marker) while we replayed; creating anything then would only make zombies nobody removes.
    The GC set and the marker are deleted only after our checkpoint, so one still missing
    while the checkpoint exists was never made (the first execution crashed first). Two reads,
    in this order: a batch read is no snapshot, and the argument needs the absence observed
    *before* the checkpoint's presence.
    """
    missing = wanted - set(ctx.store.read(wanted))
    if missing and ctx.store.get(checkpoint) is None:
        return None
    return missing


def collect(store: Store, gc: GcDuty) -> None:
    """Delete what this invocation consumed (seed 003 §3.5). Call only after committing."""
    if gc.delete:
        store.delete(gc.delete)
    if gc.set is not None and gc.slot is not None:
        try:
            state = store.add_to_set(gc.set, gc.slot, "1")
        except SetGone:
            return  # another branch saw it full and collected the origin already
        if state.has_slot(gc.slot) and state.full:
            # The origin's checkpoint strictly before its set: an origin replay that finds
            # its checkpoint gone knows any set it just re-created is a zombie (see egress).
            store.delete(gc.on_full)
            store.delete([gc.set])


def _create_sets(ctx: EgressContext, env: Envelope, the_plan: Plan) -> bool:
    """The origin creates every set its branches will use, before any branch can run: the join
    sets first, the fan-out GC set last, so an existing GC set means all were made. Returns
    whether this call created the GC set."""
    gc_set, join_sets = the_plan.gc_set, the_plan.join_sets
    if gc_set is None:
        return False
    _run_all(ctx.executor, [lambda s=s: ctx.store.create_set(s.key, s.size, workflow=env.workflow) for s in join_sets])
    return ctx.store.create_set(gc_set.key, gc_set.size, workflow=env.workflow)


def _finished(store: Store, workflow: str) -> bool:
    """Whether the workflow has its root result or its failure record."""
    return bool(store.read([naming.result_key(workflow, ROOT), naming.failure_key(workflow)]))


def _dispatch(ctx: EgressContext, invocation: str, calls: Sequence[Call]) -> int:
    """Invoke every call concurrently: one task per worker, each sending its share, so a wide
    fan-out pays for `dispatch_workers` tasks, not one per branch. A crash injected before one
    invoke leaves the others sent."""
    if not calls:
        return 0

    def send(share: Sequence[Call]) -> None:
        for call in share:
            ctx.hooks.at(FaultPoint.BEFORE_INVOKE, invocation)
            ctx.invoker.invoke(call.function, call.envelope.to_wire())

    tasks = min(len(calls), ctx.dispatch_workers)
    if tasks == 1:
        send(calls)
    else:
        _run_all(ctx.executor, [lambda i=i: send(calls[i::tasks]) for i in range(tasks)])
    return len(calls)


def _join(ctx: EgressContext, env: Envelope, invocation: str, checkpoint: str | None, join: Join) -> int:
    """Add our checkpoint to the fan-in set; invoke the target if we see it full (seed 003 §3.4)."""
    if checkpoint is None:  # IR validation rejects fan_in without a checkpoint
        return 0
    member = f"{checkpoint}+{ctx.steps}" if ctx.steps else checkpoint  # the target collects our steps too
    try:
        state = ctx.store.add_to_set(join.set_key, join.slot, member)
    except SetGone:
        state = None
    if state is None or not state.has_slot(join.slot):
        # Either the target committed and collected the set (and the branch checkpoints), or
        # the set belongs to a fan-out of another size: our checkpoint is the leftover of a
        # late, divergent re-execution that nobody else will ever delete.
        ctx.store.delete(_member_keys(member))
        return 0
    if not state.full:
        return 0
    members = state.ordered_members()
    refs = [m.partition("+")[0] for m in members]
    target_env = Envelope(workflow=env.workflow, frames=join.target_frames,
                          inputs=tuple(DataRef(ref=r) for r in refs), gathered=True,
                          gc=GcDuty(delete=(*(k for m in members for k in _member_keys(m)), join.set_key)))
    return _dispatch(ctx, invocation, [Call(join.target, target_env)])


def _member_keys(member: str) -> list[str]:
    """A fan-in set member `checkpoint[+steps]`: the checkpoint and its step journal's keys."""
    checkpoint, _, steps = member.partition("+")
    return [checkpoint, *naming.journal_keys(checkpoint, int(steps))] if steps else [checkpoint]


def _collect_journal_with(the_plan: Plan, checkpoint: str, journal: Sequence[str]) -> Plan:
    """Whoever is told to collect our checkpoint (a consumer's `gc.delete`, the fan-out GC
    set's `on_full`) collects our step journal with it: not earlier, since a concurrent
    execution of ours still inside its handler must keep finding its step records."""
    def extended(keys: tuple[str, ...]) -> tuple[str, ...]:
        return (*keys, *journal) if checkpoint in keys else keys

    calls = tuple(replace(call, envelope=replace(call.envelope, gc=replace(
        call.envelope.gc, delete=extended(call.envelope.gc.delete), on_full=extended(call.envelope.gc.on_full))))
        for call in the_plan.calls)
    return replace(the_plan, calls=calls)


def _run_all(executor: Executor, tasks: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run tasks concurrently; wait for all; re-raise the first failure after all finished.
    Returns their results in order. A single task runs on the calling thread."""
    if len(tasks) == 1:
        return [tasks[0]()]
    futures = [executor.submit(task) for task in tasks]
    first_error: BaseException | None = None
    for future in futures:
        error = future.exception()
        if error is not None and first_error is None:
            first_error = error
    if first_error is not None:
        raise first_error
    return [future.result() for future in futures]
