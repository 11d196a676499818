"""The in-situ runtime of one function: ingress → handler → egress.

A `Runtime` is built once per container/process (handler loaded, clients passed in) and then
`handle`s each delivery. It never retries by itself: it raises, and the platform (Lambda's async
retries, Pub/Sub redelivery, the local invoker) decides, calling `fail` when it gives up.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unum_entry import naming
from unum_entry.codec import encode
from unum_entry.egress import EgressContext, EgressReport, Invoker, collect, commit, egress
from unum_entry.envelope import DataRef, Envelope
from unum_entry.errors import HandlerFailed, HandlerLoadError, StaleInvocation, UnumError
from unum_entry.hooks import FaultPoint, Hooks, NoHooks
from unum_entry.ingress import AlreadyCommitted, ingress
from unum_entry.ir import FunctionIR
from unum_entry.stores.base import Kind, Store

Handler = Callable[[Any, "InvocationContext"], Any]


@dataclass(frozen=True)
class InvocationContext:
    """What a handler may know about its invocation (the second handler argument)."""

    workflow_id: str
    function_name: str
    invocation: str
    attempt: int
    index: int
    size: int
    iteration: int


@dataclass(frozen=True)
class RuntimeConfig:
    """Tunables. Values whose msgpack form exceeds `inline_limit` bytes travel by reference
    (Lambda's async payload limit is 256 KB for the whole event)."""

    inline_limit: int = 64 * 1024
    dispatch_workers: int = 64


def new_workflow(input_value: Any, workflow_id: str | None = None) -> Envelope:
    """The envelope that starts a workflow at its entry function."""
    return Envelope(workflow=workflow_id or f"wf-{uuid.uuid4().hex}", inputs=(DataRef(value=input_value),), start=True)


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
        self.executor = executor or ThreadPoolExecutor(self.config.dispatch_workers, thread_name_prefix=f"unum-{ir.function}")
        self._egress = EgressContext(ir=ir, store=store, invoker=invoker, executor=self.executor,
                                     hooks=self.hooks, inline_limit=self.config.inline_limit,
                                     dispatch_workers=self.config.dispatch_workers)

    def handle(self, env: Envelope) -> EgressReport | None:
        """Process one delivery. Returns None when it was a stale duplicate (dropped).

        Raises HandlerFailed when user code raised (retryable), other UnumErrors when the
        request or output does not fit the IR (not retryable), and whatever a hook raises.
        """
        invocation = naming.checkpoint_key(env.workflow, self.ir.function, env.frames)
        checkpoint = invocation if self.ir.checkpoint else None
        try:
            before = ingress(env, self.store, checkpoint)
        except StaleInvocation:
            return None
        if isinstance(before, AlreadyCommitted):
            stored, created = before.stored, False
        else:
            self.hooks.at(FaultPoint.BEFORE_HANDLER, invocation)
            output = self._call_handler(before.event, env, invocation)
            self.hooks.at(FaultPoint.AFTER_HANDLER, invocation)
            encoded = encode(output, what=f"output of function {self.ir.function!r}")
            stored, created = commit(self._egress, env, checkpoint, encoded)
        self.hooks.at(FaultPoint.AFTER_CHECKPOINT, invocation)
        return egress(self._egress, env, invocation, checkpoint, stored, created)

    def fail(self, env: Envelope, error: UnumError) -> None:
        """Give up on this invocation: record the workflow's failure (first one wins) and
        collect what it consumed so retries of it find nothing to do."""
        record = {
            "Error": getattr(error, "error_type", type(error).__name__),
            "Cause": getattr(error, "message", str(error)),
            "Function": self.ir.function,
            "Invocation": naming.checkpoint_key(env.workflow, self.ir.function, env.frames),
            "Attempts": env.attempt + 1,
        }
        self.store.create(naming.failure_key(env.workflow), encode(record), workflow=env.workflow, kind=Kind.FAILURE)
        collect(self.store, env.gc)
        self.store.delete([naming.started_key(env.workflow)])

    def close(self) -> None:
        if self._own_executor:
            self.executor.shutdown(wait=False)

    def _call_handler(self, event: Any, env: Envelope, invocation: str) -> Any:
        top = env.top
        context = InvocationContext(workflow_id=env.workflow, function_name=self.ir.function,
                                    invocation=invocation, attempt=env.attempt,
                                    index=top.index, size=top.size, iteration=top.iteration)
        try:
            return self.handler(event, context)
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
