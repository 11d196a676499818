"""Egress: after the handler (docs/coordination.md).

1. Commit: create-if-absent checkpoint; the stored value (the first writer's) is the output
   from here on, for this execution and every other execution of the invocation.
2. Plan the IR over that output (pure, see unum_entry.plan).
3. Dispatch every invocation concurrently; or join the fan-in set and invoke the target when
   every branch joined; or, when terminal, record the workflow's result (or failure).

Nothing is deleted (unum_entry.retention), so every step is safe to repeat: a retry that
crashes anywhere re-runs the same steps over the same committed output. An execution whose
commit lost is a duplicate: it invokes only the successors that have not committed yet, and
marks what it sends `redelivered`, so a duplicate never sends a wave down the workflow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from unum_entry import fanin, naming
from unum_entry.codec import UnencodableValue, decode, encode
from unum_entry.envelope import DataRef, Envelope
from unum_entry.frozen import Frozen, frozen
from unum_entry.hooks import FaultPoint, Hooks
from unum_entry.ir import FunctionIR
from unum_entry.plan import Call, Committed, Join, Plan, continuation, plan
from unum_entry.retention import Retention
from unum_entry.stores.base import Kind, Store

if TYPE_CHECKING:
    from concurrent.futures import Executor


class Invoker(Protocol):
    """Asynchronous invocation of a function by name (Lambda Event invoke, Pub/Sub, local queue)."""

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        """Queue one invocation; return once the platform accepted it."""


# What a workflow's abort does (unum_entry.steps.abort_workflow): record the failure, start
# the compensations. Passed in, so egress knows nothing of steps.
AbortWorkflow = Callable[[Store, Invoker, str, dict[str, Any]], None]


@frozen
class EgressContext(Frozen):
    """What egress works with; one per Runtime."""

    ir: FunctionIR
    store: Store
    invoker: Invoker
    executor: Executor
    hooks: Hooks
    inline_limit: int
    retention: Retention
    abort: AbortWorkflow
    dispatch_workers: int = 64

    def __init__(self, ir: FunctionIR, store: Store, invoker: Invoker, executor: Executor, hooks: Hooks,
                 inline_limit: int, retention: Retention, abort: AbortWorkflow, dispatch_workers: int = 64) -> None:
        self.__dict__.update(ir=ir, store=store, invoker=invoker, executor=executor, hooks=hooks,
                             inline_limit=inline_limit, retention=retention, abort=abort,
                             dispatch_workers=dispatch_workers)


@frozen
class EgressReport(Frozen):
    """What one egress did (logs, tests, bench)."""

    value: Any
    created: bool
    invoked: int
    terminal: bool
    failed: bool = False  # terminal through an IR `fail`: the workflow aborted

    def __init__(self, value: Any, created: bool, invoked: int, terminal: bool, failed: bool = False) -> None:
        self.__dict__.update(value=value, created=created, invoked=invoked, terminal=terminal, failed=failed)


def commits_its_result(ir: FunctionIR) -> bool:
    """A checkpointed function without instructions is always terminal: its commit IS the
    workflow's result record at its fan-out position (one write instead of checkpoint + result).
    Nothing reads such a function's checkpoint: it has no successors and joins nothing."""
    return ir.checkpoint and not ir.instructions


def commit_key(ir: FunctionIR, env: Envelope, invocation: str) -> str | None:
    """Where an execution's output is committed: its checkpoint (named `invocation`), the result
    record for a function that `commits_its_result`, or nowhere without a checkpoint."""
    if not ir.checkpoint:
        return None
    return naming.result_key(env.workflow, env.frames) if commits_its_result(ir) else invocation


def commit(ctx: EgressContext, env: Envelope, key: str | None, output: Any) -> tuple[bytes, bool]:
    """Create the commit record `key` (see `commit_key`) unless it exists; returns (the committed
    bytes, created?). The checkpoint rule: one conditional write; a loser gets the winner's
    bytes back. Raises UnencodableValue before writing anything when the output cannot be stored."""
    what = f"output of function {ctx.ir.function!r}"
    if key is None:
        return encode(output, what=what), True
    if commits_its_result(ctx.ir):
        return ctx.store.create(key, _result_record(env, output), workflow=env.workflow, kind=Kind.RESULT,
                                expires_at=ctx.retention.expires_at(env.deadline))
    return ctx.store.create(key, encode(output, what=what), workflow=env.workflow,
                            expires_at=ctx.retention.expires_at(env.deadline))


def _result_record(env: Envelope, value: Any) -> bytes:
    """A workflow result at the fan-out position of `env` (unum_entry.outcome reads it)."""
    return encode({"at": [f.index for f in env.frames[1:]], "of": [f.size for f in env.frames[1:]], "value": value},
                  what="workflow result")


def egress(ctx: EgressContext, env: Envelope, invocation: str, checkpoint: str | None,
           stored: bytes, created: bool) -> EgressReport:
    """Run steps 2-3 over the committed bytes `stored` (`created`: this execution's commit won)."""
    if commits_its_result(ctx.ir):  # the commit was the result record: nothing more to do
        return EgressReport(value=decode(stored)["value"], created=created, invoked=0, terminal=True)
    value = decode(stored)
    the_plan = plan(ctx.ir, env, Committed(value, len(stored), checkpoint),
                    invocation=invocation, inline_limit=ctx.inline_limit)
    lane = continuation(ctx.ir, env)
    calls = [lane, *the_plan.calls] if lane is not None else list(the_plan.calls)
    if not created:
        calls = _not_yet_committed(ctx, calls)
    invoked = _dispatch(ctx, invocation, calls)
    if the_plan.join is not None and checkpoint is not None:
        invoked += _join(ctx, env, invocation, checkpoint, the_plan.join, created)
    if the_plan.terminal:
        _finish(ctx, env, invocation, value, the_plan)
    return EgressReport(value=value, created=created, invoked=invoked, terminal=the_plan.terminal,
                        failed=the_plan.failure is not None)


def _finish(ctx: EgressContext, env: Envelope, invocation: str, value: Any, the_plan: Plan) -> None:
    """A terminal invocation: the result record at its fan-out position (the first one wins),
    or, through an IR `fail` (a Step Functions Fail state), the workflow's abort: its failure
    record (the shape `Runtime.fail` writes after a handler's last attempt), then the
    compensations of its completed steps."""
    if the_plan.failure is not None:
        record = {**the_plan.failure, "Function": ctx.ir.function, "Invocation": invocation, "Attempts": env.attempt + 1}
        ctx.abort(ctx.store, ctx.invoker, env.workflow, record)
        return
    result = value if the_plan.result is None else the_plan.result.value
    ctx.store.create(naming.result_key(env.workflow, env.frames), _result_record(env, result), workflow=env.workflow,
                     kind=Kind.RESULT, expires_at=ctx.retention.expires_at(env.deadline))


def _not_yet_committed(ctx: EgressContext, calls: Sequence[Call]) -> list[Call]:
    """The duplicate path: of our successors, those whose checkpoint does not exist yet (one
    batch read), each marked `redelivered` so its ingress reads its checkpoint first. A
    successor that committed is never invoked again by a duplicate: its own delivery is
    retried by the platform until its egress finished, so nothing is lost. (A successor that
    `commits_its_result` is not seen here and gets one redelivered call, which its ingress
    answers from its result record.)"""
    if not calls:
        return []
    names = [naming.checkpoint_key(c.envelope.workflow, c.function, c.envelope.frames) for c in calls]
    committed = ctx.store.read(names)
    return [replace(call, envelope=replace(call.envelope, redelivered=True))
            for call, name in zip(calls, names, strict=True) if name not in committed]


def _join(ctx: EgressContext, env: Envelope, invocation: str, checkpoint: str, join: Join, created: bool) -> int:
    """Add our checkpoint to the fan-in set; invoke the target if we saw every branch join."""
    # Every add of a set gives the same expiry, the workflow's deadline: a set is only read
    # while the workflow runs (a duplicate past the deadline never reaches a join: Runtime._may_run),
    # and identical adds leave a set unchanged on every store (Firestore's merge-write included).
    complete = fanin.join(ctx.store, join.set_key, join.width, join.slot, checkpoint,
                          workflow=env.workflow, expires_at=env.deadline)
    if not complete:
        return 0
    calls = [join.target_call(env)]
    if not created:
        calls = _not_yet_committed(ctx, calls)
    return _dispatch(ctx, invocation, calls)


def _dispatch(ctx: EgressContext, invocation: str, calls: Sequence[Call]) -> int:
    """Invoke every call concurrently: one task per worker, each sending its share, so a wide
    fan-out pays for `dispatch_workers` tasks, not one per branch. A crash injected before one
    invoke leaves the others sent."""
    if not calls:
        return 0

    def send(share: Sequence[Call]) -> None:
        for call in share:
            ctx.hooks.at(FaultPoint.BEFORE_INVOKE, invocation)
            _invoke(ctx.invoker, call)

    tasks = min(len(calls), ctx.dispatch_workers)
    if tasks == 1:
        send(calls)
    else:
        _run_all(ctx.executor, [lambda i=i: send(calls[i::tasks]) for i in range(tasks)])
    return len(calls)


def _invoke(invoker: Invoker, call: Call) -> None:
    """Send one call. A value the platform cannot carry inline (too deeply nested for its wire
    encoding) travels by reference to the committed checkpoint instead: an output that was
    committed always reaches its consumers."""
    try:
        invoker.invoke(call.function, call.envelope.to_wire())
    except (UnencodableValue, ValueError, RecursionError):
        by_reference = tuple(DataRef(ref=d.ref, item=d.item, path=d.path) if d.ref is not None else d
                             for d in call.envelope.inputs)
        if by_reference == call.envelope.inputs:
            raise
        invoker.invoke(call.function, replace(call.envelope, inputs=by_reference).to_wire())


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
