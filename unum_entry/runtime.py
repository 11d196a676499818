"""The in-situ runtime of one function: ingress → handler → egress.

A `Runtime` is built once per container/process (handler loaded, clients passed in) and then
`handle`s each delivery. It never retries by itself: it raises, and the platform (Lambda's async
retries, Pub/Sub redelivery, the local invoker) decides, calling `fail` when it gives up.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unum_entry import naming
from unum_entry.egress import EgressContext, EgressReport, Invoker, commit, commit_key, egress
from unum_entry.envelope import ROOT, DataRef, Envelope
from unum_entry.errors import HandlerFailed, HandlerLoadError, InvokeError, RetentionExpired, StaleInvocation, StoreError, UnumError
from unum_entry.frozen import Frozen, frozen
from unum_entry.hooks import FaultPoint, Hooks, NoHooks
from unum_entry.ingress import AlreadyCommitted, ingress
from unum_entry.ir import FunctionIR
from unum_entry.retention import Retention
from unum_entry.steps import Aborted, HookRaised, Journal, StepEnv, StepsAPI, abort_workflow, advance, compensation_request
from unum_entry.steps import run_compensation, witnesses
from unum_entry.stores.base import Store

if TYPE_CHECKING:
    from concurrent.futures import Executor

Handler = Callable[[Any, "InvocationContext"], Any]
log = logging.getLogger("unum.runtime")


@frozen
class InvocationContext(Frozen, StepsAPI):
    """What a handler may know about its invocation (the second handler argument), and the step
    API of `@durable` handlers (`step`, `transact`, `now`, `random`, `uuid4`, `abort`;
    unum_entry.steps). Building one does no I/O; only calling a step does."""

    workflow_id: str
    function_name: str
    invocation: str
    attempt: int
    index: int
    size: int
    iteration: int
    _journal: Journal | None = field(default=None, repr=False, compare=False)

    def __init__(self, workflow_id: str, function_name: str, invocation: str, attempt: int, index: int, size: int,
                 iteration: int, _journal: Journal | None = None) -> None:
        self.__dict__.update(workflow_id=workflow_id, function_name=function_name, invocation=invocation,
                             attempt=attempt, index=index, size=size, iteration=iteration, _journal=_journal)


@frozen
class RuntimeConfig(Frozen):
    """Tunables. Values whose msgpack form exceeds `inline_limit` bytes travel by reference
    (Lambda's async payload limit is 256 KB for the whole event)."""

    inline_limit: int = 64 * 1024
    dispatch_workers: int = 64
    # How long objects live (unum_entry.retention); None: the store's TTL with the default
    # redelivery window.
    retention: Retention | None = None

    def __init__(self, inline_limit: int = 64 * 1024, dispatch_workers: int = 64,
                 retention: Retention | None = None) -> None:
        self.__dict__.update(inline_limit=inline_limit, dispatch_workers=dispatch_workers, retention=retention)


def new_workflow(input_value: Any, workflow_id: str | None = None) -> Envelope:
    """The envelope that starts a workflow at its entry function (which sets its deadline)."""
    if not workflow_id:
        import uuid  # lazy: the adapters name a start by its request id; only other starts draw one

        workflow_id = f"wf-{uuid.uuid4().hex}"
    return Envelope(workflow=workflow_id, inputs=(DataRef(value=input_value),), start=True)


def store_retention(store: Store) -> Retention:
    """The retention rule over a store's TTL and clock."""
    return Retention(ttl_seconds=store.ttl_seconds, clock=getattr(store, "_clock", time.time))


class Runtime:
    """Runs one function's deliveries exactly-once-effectively under at-least-once delivery."""

    def __init__(self, ir: FunctionIR, handler: Handler, store: Store, invoker: Invoker, *,
                 config: RuntimeConfig | None = None, hooks: Hooks | None = None,
                 executor: Executor | None = None) -> None:
        self.ir = ir
        self.handler = handler
        self.store = store
        self.config = config or RuntimeConfig()
        self.hooks = hooks or NoHooks()
        self._own_executor = executor is None
        if executor is None:
            from concurrent.futures import ThreadPoolExecutor  # lazy: built at init, not needed to import

            executor = ThreadPoolExecutor(self.config.dispatch_workers, thread_name_prefix=f"unum-{ir.function}")
        self.executor = executor
        self.retention = self.config.retention or store_retention(store)
        self._egress = EgressContext(ir=ir, store=store, invoker=invoker, executor=self.executor,
                                     hooks=self.hooks, inline_limit=self.config.inline_limit,
                                     retention=self.retention, abort=abort_workflow,
                                     dispatch_workers=self.config.dispatch_workers)
        self._steps = StepEnv(store=store, invoker=invoker, hooks=self.hooks, function=ir.function, handler=handler)

    def handle(self, env: Envelope) -> EgressReport | None:
        """Process one delivery. Returns None when nothing was left to do (dropped).

        Raises HandlerFailed when user code raised (retryable), RetentionExpired when the
        workflow outlived its objects, other UnumErrors when the request or output does not fit
        the IR (not retryable), StoreError/InvokeError when the platform should redeliver, and
        whatever a hook raises. A handler's `ctx.abort` fails the workflow and starts its
        compensations (returns None); a compensation request (unum_entry.steps) runs one
        compensation (returns None).
        """
        request = compensation_request(env)
        if request is not None:
            try:
                run_compensation(self._steps, env.workflow, request)
            except HookRaised as escape:
                raise escape.original from None
            return None
        if not env.deadline:  # the workflow's start: its objects live from now on
            env = replace(env, deadline=self.retention.deadline())
        invocation = naming.checkpoint_key(env.workflow, self.ir.function, env.frames)
        if not self._may_run(env, invocation):
            return None
        checkpoint = commit_key(self.ir, env, invocation)
        before = ingress(env, self.store, checkpoint, check_first=self.ir.ingress_check)
        if isinstance(before, AlreadyCommitted):
            stored, created = before.stored, False
        else:
            self.hooks.at(FaultPoint.BEFORE_HANDLER, invocation)
            journal = None  # plain handlers get no journal: no step work at all
            if self._steps.durable:
                journal = Journal(self._steps, env.workflow, invocation, recheck=lambda: self._recheck(checkpoint),
                                  guards=witnesses(env, checkpoint))
            try:
                output = self._call_handler(before.event, env, invocation, journal)
            except Aborted as abort:
                self._give_up(env, {"Error": abort.error, "Cause": abort.cause}, invocation)
                return None
            except StaleInvocation:
                # A step found the workflow ended (drop), or this invocation committed while
                # this slow duplicate ran: continue as a duplicate with the committed output.
                committed = self.store.get(checkpoint) if checkpoint is not None else None
                if committed is None:
                    return None
                stored, created = committed, False
            else:
                self.hooks.at(FaultPoint.AFTER_HANDLER, invocation)
                stored, created = commit(self._egress, env, checkpoint, output)
        self.hooks.at(FaultPoint.AFTER_CHECKPOINT, invocation)
        return egress(self._egress, env, invocation, checkpoint, stored, created)

    def _may_run(self, env: Envelope, invocation: str) -> bool:
        """The retention rule's deadline (unum_entry.retention): past it, a delivery is dropped
        when its invocation already committed or the workflow has an outcome; otherwise it
        fails the workflow (RetentionExpired)."""
        try:
            self.retention.check(env.workflow, env.deadline)
        except RetentionExpired:
            known = [commit_key(self.ir, env, invocation) or invocation,
                     naming.result_key(env.workflow, ROOT), naming.failure_key(env.workflow)]
            if self.store.read(known):
                return False
            raise
        return True

    def fail(self, env: Envelope, error: UnumError) -> None:
        """Give up on this invocation: record the workflow's failure (first one wins) and start
        the compensations of its completed steps. Nothing is deleted (unum_entry.retention)."""
        request = compensation_request(env)
        if request is not None:
            # A compensation that keeps failing: skip it so the older ones still run.
            log.error("workflow %s: compensation %d failed for good: %s", env.workflow, request.index, error)
            advance(self.store, self._egress.invoker, env.workflow, request)
            return
        record = {
            "Error": getattr(error, "error_type", type(error).__name__),
            "Cause": getattr(error, "message", str(error)),
        }
        self._give_up(env, record, naming.checkpoint_key(env.workflow, self.ir.function, env.frames))

    def _recheck(self, checkpoint: str | None) -> None:
        """Before a step runs afresh: raises StaleInvocation when this invocation committed
        while this execution was running (a slow duplicate must not perform a new effect)."""
        if checkpoint is not None and self.store.get(checkpoint) is not None:
            raise StaleInvocation(f"{checkpoint} committed while this execution ran")

    def _give_up(self, env: Envelope, error: dict[str, Any], invocation: str) -> None:
        record = {**error, "Function": self.ir.function, "Invocation": invocation, "Attempts": env.attempt + 1}
        abort_workflow(self.store, self._egress.invoker, env.workflow, record)

    def close(self) -> None:
        if self._own_executor:
            self.executor.shutdown(wait=False)

    def _call_handler(self, event: Any, env: Envelope, invocation: str, journal: Journal | None = None) -> Any:
        top = env.top
        context = InvocationContext(workflow_id=env.workflow, function_name=self.ir.function,
                                    invocation=invocation, attempt=env.attempt,
                                    index=top.index, size=top.size, iteration=top.iteration, _journal=journal)
        try:
            return self.handler(event, context)
        except Aborted:
            raise
        except HookRaised as escape:  # a hook inside a step: not the handler's failure
            raise escape.original from None
        except (StoreError, InvokeError):  # unum's own store or invoker inside a step: transient,
            raise                            # the platform redelivers (not a handler failure)
        except Exception as exc:  # user code: anything can come out
            raise HandlerFailed(self.ir.function, type(exc).__name__, str(exc)) from exc


def load_handler(function_dir: str | Path, spec: str, *, function: str) -> Handler:
    """Import `module.attr` from a function's folder under a private module name, so functions
    with the same module name (every `app.py`) do not collide in one process."""
    module_name, _, attr = spec.rpartition(".")
    folder = Path(function_dir)
    path = folder / (module_name.replace(".", "/") + ".py")
    if not path.is_file():
        found = sorted(p.name for p in folder.glob("*.py"))
        raise HandlerLoadError(f"function {function!r}: handler {spec!r} expects {path}, which does not exist"
                               f" (found: {', '.join(found) or 'no .py files'})")
    import uuid  # lazy: once per process, at init

    unique = f"unum_fn_{uuid.uuid5(uuid.NAMESPACE_URL, str(path.resolve())).hex}"
    module_spec = importlib.util.spec_from_file_location(unique, path)
    if module_spec is None or module_spec.loader is None:
        raise HandlerLoadError(f"function {function!r}: cannot load {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, str(folder))  # so the handler can import its sibling modules
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:
        raise HandlerLoadError(f"function {function!r}: importing {path} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(folder))
    handler = getattr(module, attr, None)
    if not callable(handler):
        names = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_"))
        raise HandlerLoadError(f"function {function!r}: {path.name} is expected to contain a function named "
                               f"{attr!r}. Found: {', '.join(names) or 'no functions'}")
    return handler
