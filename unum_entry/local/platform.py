"""The embedded local platform: a whole workflow on one machine, no cloud.

It plays the FaaS platform's part and nothing more: an asynchronous, at-least-once invoker
(a worker pool over a queue of deliveries) that applies the same delivery policy as the cloud
adapters (`unum_entry.platforms.common.deliver`): failed handlers are retried up to the
function's `max_attempts` and then `Runtime.fail` records the workflow's failure; transient
store or invoke errors (also when recording a failure) and bugs are redelivered after a bounded
exponential backoff, crashed executions at once; a delivery that fails `max_redeliveries` times
in a row (a bug: `BUG_REDELIVERIES` + 1 times) is dead-lettered, after a last attempt at
recording the workflow's failure, as Lambda's on-failure destination would. Once a delivery of
this platform recorded a workflow's failure, the fan-out items and branches of that workflow
still queued are dropped before their handler if the failure record is still there (one read
each, for failed workflows only: Step Functions starts no more items of a failed Map). No
exception ends a worker thread. Orchestration stays in each function's runtime, exactly as in the cloud. With a
`FaultInjector` it also misbehaves the ways a real platform may.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
import contextlib
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from unum_entry.codec import decode, encode
from unum_entry.envelope import Envelope, is_watchdog
from unum_entry.errors import EnvelopeError, RedeliveriesExhausted, UnumError, WorkflowTimeout
from unum_entry.invocation_log import InvocationLog, InvocationRecord, error_type, hosted_state
from unum_entry.local.faults import FaultInjector, InjectedCrash
from unum_entry.local.queue import Delivery, DeliveryQueue, MemoryQueue
from unum_entry.outcome import Ending, RunResult, read_outcome
from unum_entry.platforms.common import DeliveryStatus, RetryPolicy, deliver, record_failure
from unum_entry.runtime import Handler, Runtime, RuntimeConfig, load_handler, new_workflow
from unum_entry.steps.layer import StepsLayer
from unum_entry.stores.base import Store
from unum_entry.workflow import Workflow

log = logging.getLogger("unum.local")

HandlerWrapper = Callable[[str, Handler], Handler]

MAX_REDELIVERIES = 50  # consecutive failed deliveries of one delivery before it is dead-lettered
BUG_REDELIVERIES = 2   # ... when it fails with a bug (not an UnumError): Lambda's async retries
MAX_BACKOFF = 0.5      # seconds: the cap of the redelivery (and handler-retry) backoff
FAILURES_SHOWN = 3     # failed attempts `progress()` names
WAKE_BATCH = 64        # a worker's due pushes that wake idle workers at once (`_enqueue`)


@dataclass(frozen=True)
class FunctionProgress:
    """One function's share of `LocalPlatform.progress()`."""

    function: str
    committed: int   # invocations committed
    in_flight: int   # deliveries queued or running


@dataclass(frozen=True)
class Progress:
    """`LocalPlatform.progress()`: invocations committed, deliveries in flight (queued or
    running), workflow failures recorded, handler retries, and the same per function."""

    committed: int
    in_flight: int
    failed: int
    retries: int
    functions: tuple[FunctionProgress, ...] = ()
    running: int = 0   # of `in_flight`, deliveries being processed now (the rest are queued)
    failures: tuple[str, ...] = ()  # the latest failed attempts, newest last: `Work[3] ValueError`


class _LocalInvoker:
    """The Invoker every runtime gets: queue a delivery on the platform."""

    def __init__(self, platform: LocalPlatform) -> None:
        self._platform = platform

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self._platform.submit(function, payload)

    def invoke_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        self._platform.submit_at(when, function, payload, name=name)

    def has_function(self, function: str) -> bool:
        """Does the platform run `function`? (A durable function's `invoke` of another fails at
        once when not, as Lambda's Invoke does: unum_entry.durable_functions.adapter.)"""
        return function in self._platform.runtimes


class LocalPlatform:
    """Runs the functions of `workflow` against `store` with `workers` concurrent executions.

    `retry_delay` is the base of both backoffs (`retry_delay * 2**n`, at most `max_backoff`
    seconds): before a failed handler's next attempt (n = its attempt) and before redelivering
    a transient error or a bug (n = the delivery's consecutive failures so far); an injected
    crash is redelivered after `retry_delay`. `max_redeliveries` bounds the consecutive
    redeliveries of one delivery (at most `BUG_REDELIVERIES` when it fails with a bug).

    `queue` holds the deliveries accepted and not yet done (default: a `MemoryQueue`; a
    `SQLiteQueue` keeps them across processes and `recover` re-drives what a killed process
    left). A delivery leaves it only once its processing ended, after whatever it re-queued."""

    def __init__(self, workflow: Workflow, store: Store, *, workers: int = 4,
                 faults: FaultInjector | None = None, config: RuntimeConfig | None = None,
                 wrap: HandlerWrapper | None = None, invoke_latency: float = 0.0,
                 retry_delay: float = 0.001, max_redeliveries: int = MAX_REDELIVERIES,
                 max_backoff: float = MAX_BACKOFF, queue: DeliveryQueue | None = None,
                 invocation_log: InvocationLog | None = None) -> None:
        self.workflow = workflow
        # One line per delivery, as the function images write them (`run --log-format json`, `-v`).
        self.invocation_log = invocation_log
        self._states = {name: hosted_state(str(spec.folder)) for name, spec in workflow.functions.items()} \
            if invocation_log is not None else {}
        self.store = store
        self.faults = faults
        self.invoke_latency = invoke_latency
        self.retry_delay = retry_delay
        self.max_redeliveries = max_redeliveries
        self.stats: Counter[str] = Counter()
        self.dead_letters: list[str] = []
        # Per function, for `progress()`: deliveries queued or running, invocations committed.
        self._in_flight: Counter[str] = Counter()
        self._committed: Counter[str] = Counter()
        self._running = 0  # deliveries taken and not yet done (`progress()`)
        self._failures: deque[str] = deque(maxlen=FAILURES_SHOWN)  # the latest failed attempts (`progress()`)
        self._failed_here: set[str] = set()  # workflows whose failure a delivery here recorded (`_ended`)
        self._cancelled = False
        self._backoff = RetryPolicy(base=retry_delay, cap=max(max_backoff, retry_delay))
        self._stats_lock = threading.Lock()
        self._wall_clock: Callable[[], float] = getattr(store, "_clock", time.time)  # timers' `when`
        # Deliveries not yet taken, by due time (epoch seconds). With faults, those already due
        # move to `_ready`, from which the injector picks any.
        self.queue: DeliveryQueue = queue if queue is not None else MemoryQueue()
        self._ready: list[Delivery] = []
        # Deliveries queued or running, except timers while queued (they may be days ahead):
        # a timer counts from when it is taken. `wait_idle` waits for queued timers due before
        # it gives up, never for a deadline watchdog's (`Delivery.background`).
        self._outstanding = 0
        self._timer_names: set[str] = set()  # timers queued: one armed twice is queued once
        self._lock = threading.Lock()
        self._work_cv = threading.Condition(self._lock)  # workers: a delivery was queued, or stop
        # Per worker thread: due pushes of its current delivery whose wake-up is still owed
        # (`_enqueue`, `_work`); absent on any other thread, which wakes a worker per push.
        self._owed = threading.local()
        self._idle_workers = 0  # workers waiting for a due delivery (lock held)
        self._idle_cv = threading.Condition(self._lock)  # wait_idle: nothing is outstanding any more
        self._stopping = False
        self._executor = ThreadPoolExecutor((config or RuntimeConfig()).dispatch_workers, thread_name_prefix="unum-dispatch")
        invoker = _LocalInvoker(self)
        # An invoke here is a queue push (no latency to overlap): unless configured otherwise, a
        # fan-out's calls go out one after another from the invoking worker, not from 64 dispatch
        # threads that would contend with the workers for the GIL and the queue's lock.
        sequential = config is None and not invoke_latency and faults is None
        if not workflow.watchdog:  # the workflow's manifest turned its deadline watchdog off
            config = replace(config or RuntimeConfig(), watchdog=False)
        if sequential:
            config = replace(config or RuntimeConfig(), dispatch_workers=1)
        self.runtimes: dict[str, Runtime] = {}
        for name, spec in workflow.functions.items():
            handler = load_handler(spec.folder, spec.ir.handler, function=name)
            if wrap is not None:  # tests: record or replace user code
                handler = wrap(name, handler)
            self.runtimes[name] = Runtime(spec.ir, handler, store, invoker, config=config,
                                          hooks=faults, executor=self._executor, layer=StepsLayer)
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

    def wait_idle(self, timeout: float, *, until: float | None = None) -> None:
        """Block until no delivery is queued or running, but timers due after `until` (epoch
        seconds; default: when `timeout` ends) or a deadline watchdog's. Raises WorkflowTimeout."""
        deadline = time.time() + timeout if until is None else until
        with self._lock:
            if not self._idle_cv.wait_for(lambda: self._idle(deadline), timeout):
                raise WorkflowTimeout(f"{self._outstanding} deliveries still in flight after {timeout:.0f} s")

    def _idle(self, deadline: float) -> bool:
        """Nothing running or queued, but timers due after `deadline` or a watchdog's (lock held)."""
        if self._outstanding:
            return False
        if not self._timer_names and not self._ready:  # the common case: nothing queued at all
            return True
        due = self.next_timer(lock=False)
        return not self._ready and (due is None or due > deadline)

    def next_timer(self, *, lock: bool = True) -> float | None:
        """When the earliest queued timer is due (epoch seconds; a watchdog's excepted), or None."""
        with self._lock if lock else contextlib.nullcontext():
            due = [at for at, d in self.queue.snapshot() if d.timer is not None and not d.background] \
                if self._timer_names else []
            return min(due, default=None)

    def recover(self, workflow_id: str) -> int:
        """Queue again the deliveries and timers of `workflow_id` that a previous process left
        unfinished in a durable queue (none in memory); returns how many, not counting a deadline
        watchdog's timer (`Delivery.background`): with only that left, the caller starts again."""
        found = self.queue.recover(workflow_id)
        with self._lock:
            for ready_at, delivery in found:
                self.queue.restore(delivery, ready_at)
                self._count_queued(delivery)
            self._work_cv.notify_all()
        return sum(1 for _, delivery in found if not delivery.background)

    def close(self) -> None:
        if self._cancelled:
            return
        with self._lock:
            self._stopping = True
            self._work_cv.notify_all()
            self._idle_cv.notify_all()
        for thread in self._workers:
            thread.join(timeout=5)
        self._executor.shutdown(wait=True)
        self.queue.close()

    # ---- progress and cancellation (`builder run`) -------------------------------------

    def progress(self) -> Progress:
        """A consistent-enough snapshot for a progress display (counters only; no store reads)."""
        with self._stats_lock:
            stats = dict(self.stats)
            committed = dict(self._committed)
        with self._lock:
            in_flight = {name: n for name, n in self._in_flight.items() if n}
            outstanding = self._outstanding
            running = self._running
            failures = tuple(self._failures)
        functions = tuple(FunctionProgress(name, committed.get(name, 0), in_flight.get(name, 0))
                          for name in sorted(set(committed) | set(in_flight)))
        return Progress(committed=stats.get("committed", 0), in_flight=outstanding, failed=stats.get("failed", 0),
                        retries=stats.get("handler_retries", 0), functions=functions,
                        running=min(running, outstanding), failures=failures)

    def cancel(self) -> None:
        """Stop at once (Ctrl-C): queued deliveries are not taken, running executions are left
        to their (daemon) threads as if their instance crashed; a later run of the same
        workflow id redelivers from its checkpoints. `close()` afterwards returns at once. (The
        dispatch executor stays up: an abandoned execution's invokes just queue, unseen.)"""
        with self._lock:
            self._stopping = True
            self._cancelled = True
            self._work_cv.notify_all()
            self._idle_cv.notify_all()
        self.queue.close()  # what the journal holds now stays; what abandoned executions do later is redone

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
        self._count("invokes")
        self._enqueue(Delivery(_workflow_of(payload), function, data), delay)

    def submit_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        """Accept one durable timer (`Invoker.invoke_at`): deliver at or after `when` (epoch
        seconds on the store's clock). It lives as long as the platform's queue: across
        processes in a durable one. A timer armed again while queued (same `name`) is queued once."""
        self._count("timers")
        delay = max(0.0, when - self._wall_clock())
        data = encode(payload, what="envelope")
        with self._lock:
            if name in self._timer_names:
                return
        self._enqueue(Delivery(_workflow_of(payload), function, data, timer=name, background=is_watchdog(payload)),
                      delay)

    def _enqueue(self, delivery: Delivery, delay: float) -> None:
        """Queue `delivery` (copies and extra delays as the fault injector plans) after `delay`."""
        delays = self.faults.plan_delivery().delays if self.faults else (0.0,)
        now = time.time()
        with self._lock:
            for i, extra in enumerate(delays):
                copy = delivery if i == 0 else Delivery(delivery.workflow, delivery.function, delivery.payload,
                                                        delivery.failures, delivery.timer, background=delivery.background)
                self.queue.push(copy, now + delay + extra)
                self._count_queued(copy)
            if delay or any(delays):
                self._work_cv.notify_all()  # sleeping workers recompute when the next one is due
            elif (owed := getattr(self._owed, "n", None)) is None:
                self._work_cv.notify(len(delays))
            elif owed + 1 >= WAKE_BATCH:  # a wide fan-out: wake an idle worker as it goes (it passes the baton on)
                self._owed.n = 0
                self._work_cv.notify(1)
            else:
                self._owed.n = owed + 1

    def _take(self, done: Delivery | None = None) -> Delivery | None:
        """The next due delivery (the earliest; with faults, any due one the injector picks);
        blocks until one is due. None once the platform is closing. O(log n) per delivery.
        `done`: the delivery this worker just finished (its queue entry already finished),
        accounted for under the same lock acquisition (`_done`)."""
        queue = self.queue
        with self._lock:
            if done is not None:
                self._done(done)
            while not self._stopping:
                now = time.time()
                if self.faults is None:
                    if (delivery := queue.pop_due(now)) is not None:
                        if self._idle_workers and (due := queue.next_due()) is not None and due <= now:
                            self._work_cv.notify(1)  # more is due: an idle worker takes the next (the baton)
                        return self._taken(delivery)
                else:
                    ready = self._ready
                    while (delivery := queue.pop_due(now)) is not None:
                        ready.append(delivery)
                    if ready:
                        i = self.faults.pick(len(ready))
                        ready[i], ready[-1] = ready[-1], ready[i]
                        return self._taken(ready.pop())
                due = queue.next_due()
                wait = due - now if due is not None else 0.05
                self._idle_workers += 1
                try:
                    self._work_cv.wait(max(0.0005, min(wait, 0.05)))
                finally:
                    self._idle_workers -= 1
            return None

    def _count_queued(self, delivery: Delivery) -> None:
        """Count a delivery just queued (lock held): a timer only from when it is taken."""
        if delivery.timer is None:
            self._outstanding += 1
            self._in_flight[delivery.function] += 1
        else:
            self._timer_names.add(delivery.timer)

    def _taken(self, delivery: Delivery) -> Delivery:
        """A timer counts as in flight from when it is taken (lock held)."""
        self._running += 1
        if delivery.timer is not None:
            self._timer_names.discard(delivery.timer)
            self._outstanding += 1
            self._in_flight[delivery.function] += 1
        return delivery

    def _work(self) -> None:
        """A worker's loop. The due deliveries its delivery pushed wake no one while it runs
        (`_enqueue`; a wide fan-out wakes one idle worker per WAKE_BATCH pushes). When it ends,
        this worker goes straight back to the queue and takes the next due delivery itself (a
        chain's successor runs on the same thread, waking no other), and wakes one idle
        worker if it pushed more than that one; a worker that takes a delivery while more are
        due and others idle wakes one more (`_take`: the baton), so a fan-out spreads over
        every worker one wake-up at a time instead of all idle workers racing for each push.
        Idle workers also poll the queue every 50 ms: a push from a handler that then blocks
        in user code is never stranded longer than that."""
        self._owed.n = 0
        done: Delivery | None = None
        while (delivery := self._take(done)) is not None:
            done = None
            try:
                self._process(delivery)
            except BaseException as exc:  # a bug in the platform itself: keep the worker alive
                log.exception("local platform: delivery to %s lost", delivery.function)
                self._dead_letter(f"{delivery.function}: internal error in the local platform: "
                                  f"{type(exc).__name__}: {exc}")
            finally:
                self.queue.finish(delivery)  # after whatever it re-queued: a crash until here redelivers it
                done = delivery  # accounted for when this worker takes its next one (one lock acquisition)

    def _done(self, delivery: Delivery) -> None:
        """A delivery this worker finished is no longer in flight; the wake-ups its pushes owe
        are paid (lock held; see `_work`)."""
        self._running -= 1
        self._outstanding -= 1
        self._in_flight[delivery.function] -= 1
        if not self._outstanding:
            self._idle_cv.notify_all()
        owed = self._owed
        if owed.n > 1:
            self._work_cv.notify(1)
        owed.n = 0

    def _process(self, delivery: Delivery) -> None:
        try:
            env = Envelope.from_wire(decode(delivery.payload))
        except EnvelopeError as exc:
            self._count("deliveries")
            self._dead_letter(f"{delivery.function}: {exc}")
            return
        runtime = self.runtimes.get(delivery.function)
        if runtime is None:
            self._count("deliveries")
            self._dead_letter(f"invoke of unknown function {delivery.function!r} in workflow {env.workflow}")
            return
        if self._ended(env):
            self._count("deliveries")
            self._count("stale")
            return
        started = time.perf_counter()
        outcome = deliver(runtime, env, retry=self._backoff)
        if outcome.status is not DeliveryStatus.DONE:  # a delivery done is counted with its commit below
            self._count("deliveries")
        if outcome.status is DeliveryStatus.FAILED or (outcome.status is DeliveryStatus.DONE
                                                       and outcome.done_report.failed):
            with self._lock:
                self._failed_here.add(env.workflow)
        if self.invocation_log is not None:
            self.invocation_log.write(InvocationRecord.of(delivery.function, env, outcome.status, outcome.error,
                                                          (time.perf_counter() - started) * 1000,
                                                          state=self._states.get(delivery.function)))
        status = outcome.status
        if status in (DeliveryStatus.RETRY_HANDLER, DeliveryStatus.FAILED):  # named by `run`'s progress line
            top = env.top
            where = f"{delivery.function}[{top.index}]" if top.size > 1 else delivery.function
            with self._lock:
                self._failures.append(f"{where} {error_type(outcome.error) or 'error'}")
        if status is DeliveryStatus.DONE:
            created = outcome.done_report.created
            with self._stats_lock:  # one acquisition per delivery done (the hot path)
                self.stats["deliveries"] += 1
                self.stats["committed" if created else "replayed"] += 1
                if created:
                    self._committed[delivery.function] += 1
        elif status is DeliveryStatus.DROPPED:
            self._count("stale")
        elif status is DeliveryStatus.RETRY_HANDLER:
            retry_envelope = outcome.retry_envelope
            self._count("handler_retries")
            self.submit(delivery.function, retry_envelope.to_wire(), delay=outcome.delay)
        elif status is DeliveryStatus.FAILED:
            self._count("failed")
        else:
            self._redeliver(delivery, runtime, env, outcome.cause)

    def _ended(self, env: Envelope) -> bool:
        """Whether `env` is a fan-out item or branch (not a timer, not a compensation: those have
        no fan-out position) of a workflow whose failure a delivery here recorded, and the
        failure record still exists (a redrive clears it): then its handler must not start."""
        if env.workflow not in self._failed_here or env.top.size <= 1 or env.watchdog:
            return False
        ending = Ending.of(env.workflow)
        try:
            return ending.failure in self.store.read([ending.failure])
        except UnumError:  # the store is struggling: deliver as usual (the runtime's own rules apply)
            return False

    def _redeliver(self, delivery: Delivery, runtime: Runtime, env: Envelope, error: BaseException) -> None:
        """Deliver `delivery` again after the backoff, or dead-letter it once it failed
        `max_redeliveries` times in a row (recording the workflow's failure if the store lets us)."""
        failures = delivery.failures + 1
        limit = self.max_redeliveries
        if not isinstance(error, (InjectedCrash, UnumError)):  # a bug in unum: loud, with its traceback
            log.error("internal error in %s (workflow %s)", delivery.function, env.workflow,
                      exc_info=(type(error), error, error.__traceback__))
            limit = min(limit, BUG_REDELIVERIES)  # a bug rarely goes away: fail the workflow soon
        if failures <= limit:
            if isinstance(error, InjectedCrash):  # the execution died: another instance takes it at once
                self._count("crash_retries")
                delay = self.retry_delay
            else:  # the store or invoker is struggling (or a bug): back off
                self._count("redeliveries")
                delay = self._backoff.delay(failures - 1)
            self._enqueue(Delivery(delivery.workflow, delivery.function, delivery.payload, failures, delivery.timer,
                                   background=delivery.background), delay)
            return
        gave_up = RedeliveriesExhausted(delivery.function, failures, error)
        self._dead_letter(f"{delivery.function}: workflow {env.workflow}: {gave_up}")
        if record_failure(runtime, env, gave_up).status is DeliveryStatus.FAILED:
            self._count("failed")

    def _count(self, key: str) -> None:
        with self._stats_lock:
            self.stats[key] += 1

    def _dead_letter(self, message: str) -> None:
        log.error("dropped delivery: %s", message)
        self._count("dead_letters")
        with self._lock:
            self.dead_letters.append(message)


def _workflow_of(payload: dict[str, Any]) -> str:
    """The workflow id an envelope names ("" if it names none: it is dead-lettered when taken)."""
    workflow = payload.get("workflow") if isinstance(payload, dict) else None
    return workflow if isinstance(workflow, str) else ""


@contextmanager
def local_platform(workflow: Workflow, store: Store, **kwargs: Any) -> Iterator[LocalPlatform]:
    """`with local_platform(wf, store) as platform: platform.run(input)`."""
    platform = LocalPlatform(workflow, store, **kwargs)
    try:
        yield platform
    finally:
        platform.close()
