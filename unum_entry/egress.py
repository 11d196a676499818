"""Egress: after the handler and its commit (unum_entry.checkpoint), over the committed output.

1. Plan the IR over that output (pure, see unum_entry.plan).
2. Dispatch every invocation concurrently (a duplicate: only to successors that have not
   committed, unum_entry.checkpoint.not_yet_committed); or join the fan-in set
   (unum_entry.fanin) and invoke the target when every branch joined; or, when terminal, record
   the workflow's result (or end it in failure).

Nothing is deleted (unum_entry.retention), so every step is safe to repeat: a retry that
crashes anywhere re-runs the same steps over the same committed output.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

from unum_entry import fanin
from unum_entry.checkpoint import commits_its_result, not_yet_committed, record_result
from unum_entry.codec import decode
from unum_entry.envelope import Envelope, or_by_reference
from unum_entry.frozen import ReadOnly
from unum_entry.history import end_stamp, stamp
from unum_entry.hooks import FaultPoint, Hooks, observes
from unum_entry.invokers import FanOutInvoker, Invoker
from unum_entry.ir import FunctionIR
from unum_entry.outcome import failure_record
from unum_entry.plan import Call, Committed, FanOutCalls, Join, Plan, Program, continuation
from unum_entry.retention import Ledger, Retention
from unum_entry.stores.base import SetState, Store

if TYPE_CHECKING:
    from concurrent.futures import Executor

class EndInFailure(Protocol):
    """How a workflow ends in failure (`Runtime.end_in_failure`: write the failure record, with
    the failing invocation's history stamp, then let the layers react, e.g. compensate): passed
    in, so egress knows no layer."""

    def __call__(self, workflow: str, record: dict[str, Any], *, history: bytes = b"", deadline: int = 0) -> None: ...


class EgressContext(ReadOnly):
    """What egress works with; one per Runtime."""

    __slots__ = ("ir", "store", "invoker", "executor", "hooks", "inline_limit", "retention", "abort", "dispatch_workers", "program")

    ir: Final[FunctionIR]
    store: Final[Store]
    invoker: Final[Invoker]
    executor: Final[Executor]
    hooks: Final[Hooks]
    inline_limit: Final[int]
    retention: Final[Retention]
    abort: Final[EndInFailure]
    dispatch_workers: Final[int]
    program: Final[Program | None]  # the IR precompiled (unum_entry.plan.Program); None: `ir`'s own

    def __init__(self, ir: FunctionIR, store: Store, invoker: Invoker, executor: Executor, hooks: Hooks,
                 inline_limit: int, retention: Retention, abort: EndInFailure, dispatch_workers: int = 64,
                 program: Program | None = None) -> None:
        self.ir = ir
        self.store = store
        self.invoker = invoker
        self.executor = executor
        self.hooks = hooks
        self.inline_limit = inline_limit
        self.retention = retention
        self.abort = abort
        self.dispatch_workers = dispatch_workers
        self.program = program if program is not None else Program(ir)


class EgressReport(ReadOnly):
    """What one egress did (logs, tests, bench): the committed output (`value`), whether this
    execution's commit made it (`created`), how many calls it sent (`invoked`), whether it ended
    its thread (`terminal`), and whether through an IR `fail` (`failed`: the workflow aborted).
    `value` may come as its encoded bytes (`encoded`), decoded when read: a fan-in branch's
    egress has no use for it (its target reads it from the store). Equal reports have equal
    values, however each holds its own."""

    __slots__ = ("_value", "_encoded", "created", "invoked", "terminal", "failed")
    _compared = _shown = ("value", "created", "invoked", "terminal", "failed")

    def __init__(self, value: Any, created: bool, invoked: int, terminal: bool, failed: bool = False, *,
                 encoded: bytes | None = None) -> None:
        self._value: Final = value
        self._encoded: Final = encoded
        self.created: Final = created
        self.invoked: Final = invoked
        self.terminal: Final = terminal
        self.failed: Final = failed

    @property
    def value(self) -> Any:
        """The committed output (a fresh decode of `encoded` at each read, when given so)."""
        return self._value if self._encoded is None else decode(self._encoded)


def egress(ctx: EgressContext, env: Envelope, invocation: str, checkpoint: str | None,
           stored: bytes, created: bool, *, value_end: int | None = None,
           leaf_state: SetState | None = None, parent_state: SetState | None = None,
           branch_plan: Plan | None = None) -> EgressReport:
    """Run steps 2-3 over the committed bytes `stored` (`created`: this execution's commit won).
    `value_end`: where the committed value ends in `stored` when the caller knows (its own
    commit, followed by its history stamp): decoded without parsing the stamp. `leaf_state`:
    the join's leaf shard after the add the commit made with it (`commit_joining`), or None;
    `parent_state`: with it, the leaf's parent after the join's next add, when that was made
    with other branches' (`fanin.next_add`), or None. `branch_plan`: a fan-in branch's plan as
    `Program.branch_plan` built it for `env`."""
    encoded = stored if value_end is None else stored[:value_end]
    if commits_its_result(ctx.ir):  # the commit was the result record: nothing more to do
        return EgressReport(value=decode(encoded)["value"], created=created, invoked=0, terminal=True)
    if branch_plan is not None and not env.lanes and not branch_plan.terminal:
        # A fan-in branch: its plan is its join alone, which needs no value (the report decodes it if read).
        invoked = _join(ctx, env, invocation, checkpoint, branch_plan.join, created, leaf_state, parent_state) \
            if branch_plan.join is not None and checkpoint is not None else 0
        return EgressReport(None, created, invoked, False, encoded=encoded)
    value = decode(encoded)
    program: Program = ctx.program  # type: ignore[assignment]
    if program.hop is not None and not env.lanes:  # a chain hop (no lane to pass on): its one call
        calls: Sequence[Call] = (program.hop_call(env, value, len(stored), checkpoint, ctx.inline_limit),)
        if not created:
            calls = not_yet_committed(ctx.store, calls)
        return EgressReport(value, created, _dispatch(ctx, invocation, calls), False)
    # A fan-in branch's plan depends on its envelope alone: built before its commit (`branch_plan`).
    the_plan = branch_plan if branch_plan is not None else program.plan(
        env, Committed(value, len(stored), checkpoint), invocation=invocation, inline_limit=ctx.inline_limit)
    # A lane goes on only past an item that did not fail the workflow: with MaxConcurrency k the
    # next item never starts after a failed one (Step Functions), so the failure reported is that one.
    lane = continuation(ctx.ir, env) if env.lanes and the_plan.failure is None else None
    calls = [lane, *the_plan.calls] if lane is not None else the_plan.calls  # a fan-out's: built as sent
    if not created:
        calls = not_yet_committed(ctx.store, calls)
    invoked = _dispatch(ctx, invocation, calls)
    if the_plan.join is not None and checkpoint is not None:
        invoked += _join(ctx, env, invocation, checkpoint, the_plan.join, created, leaf_state, parent_state)
    if the_plan.terminal:
        _finish(ctx, env, invocation, value, the_plan)
    return EgressReport(value, created, invoked, the_plan.terminal, the_plan.failure is not None)


def planned_fan_out(ctx: EgressContext, env: Envelope, invocation: str, checkpoint: str,
                    stored: bytes) -> FanOutCalls | None:
    """The fan-out `egress` sends over the committed bytes `stored` (the invocation's checkpoint
    as the store returns it), built again: the same plan over the same output gives the same
    calls. None when the plan is not one fan-out (a chain hop, a lane, a join, an end). For a
    platform that journaled a fan-out as the invocation that sent it (the embedded engine's
    durable queue: unum_entry.local.queue) and resumes it after a crash."""
    program: Program = ctx.program  # type: ignore[assignment]
    if commits_its_result(ctx.ir) or program.hop is not None or env.lanes:
        return None
    the_plan = program.plan(env, Committed(decode(stored), len(stored), checkpoint), invocation=invocation,
                            inline_limit=ctx.inline_limit)
    return the_plan.calls if type(the_plan.calls) is FanOutCalls else None


def planned_hop(ctx: EgressContext, env: Envelope, invocation: str, checkpoint: str, stored: bytes) -> Call | None:
    """The one call `egress` sent over the committed bytes `stored` (its checkpoint as the store
    returns it), built again as egress built it - the same plan over the same output gives the
    same call - or None when the plan sends none (an end, a callback's wait). Only for an
    invocation whose plan can send one call at most, an `invoke`'s (`Runtime.passes_one_hop`):
    the embedded engine's durable queue journals a chain as the row of its first hop and walks
    it again after a crash (unum_entry.local.queue)."""
    program: Program = ctx.program  # type: ignore[assignment]
    if program.hop is not None:
        return program.hop_call(env, decode(stored), len(stored), checkpoint, ctx.inline_limit)
    calls = program.plan(env, Committed(decode(stored), len(stored), checkpoint), invocation=invocation,
                         inline_limit=ctx.inline_limit).calls
    return calls[0] if len(calls) == 1 else None


def _finish(ctx: EgressContext, env: Envelope, invocation: str, value: Any, the_plan: Plan) -> None:
    """A terminal invocation: the result record at its fan-out position (the first one wins),
    or, through an IR `fail` (a Step Functions Fail state), the workflow's end in failure (its
    failure record, then whatever the runtime's layers do, e.g. compensate)."""
    if the_plan.failure is not None:
        # The stamp names this invocation for a redrive (unum_entry.redrive), marked `decided`:
        # its checkpoint holds the decision to fail, so a redrive sends it under a fresh name.
        ctx.abort(env.workflow, failure_record(the_plan.failure["Error"], the_plan.failure["Cause"],
                                               function=ctx.ir.function, invocation=invocation,
                                               attempts=env.attempt + 1),
                  history=stamp(ctx.ir.function, env, started=None, committed=ctx.retention.clock(),
                                with_deadline=True, decided=True),
                  deadline=env.deadline)
        return
    record_result(ctx.store, ctx.retention, env, value if the_plan.result is None else the_plan.result.value,
                  stamp=end_stamp(ctx.ir.function, ctx.retention.clock()))


def _join(ctx: EgressContext, env: Envelope, invocation: str, checkpoint: str, join: Join, created: bool,
          leaf_state: SetState | None = None, parent_state: SetState | None = None) -> int:
    """Add our checkpoint to the fan-in set (its leaf shard's add made already when
    `leaf_state` is given, and its parent's when `parent_state` is); invoke the target if we
    saw every branch join."""
    if fanin.ends_at_leaf(leaf_state):  # (most branches: no ledger to build)
        return 0
    # The ledger stamps every add of a set with the workflow's deadline and refuses an add past
    # it (unum_entry.fanin.join): a late join fails the workflow instead of recreating its shard.
    complete = fanin.join(ctx.store, Ledger.of(env, ctx.retention), join.set_key, join.width, join.slot,
                          checkpoint, leaf_state=leaf_state, parent_state=parent_state)
    if not complete:
        return 0
    calls = [join.target_call(env)]
    if not created:
        calls = not_yet_committed(ctx.store, calls)
    return _dispatch(ctx, invocation, calls)


def _dispatch(ctx: EgressContext, invocation: str, calls: Sequence[Call]) -> int:
    """Invoke every call concurrently: one task per worker, each sending its share, so a wide
    fan-out pays for `dispatch_workers` tasks, not one per branch; an invoker that takes a whole
    fan-out (`FanOutInvoker`: the embedded engine's) gets it in one call. A crash injected
    before one invoke leaves the others sent."""
    if not calls:
        return 0
    if len(calls) == 1:  # one call (a chain hop, a join's target): sent from here
        if observes(ctx.hooks):
            ctx.hooks.at(FaultPoint.BEFORE_INVOKE, invocation)
        _invoke(ctx.invoker, calls[0])
        return 1
    if (type(calls) is FanOutCalls and hasattr(type(ctx.invoker), "invoke_fan_out") and not observes(ctx.hooks)
            and cast(FanOutInvoker, ctx.invoker).invoke_fan_out(calls)):
        return len(calls)  # queued whole, each call built when delivered (no fault point to run per call)

    def send(share: Sequence[Call]) -> None:
        for call in share:
            ctx.hooks.at(FaultPoint.BEFORE_INVOKE, invocation)
            _invoke(ctx.invoker, call)

    tasks = min(len(calls), ctx.dispatch_workers)
    if tasks == 1:
        send(calls)
    else:
        _run_all(ctx.executor, [_share(send, calls[i::tasks]) for i in range(tasks)])
    return len(calls)


def _share(send: Callable[[Sequence[Call]], None], share: Sequence[Call]) -> Callable[[], None]:
    return lambda: send(share)


def _invoke(invoker: Invoker, call: Call) -> None:
    """Send one call: the `Envelope` itself to an invoker that takes it (`EnvelopeInvoker`, the
    embedded engine's), else its wire form. A value the platform cannot carry inline (too deeply
    nested for its wire encoding) travels by reference to the committed checkpoint instead: an
    output that was committed always reaches its consumers."""
    # Its class must define it: a wrapper that forwards unknown attributes to the invoker it
    # wraps (unum_entry.tracing stamps each wire payload) is sent the wire form, as it expects.
    # (`partial`, not a lambda, and no `typing.cast` call: a chain hop's every transition comes here)
    send: Callable[[str, Envelope], None] = (invoker.invoke_envelope  # type: ignore[attr-defined]
                                             if hasattr(type(invoker), "invoke_envelope") else _by_wire(invoker))
    or_by_reference(call.envelope, partial(send, call.function))


def _by_wire(invoker: Invoker) -> Callable[[str, Envelope], None]:
    return lambda function, envelope: invoker.invoke(function, envelope.to_wire())


def _run_all(executor: Executor, tasks: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run tasks concurrently; wait for all; re-raise the first failure after all finished.
    Returns their results in order. A single task runs on the calling thread."""
    if len(tasks) == 1:
        return [tasks[0]()]
    # Each task in a copy of this thread's context (contextvars): the current trace span
    # (unum_entry.tracing) is the parent of what the task sends.
    futures = [executor.submit(contextvars.copy_context().run, task) for task in tasks]
    first_error: BaseException | None = None
    for future in futures:
        error = future.exception()
        if error is not None and first_error is None:
            first_error = error
    if first_error is not None:
        raise first_error
    return [future.result() for future in futures]
