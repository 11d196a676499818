"""The embedded local platform: a whole workflow on one machine, no cloud.

It plays the FaaS platform's part and nothing more: an asynchronous, at-least-once invoker
(a worker pool over a bag of deliveries), retries of crashed executions, retries of failed
handlers up to the function's `max_attempts`, and an on-failure path that calls
`Runtime.fail`. Orchestration stays in each function's runtime, exactly as in the cloud.
With a `FaultInjector` it also misbehaves the ways a real platform may.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from unum_entry.codec import decode, encode
from unum_entry.envelope import Envelope
from unum_entry.errors import EnvelopeError, HandlerFailed, UnumError, WorkflowTimeout
from unum_entry.local.faults import FaultInjector, InjectedCrash
from unum_entry.runtime import Handler, Runtime, RuntimeConfig, load_handler, new_workflow
from unum_entry.outcome import RunResult, read_outcome
from unum_entry.stores.base import Store
from unum_entry.workflow import Workflow

log = logging.getLogger("unum.local")

HandlerWrapper = Callable[[str, Handler], Handler]


@dataclass(order=True)
class _Delivery:
    ready_at: float
    seq: int
    function: str = field(compare=False)
    payload: bytes = field(compare=False)


class _LocalInvoker:
    """The Invoker every runtime gets: queue a delivery on the platform."""

    def __init__(self, platform: LocalPlatform) -> None:
        self._platform = platform

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self._platform.submit(function, payload)


class LocalPlatform:
    """Runs the functions of `workflow` against `store` with `workers` concurrent executions."""

    def __init__(self, workflow: Workflow, store: Store, *, workers: int = 4,
                 faults: FaultInjector | None = None, config: RuntimeConfig | None = None,
                 wrap: HandlerWrapper | None = None, invoke_latency: float = 0.0,
                 retry_delay: float = 0.001) -> None:
        self.workflow = workflow
        self.store = store
        self.faults = faults
        self.invoke_latency = invoke_latency
        self.retry_delay = retry_delay
        self.stats: Counter[str] = Counter()
        self.dead_letters: list[str] = []
        self._bag: list[_Delivery] = []
        self._seq = 0
        self._outstanding = 0
        self._cv = threading.Condition()
        self._stopping = False
        self._executor = ThreadPoolExecutor((config or RuntimeConfig()).dispatch_workers, thread_name_prefix="unum-dispatch")
        invoker = _LocalInvoker(self)
        self.runtimes: dict[str, Runtime] = {}
        for name, spec in workflow.functions.items():
            handler = load_handler(spec.folder, spec.ir.handler, function=name)
            if wrap is not None:  # tests: record or replace user code
                handler = wrap(name, handler)
            self.runtimes[name] = Runtime(spec.ir, handler, store, invoker, config=config,
                                          hooks=faults, executor=self._executor)
        self._workers = [threading.Thread(target=self._work, name=f"unum-worker-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._workers:
            thread.start()

    # ---- running workflows ---------------------------------------------------------------

    def start(self, input_value: Any, workflow_id: str | None = None) -> str:
        """Invoke the entry function with `input_value`; returns the workflow id."""
        env = new_workflow(input_value, workflow_id)
        self.submit(self.workflow.entry, env.to_wire())
        return env.workflow

    def run(self, input_value: Any, *, workflow_id: str | None = None, timeout: float = 60.0) -> RunResult:
        """Start a workflow, wait until nothing is in flight, return what it left."""
        wf = self.start(input_value, workflow_id)
        self.wait_idle(timeout)
        return self.outcome(wf)

    def outcome(self, workflow_id: str) -> RunResult:
        """Results and failure recorded for a workflow (reads the store)."""
        return read_outcome(self.store, workflow_id)

    def wait_idle(self, timeout: float) -> None:
        """Block until no delivery is queued or running. Raises WorkflowTimeout."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._outstanding:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WorkflowTimeout(f"{self._outstanding} deliveries still in flight after {timeout:.0f} s")
                self._cv.wait(min(remaining, 0.05))

    def close(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        for thread in self._workers:
            thread.join(timeout=5)
        self._executor.shutdown(wait=True)

    def __enter__(self) -> LocalPlatform:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- delivery ------------------------------------------------------------------------

    def submit(self, function: str, payload: dict[str, Any], *, delay: float = 0.0) -> None:
        """Accept one asynchronous invoke (the platform's Invoke API)."""
        if self.invoke_latency:
            time.sleep(self.invoke_latency)
        data = encode(payload, what="envelope")  # a copy on the wire: no shared mutable state
        delays = self.faults.plan_delivery().delays if self.faults else (0.0,)
        now = time.monotonic()
        with self._cv:
            for extra in delays:
                self._seq += 1
                self._bag.append(_Delivery(now + delay + extra, self._seq, function, data))
                self._outstanding += 1
            self.stats["invokes"] += 1
            self._cv.notify_all()

    def _take(self) -> _Delivery | None:
        with self._cv:
            while not self._stopping:
                now = time.monotonic()
                ready = [i for i, d in enumerate(self._bag) if d.ready_at <= now]
                if ready:
                    pick = ready[self.faults.pick(len(ready))] if self.faults else min(ready, key=lambda i: self._bag[i])
                    return self._bag.pop(pick)
                wait = min((d.ready_at for d in self._bag), default=now + 0.05) - now
                self._cv.wait(max(0.0005, min(wait, 0.05)))
            return None

    def _work(self) -> None:
        while (delivery := self._take()) is not None:
            try:
                self._process(delivery)
            finally:
                with self._cv:
                    self._outstanding -= 1
                    self._cv.notify_all()

    def _process(self, delivery: _Delivery) -> None:
        self.stats["deliveries"] += 1
        try:
            env = Envelope.from_wire(decode(delivery.payload))
        except EnvelopeError as exc:
            self._dead_letter(f"{delivery.function}: {exc}")
            return
        runtime = self.runtimes.get(delivery.function)
        if runtime is None:
            self._dead_letter(f"invoke of unknown function {delivery.function!r} in workflow {env.workflow}")
            return
        try:
            report = runtime.handle(env)
            self.stats["stale" if report is None else ("replayed" if report and not report.created else "committed")] += 1
        except InjectedCrash:
            self.stats["crash_retries"] += 1
            self._redeliver(delivery.function, env, self.retry_delay)
        except HandlerFailed as exc:
            if env.attempt + 1 < runtime.ir.max_attempts:
                self.stats["handler_retries"] += 1
                self._redeliver(delivery.function, env.next_attempt(), self.retry_delay * (2 ** env.attempt))
            else:
                self._give_up(runtime, env, exc)
        except UnumError as exc:
            self._give_up(runtime, env, exc)
        except Exception as exc:  # a bug in unum itself: fail loudly, keep the platform alive
            log.error("internal error in %s: %s", delivery.function, traceback.format_exc())
            self._give_up(runtime, env, UnumError(f"internal error: {type(exc).__name__}: {exc}"))

    def _redeliver(self, function: str, env: Envelope, delay: float) -> None:
        self.submit(function, env.to_wire(), delay=delay)

    def _give_up(self, runtime: Runtime, env: Envelope, error: UnumError) -> None:
        self.stats["failed"] += 1
        runtime.fail(env, error)

    def _dead_letter(self, message: str) -> None:
        log.error("dropped delivery: %s", message)
        with self._cv:
            self.dead_letters.append(message)


@contextmanager
def local_platform(workflow: Workflow, store: Store, **kwargs: Any) -> Iterator[LocalPlatform]:
    """`with local_platform(wf, store) as platform: platform.run(input)`."""
    platform = LocalPlatform(workflow, store, **kwargs)
    try:
        yield platform
    finally:
        platform.close()
