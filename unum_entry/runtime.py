"""The in-situ runtime of one function: ingress → handler → egress.

A `Runtime` is built once per container/process (handler loaded, clients passed in) and then
`handle`s each delivery. It never retries by itself: it raises, and the platform (Lambda's async
retries, Pub/Sub redelivery, the local invoker) decides, calling `fail` when it gives up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Final, TYPE_CHECKING

from unum_entry import naming
from unum_entry import fanin
from unum_entry.checkpoint import commit, commit_joining, commit_joining_many, commit_key, commits_its_result
from unum_entry.context import DeliveryContext, InvocationContext
from unum_entry.egress import EgressContext, EgressReport, egress, planned_fan_out, planned_hop
from unum_entry.envelope import DataRef, Envelope
from unum_entry.errors import (EndedBeforeDelivery, HandlerFailed, InvokeError, RetentionExpired, StaleInvocation,
                               StoreError, StoreMisuse, UnumError, WorkflowAborted)
from unum_entry.frozen import ReadOnly
from unum_entry.history import stamp
from unum_entry.hooks import FaultPoint, FunctionParts, Hooks, LayerFactory, NoHooks, NoLayer, WorkflowEnded, observes
from unum_entry.ingress import AlreadyCommitted, Ended, Ready, ingress
from unum_entry.invokers import Invoker
from unum_entry.ir import FanIn, FanOut, FunctionIR, Map
from unum_entry.outcome import Ending, failure_record, finished, record_failure, user_trace
from unum_entry.retention import Ledger, Retention, store_retention
from unum_entry.stores.base import Joined, Record, SetAdd, SetState, Store
from unum_entry.timers import Timers
from unum_entry.tracing import Tracing
from unum_entry.watchdog import Watchdog

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from unum_entry.plan import Call, FanOutCalls, Join, Plan, Program

Handler = Callable[[Any, InvocationContext], Any]
log = logging.getLogger("unum.runtime")


class RuntimeConfig(ReadOnly):
    """Tunables. Values whose msgpack form exceeds `inline_limit` bytes travel by reference
    (Lambda's async payload limit is 256 KB for the whole event)."""

    __slots__ = ("inline_limit", "dispatch_workers", "retention", "watchdog")

    inline_limit: Final[int]
    dispatch_workers: Final[int]
    # How long objects live (unum_entry.retention); None: the store's TTL with the default
    # redelivery window.
    retention: Final[Retention | None]
    # Arm a deadline watchdog when a workflow starts here (unum_entry.watchdog): one timer each.
    watchdog: Final[bool]

    def __init__(self, inline_limit: int = 64 * 1024, dispatch_workers: int = 64,
                 retention: Retention | None = None, watchdog: bool = True) -> None:
        self.inline_limit = inline_limit
        self.dispatch_workers = dispatch_workers
        self.retention = retention
        self.watchdog = watchdog


def new_workflow(input_value: Any, workflow_id: str | None = None) -> Envelope:
    """The envelope that starts a workflow at its entry function (which sets its deadline)."""
    if not workflow_id:
        import uuid  # lazy: the adapters name a start by its request id; only other starts draw one

        workflow_id = f"wf-{uuid.uuid4().hex}"
    return Envelope(workflow=workflow_id, inputs=(DataRef(value=input_value),), start=True)


class Runtime:
    """Runs one function's deliveries exactly-once-effectively under at-least-once delivery.

    `layer` builds the layer the runtime calls at its fixed points (unum_entry.hooks.Layer);
    the platforms pass `unum_entry.steps.StepsLayer` (exactly-once steps, compensations). The
    default, NoLayer, runs plain handlers only."""

    def __init__(self, ir: FunctionIR, handler: Handler, store: Store, invoker: Invoker, *,
                 config: RuntimeConfig | None = None, hooks: Hooks | None = None,
                 executor: Executor | None = None, layer: LayerFactory = NoLayer,
                 tracing: Tracing | None = None, on_workflow_end: WorkflowEnded | None = None) -> None:
        # OpenTelemetry spans (unum_entry.tracing; default: as UNUM_TRACING says, off when unset):
        # when on, the store and invoker every part below uses are the traced ones.
        self.tracing = tracing if tracing is not None else Tracing.from_env()
        store, invoker = self.tracing.store(store), self.tracing.invoker(invoker)
        self.ir = ir
        self.handler = handler
        self.store = store
        # What a workflow's end means above the runtime (hooks.WorkflowEnded: a chained invoke's
        # target answers its durable caller, unum_entry.durable_functions.chained); the platform
        # passes it in, so the runtime names no front end (every platform builds its Runtime with
        # it and the steps layer through unum_entry.platforms.common.platform_runtime).
        self._on_workflow_end = on_workflow_end
        self.config = config or RuntimeConfig()
        self.hooks: Hooks = hooks or NoHooks()
        self._own_executor = executor is None
        if executor is None:
            from concurrent.futures import ThreadPoolExecutor  # lazy: built at init, not needed to import

            executor = ThreadPoolExecutor(self.config.dispatch_workers, thread_name_prefix=f"unum-{ir.function}")
        self.executor = executor
        self.retention = self.config.retention or store_retention(store)
        self._branch_ledger = Ledger("", 0, self.retention)  # the last fan-in branch's (`_leaf_join`)
        self._egress = EgressContext(ir=ir, store=store, invoker=invoker, executor=self.executor,
                                     hooks=self.hooks, inline_limit=self.config.inline_limit,
                                     retention=self.retention, abort=self.end_in_failure,
                                     dispatch_workers=self.config.dispatch_workers)
        self.layer = layer(FunctionParts(function=ir.function, handler=handler, store=store, invoker=invoker,
                                         hooks=self.hooks))
        # Decided once per function by the layer (hooks.Layer): the context class the runtime
        # builds, whether the layer extends it, and whether the handler runs through the layer.
        self._extends_context = self.layer.plain_context is None
        self._context_class = self.layer.plain_context or DeliveryContext
        self._wraps_calls = self.layer.wraps_calls
        self.watchdog = Watchdog(ir.function, store, invoker, self.retention, enabled=self.config.watchdog,
                                 timeout_seconds=ir.timeout_seconds)
        # Decided once, not per delivery: whether spans and hooks do anything at all, and whether
        # a commit goes to the invocation's checkpoint (its name, `commit_key`'s answer then).
        self._traced = self.tracing.enabled
        self._hooked = observes(self.hooks)
        self._commits_to_invocation = ir.checkpoint and not commits_its_result(ir)
        # A fan-in branch commits its checkpoint (the invocation's) and its join's first set add
        # in one write where the store can (`Store.create_joining`: the embedded stores), else as
        # two: the program whose joins the commits carry, or None.
        program = self._egress.program
        # Whether its plan sends one call at most, an invoke's (`passes_one_hop`): decided by the IR alone.
        self._one_call = bool(self._commits_to_invocation) and program is not None and not any(
            isinstance(ins, (Map, FanOut, FanIn)) for ins in ir.instructions)
        self._joining: Program | None = (program if self._commits_to_invocation and store.joins_in_create
                                         and program is not None and program.branch is not None else None)

    @property
    def batches_branches(self) -> bool:
        """Whether `handle_many` makes its fan-in branches' commits together: this function is a
        fan-in branch and the store makes many joining creates in one write (`joins_in_batches`)."""
        return self._joining is not None and self.store.joins_in_batches and not self._traced

    def handle(self, env: Envelope) -> EgressReport | None:
        """Process one delivery. Returns None when nothing was left to do (dropped, a delivery
        the layer handled, or the deadline watchdog's timer: unum_entry.watchdog). The delivery
        that starts a workflow (no deadline yet) arms its watchdog before anything runs.

        Raises HandlerFailed when user code raised (retryable), RetentionExpired when the
        workflow outlived its objects, other UnumErrors when the request or output does not fit
        the IR (not retryable), StoreError/InvokeError when the platform should redeliver, and
        whatever a hook raises. A handler's `ctx.abort` (WorkflowAborted) ends the workflow in
        failure (returns None).
        """
        if not self._traced:  # tracing off: not even a no-op context manager
            return self._handle(env)
        with self.tracing.delivery(self.ir.function, env):
            return self._handle(env)

    def _handle(self, env: Envelope) -> EgressReport | None:
        staged = self._stage(env)
        if isinstance(staged, _Staged):
            return self._commit(staged)
        return staged

    def handle_many(self, envs: Sequence[Envelope]) -> list[EgressReport | None | Exception]:
        """`handle` of each of `envs` (a worker's batch of deliveries: fan-in branches of one
        map), the commits of its fan-in branches made together (`commit_joining_many`: one
        transaction where the store batches them): each handler runs, then the batch's commits
        are made, then each egress runs over its own commit. Returns, in order, what `handle`
        returns for each or the Exception it raised (BaseExceptions pass through). Nothing a
        delivery sees differs from `handle`: its commit is one create-if-absent, made before
        its egress; only its neighbours' commits share the write."""
        if self._joining is None or self._traced:
            return [_handled_or_error(self.handle, env) for env in envs]
        results: list[EgressReport | None | Exception] = []
        joining: list[tuple[int, _Staged, Ledger, SetAdd]] = []  # (its result's index, it, its join)
        for env in envs:
            try:
                staged = self._stage(env)
                if not isinstance(staged, _Staged):
                    results.append(staged)
                elif staged.join is not None:
                    ledger, leaf_add = staged.join
                    joining.append((len(results), staged, ledger, leaf_add))
                    results.append(None)
                else:
                    results.append(self._commit(staged))
            except Exception as exc:  # this delivery's own failure: the policy maps it (platforms.common)
                results.append(exc)
        if not joining:
            return results
        try:
            made = commit_joining_many(self.store, self.ir, [
                (ledger, staged.invocation, staged.output, leaf_add, staged.history)
                for _, staged, ledger, leaf_add in joining])
        except Exception as exc:  # (it returns each item's failure; a bug fails them all)
            made = [exc] * len(joining)
        parents = self._next_adds(joining, made)
        for (i, staged, _, _), outcome, parent in zip(joining, made, parents, strict=True):
            if isinstance(outcome, Exception):  # its commit was not made
                results[i] = outcome
                continue
            stored, created, joined = outcome
            try:
                results[i] = self._egress_over(staged.env, staged.invocation, staged.checkpoint, stored, created,
                                               staged.history, joined, staged.planned, parent)
            except Exception as exc:
                results[i] = exc
        return results

    def _next_adds(self, joining: list[tuple[int, _Staged, Ledger, SetAdd]],
                   made: list[Joined | Exception]) -> list[SetState | None]:
        """For each committed branch of `handle_many`'s batch whose leaf add filled its shard
        and which carries the join on (`fanin.next_add`: one in SHARD_SLOTS), the leaf's parent
        after that branch's add to it, the batch's such adds made in one write
        (`Store.add_to_set_many`); None for the others, whose egress makes its own adds as
        `handle` does (also when its add here failed: egress makes it again, and says why)."""
        parents: list[SetState | None] = [None] * len(joining)
        by_workflow: dict[str, tuple[list[SetAdd], list[int]]] = {}  # (a batch may hold several workflows' branches)
        for k, ((_, staged, ledger, _), outcome) in enumerate(zip(joining, made, strict=True)):
            if isinstance(outcome, Exception) or outcome[2] is None or not outcome[2].full:
                continue
            join = staged.planned.join if staged.planned is not None else None
            if join is None:
                continue
            try:
                add = fanin.next_add(ledger, join.set_key, join.width, join.slot, outcome[2])
            except RetentionExpired:  # egress reports it
                continue
            if add is not None:
                adds, where = by_workflow.setdefault(ledger.workflow, ([], []))
                adds.append(add)
                where.append(k)
        for workflow, (adds, where) in by_workflow.items():
            for k, state in zip(where, self.store.add_to_set_many(adds, workflow=workflow), strict=True):
                parents[k] = None if isinstance(state, Exception) else state
        return parents

    def _stage(self, env: Envelope) -> _Staged | EgressReport | None:
        """`handle` up to the commit: ingress and the handler. Returns what to commit (`_Staged`),
        or what `handle` returns when nothing is left to commit (dropped, a duplicate's egress
        done, a workflow given up)."""
        if env.watchdog:  # the deadline watchdog's timer, not an invocation of this function
            if self.watchdog.fire(env) in ("recorded", "ended"):  # an invoked machine's TimeoutSeconds: its caller's invoke fails
                self._answer_caller(env.workflow)
            return None
        if self.layer.intercept(env):
            return None
        if not env.deadline:  # the workflow's start: its objects live from now on, watched until then
            env = replace(env, deadline=self.retention.deadline())
            self.watchdog.arm(env)
        elif self.ir.timeout_seconds is not None and naming.INVOKED in env.workflow and _starts_invoked(env):
            self.watchdog.arm(env, watchdog=False)  # a durable invoke's machine has its caller's deadline: its TimeoutSeconds
        invocation = naming.checkpoint_key(env.workflow, self.ir.function, env.frames)
        allowed = self._may_run(env, invocation)
        if allowed is False:
            return None
        checkpoint = invocation if self._commits_to_invocation else commit_key(self.ir, env, invocation)
        if isinstance(allowed, bytes):
            before: AlreadyCommitted | Ready | Ended = AlreadyCommitted(allowed)
        elif self._traced:
            with self.tracing.span("ingress"):
                before = ingress(env, self.store, checkpoint, check_first=self.ir.ingress_check)
        else:
            before = ingress(env, self.store, checkpoint, check_first=self.ir.ingress_check)
        if isinstance(before, Ended):  # a fan-out item of a workflow that ended (unum_entry.ingress)
            return None
        if isinstance(before, AlreadyCommitted):
            return self._egress_over(env, invocation, checkpoint, before.stored, False)
        if self._hooked:
            self.hooks.at(FaultPoint.BEFORE_HANDLER, invocation)
        context = self._context(env, invocation)
        if self._extends_context:
            context = self.layer.context(context, env, checkpoint)
        started = self.retention.clock()
        try:
            if self._traced:
                with self.tracing.span("handler"):
                    output = self._run_handler(before.event, context)
            else:
                output = self._run_handler(before.event, context)
        except WorkflowAborted as abort:
            self._give_up(env, abort, invocation)
            return None
        except StaleInvocation as stale:
            # The layer found the workflow ended (drop), or this invocation committed while
            # this slow duplicate ran: continue as a duplicate with the committed output.
            committed = self.store.get(checkpoint) if checkpoint is not None else None
            if committed is None:
                if isinstance(stale, EndedBeforeDelivery):
                    self._answer_caller(env.workflow)
                return None
            return self._egress_over(env, invocation, checkpoint, committed, False)
        if self._hooked:
            self.hooks.at(FaultPoint.AFTER_HANDLER, invocation)
        history = (stamp(self.ir.function, env, started=started, committed=self.retention.clock())
                   if checkpoint is not None else b"")
        planned = self._joining.branch_plan(env) if self._joining is not None else None
        join = (self._leaf_join(planned.join, env, invocation) if planned is not None and planned.join is not None
                else None)
        return _Staged(env, invocation, checkpoint, output, history, join, planned)

    def _commit(self, staged: _Staged) -> EgressReport:
        """Commit `staged` (its checkpoint; a fan-in branch's with its join's first add), then its egress."""
        if staged.join is None:
            stored, created = commit(self.store, self.ir, self.retention, staged.env, staged.checkpoint, staged.output,
                                     stamp=staged.history)
            return self._egress_over(staged.env, staged.invocation, staged.checkpoint, stored, created, staged.history,
                                     None, staged.planned)
        ledger, leaf_add = staged.join  # the commit is the invocation's checkpoint (`_joining`)
        stored, created, joined = commit_joining(self.store, self.ir, ledger, staged.invocation, staged.output,
                                                 leaf_add, stamp=staged.history)
        return self._egress_over(staged.env, staged.invocation, staged.checkpoint, stored, created, staged.history,
                                 joined, staged.planned)

    def _egress_over(self, env: Envelope, invocation: str, checkpoint: str | None, stored: bytes, created: bool,
                     history: bytes = b"", joined: SetState | None = None, planned: Plan | None = None,
                     parent: SetState | None = None) -> EgressReport:
        """Egress over the committed bytes `stored`; `history`: the stamp this execution's own
        commit put after its value (when `created` and `stored` ends with it, the value is
        decoded without parsing the stamp); `joined`: the join's leaf shard, when the commit
        made its add; `planned`: a fan-in branch's plan, built before its commit; `parent`: the
        leaf's parent, when the join's next add was made with its batch's (`_next_adds`)."""
        value_end = len(stored) - len(history) if created and history and stored.endswith(history) else None
        if self._hooked:
            self.hooks.at(FaultPoint.AFTER_CHECKPOINT, invocation)
        if self._traced:
            with self.tracing.span("egress"):
                report = egress(self._egress, env, invocation, checkpoint, stored, created, value_end=value_end,
                                leaf_state=joined, parent_state=parent, branch_plan=planned)
        else:
            report = egress(self._egress, env, invocation, checkpoint, stored, created, value_end=value_end,
                            leaf_state=joined, parent_state=parent, branch_plan=planned)
        if report.terminal and not report.failed and len(env.frames) <= 1:  # the workflow's root result
            self._answer_caller(env.workflow)
        return report

    def _committed(self, env: Envelope) -> tuple[str, str, bytes] | None:
        """(invocation, checkpoint, the committed bytes) of the invocation `env`, read from the
        store once; None when it has no checkpoint (not committed, expired, or none kept)."""
        invocation = naming.checkpoint_key(env.workflow, self.ir.function, env.frames)
        checkpoint = invocation if self._commits_to_invocation else commit_key(self.ir, env, invocation)
        stored = self.store.get(checkpoint) if checkpoint is not None else None
        if checkpoint is None or stored is None:
            return None
        return invocation, checkpoint, stored

    def fan_out(self, env: Envelope) -> FanOutCalls | None:
        """The fan-out the committed invocation `env` sent (unum_entry.egress.planned_fan_out),
        built again from its checkpoint; None when it has no checkpoint (not committed, expired)
        or sent no fan-out. Reads the store once; raises what its read raises."""
        committed = self._committed(env)
        return planned_fan_out(self._egress, env, *committed) if committed is not None else None

    def passes_one_hop(self, env: Envelope) -> bool:
        """Whether an execution of `env` sends one call at most, an `invoke`'s (its chain hop),
        and only after committing to the invocation's checkpoint, so that `hop_after` builds
        that call again: the IR has no map, fan-out or fan-in (its plan's one transition is an
        invoke, an end or a wait: Step Functions' Task and Pass states compile so), and the
        envelope has no lane to pass on."""
        return self._one_call and not env.lanes

    def hop_after(self, env: Envelope) -> tuple[bool, Call | None]:
        """Whether the invocation `env` committed, and the call its plan sent over the committed
        output, built again (unum_entry.egress.planned_hop): None when it did not commit, does
        not pass one hop (`passes_one_hop`) or sent no call. Reads the store once; raises what
        its read raises."""
        committed = self._committed(env)
        if committed is None:
            return False, None
        if not self.passes_one_hop(env):
            return True, None
        return True, planned_hop(self._egress, env, *committed)

    def _may_run(self, env: Envelope, invocation: str) -> bool | bytes:
        """The retention rule's deadline (unum_entry.retention): past `deadline - margin` no
        handler starts. A delivery is then dropped (False) when the workflow has ended or the
        part of it this invocation belongs to has (`_settled`); when its invocation committed
        and the deadline itself has not passed (every object still exists) it carries the
        committed output on as a duplicate (the committed bytes): a redelivery after a crash
        between commit and invoke must still invoke the successors, which then fail the workflow
        with RetentionExpired — dropped, the workflow would stall silently. Past the deadline a
        committed invocation's delivery is dropped (what egress would read may be gone); an
        uncommitted one fails the workflow (RetentionExpired) unless the workflow finished."""
        try:
            self.retention.check(env.workflow, env.deadline)
        except RetentionExpired:
            key = commit_key(self.ir, env, invocation) or invocation
            settled, found = self._settled(env, key)
            if settled:
                return False
            if key in found:
                committed = found[key].value
                return committed if committed is not None and self.retention.clock() < env.deadline else False
            if finished(self.store, env.workflow):
                return False
            raise
        return True

    def _leaf_join(self, join: Join, env: Envelope, checkpoint: str) -> tuple[Ledger, SetAdd] | None:
        """The workflow's ledger and the first set add of this fan-in branch's `join`, for the
        commit of `checkpoint` to make (`commit_joining`); None where egress must make it as
        usual: one that would be refused (past the deadline, a bad slot: egress reports it
        after the commit, as it does without this)."""
        ledger = self._branch_ledger  # (a fan-out's branches share their workflow's: one built per fan-out)
        if ledger.workflow != env.workflow or ledger.deadline != env.deadline:
            ledger = self._branch_ledger = Ledger.of(env, self.retention)
        try:
            return ledger, fanin.leaf_add(ledger, join.set_key, join.width, join.slot, checkpoint)
        except (RetentionExpired, StoreMisuse):
            return None

    def _settled(self, env: Envelope, key: str) -> tuple[bool, dict[str, Record]]:
        """One batch read past the margin: whether the workflow has ended (its root result or
        failure record) or a result exists at this invocation's fan-out position or an enclosing
        one (its thread reached its end: a late duplicate of anything in it changes nothing,
        whatever the workflow's shape: per-branch results, `checkpoint: false` functions);
        and the records found (with `key`, the invocation's commit)."""
        ending = Ending.of(env.workflow)
        part = [naming.result_key(env.workflow, env.frames[:depth]) for depth in range(2, len(env.frames) + 1)]
        found = self.store.read([key, *ending.keys, *part])
        return ending.reached(found) or any(k in found for k in part if k != key), found

    def fail(self, env: Envelope, error: UnumError) -> None:
        """Give up on this delivery: end the workflow in failure (its failure record, first one
        wins; then the layer reacts, e.g. compensates), unless the delivery was the layer's own.
        Nothing is deleted (unum_entry.retention)."""
        if self.layer.give_up(env, error):
            return
        self._give_up(env, error, naming.checkpoint_key(env.workflow, self.ir.function, env.frames))

    def end_in_failure(self, workflow: str, record: dict[str, Any], *, history: bytes = b"",
                       deadline: int = 0) -> None:
        """Write the workflow's failure record (unum_entry.outcome.failure_record; `history`: the
        failing invocation's stamp, unum_entry.history; `deadline`: the workflow's, 0 if not
        known here) unless the workflow has ended (`outcome.record_failure`: refused after a
        failure, a stop's or timeout's claim, or a root-level result), then let the layer react.
        Idempotent: a retry, or a refused write, writes nothing new and re-drives the layer, as a
        duplicate of the ending that won."""
        record_failure(self.store, workflow, record, stamp=history, deadline=deadline, retention=self.retention)
        self.layer.workflow_failed(workflow)
        self._answer_caller(workflow)

    def _answer_caller(self, workflow: str) -> None:
        """`workflow` ended: when a durable function's `context.invoke` started it (a compiled
        state machine), complete that invoke with its outcome (first wins) and re-deliver the
        caller. Every duplicate of the ending invocation does it again (absorbed), so a crash
        after the end's record loses nothing."""
        if naming.INVOKED in workflow and self._on_workflow_end is not None:  # no I/O for any other workflow
            self._on_workflow_end(self.store, self._egress.invoker, self.retention.clock, workflow)

    def _give_up(self, env: Envelope, error: UnumError, invocation: str) -> None:
        self.end_in_failure(env.workflow, failure_record(
            getattr(error, "error_type", type(error).__name__), getattr(error, "message", str(error)),
            function=self.ir.function, invocation=invocation, attempts=env.attempt + 1,
            trace=getattr(error, "trace", ())),
            history=stamp(self.ir.function, env, started=None, committed=self.retention.clock(), with_deadline=True),
            deadline=env.deadline)

    def close(self) -> None:
        if self._own_executor:
            self.executor.shutdown(wait=False)

    def _context(self, env: Envelope, invocation: str) -> InvocationContext:
        """The handler's context: the layer's plain context class, or a DeliveryContext for the
        layer to extend (`Layer.plain_context`)."""
        top = env.frames[-1]
        # `timers` as a builder: built when the handler first reads `context.timers`.
        return self._context_class(env.workflow, self.ir.function, invocation, env.attempt, top.index, top.size,
                                   top.iteration, env.deadline,
                                   partial(self._timers, env))  # type: ignore[arg-type]  # (TimersOnFirstUse)

    def _run_handler(self, event: Any, context: InvocationContext) -> Any:
        """The handler on `event`, through the layer when it wraps calls (`Layer.wraps_calls`)."""
        if self._wraps_calls:
            return self.layer.call(partial(self._call_handler, event, context))
        return self._call_handler(event, context)

    def _timers(self, env: Envelope) -> Timers:
        """The handler's durable timers (unum_entry.timers); no I/O until one is armed."""
        return Timers(store=self.store, invoker=self._egress.invoker, function=self.ir.function, envelope=env,
                      clock=self.retention.clock, latest=env.deadline - self.retention.margin_seconds)

    def _call_handler(self, event: Any, context: InvocationContext) -> Any:
        try:
            return self.handler(event, context)
        # An abort; unum's own store or invoker inside a step (transient, redelivered); a timer
        # delivered before its time (unum_entry.timers.TimerNotDue: dropped by `handle`).
        except (WorkflowAborted, StoreError, InvokeError, StaleInvocation):
            raise
        except Exception as exc:  # user code: anything can come out
            raise HandlerFailed(self.ir.function, type(exc).__name__, str(exc), trace=user_trace(exc)) from exc
        except SystemExit as exc:  # the handler's own sys.exit(): its failure, not the platform's
            raise HandlerFailed(self.ir.function, "SystemExit", f"the handler called sys.exit({exc.code!r})",
                                trace=user_trace(exc)) from exc


class _Staged:
    """A delivery whose handler ran, with what its commit writes (`Runtime._stage`): its
    output and history stamp, and for a fan-in branch its join's first add and its plan."""

    __slots__ = ("env", "invocation", "checkpoint", "output", "history", "join", "planned")

    def __init__(self, env: Envelope, invocation: str, checkpoint: str | None, output: Any, history: bytes,
                 join: tuple[Ledger, SetAdd] | None, planned: Plan | None) -> None:
        self.env = env
        self.invocation = invocation
        self.checkpoint = checkpoint
        self.output = output
        self.history = history
        self.join = join
        self.planned = planned  # a fan-in branch's plan (`Program.branch_plan`), or None


def _handled_or_error(handle: Callable[[Envelope], EgressReport | None],
                      env: Envelope) -> EgressReport | None | Exception:
    try:
        return handle(env)
    except Exception as exc:
        return exc


def _starts_invoked(env: Envelope) -> bool:
    """Whether `env` is the delivery that starts a durable function's chained invoke's target
    (unum_entry.durable_functions.adapter: its input is the invoke's marker, naming.DURABLE_INVOKE, at the root)."""
    value = env.inputs[0].value if len(env.inputs) == 1 and env.inputs[0].inline else None
    return len(env.frames) <= 1 and isinstance(value, dict) and naming.DURABLE_INVOKE in value
