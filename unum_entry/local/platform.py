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

Egress hands a call's `Envelope` itself to this platform (`submit_envelope`): a worker's first
successor is its own next delivery, with no wire round trip and no queue (its values sealed:
unum_entry.local.handoff), the rest of a fan-out is queued in wire form; a worker takes quick
deliveries from the shared queue in small batches and keeps its counts to itself between them
(`_Hand`), so the queue's lock is taken about once per batch, not twice per delivery. On the
SQLite store with a durable queue, a worker lends a batch of a wide fan-out's calls to a helper
process on another CPU (`_lend`, unum_entry.local.helpers) and does what each outcome asks.
"""

from __future__ import annotations

import logging
import os
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
from unum_entry.errors import (EnvelopeError, HelperReported, PlanError, RedeliveriesExhausted, StoreError,
                               StoreUnusable, UnumError, WorkflowTimeout)
from unum_entry.invocation_log import InvocationLog, InvocationRecord, error_type, hosted_state
from unum_entry.local.faults import FaultInjector, InjectedCrash
from unum_entry.local import helpers as helping
from unum_entry.local.handoff import call_wire, envelope_wire, is_plain, open_call, open_sealed, seal
from unum_entry.local.queue import MAX_HOPS, CallRun, Delivery, DeliveryQueue, MemoryQueue
from unum_entry.outcome import Ending, RunResult, read_outcome
from unum_entry.plan import Call, FanOutCalls
from unum_entry.platforms.common import (DeliveryOutcome, DeliveryStatus, RetryPolicy, deliver,
                                        deliver_many, platform_runtime, record_failure)
from unum_entry.runtime import Handler, Runtime, RuntimeConfig, new_workflow
from unum_entry.handlers import load_handler
from unum_entry.stores.base import Store
from unum_entry.workflow import Workflow
from unum_entry.yielding_lock import YieldingLock

log = logging.getLogger("unum.local")

HandlerWrapper = Callable[[str, Handler], Handler]

MAX_REDELIVERIES = 50  # consecutive failed deliveries of one delivery before it is dead-lettered
BUG_REDELIVERIES = 2   # ... when it fails with a bug (not an UnumError): Lambda's async retries
MAX_BACKOFF = 0.5      # seconds: the cap of the redelivery (and handler-retry) backoff
FAILURES_SHOWN = 3     # failed attempts `progress()` names
WAKE_BATCH = 64        # a worker's due pushes that wake idle workers at once (`_enqueue`, `_flush`)
HOP_BUDGET = 64        # deliveries a worker takes from its own hand in a row before it settles with the queue
SETTLE_INTERVAL = 0.05  # ... or seconds: its counts reach progress() and wait_idle at least this often
TAKE_BATCH = 64        # due deliveries a worker takes at once when its deliveries are quick (`_take_shared`)
QUICK = 0.005          # seconds per delivery below which a worker's deliveries count as quick


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
    running: int = 0   # of `in_flight`, deliveries taken by a worker (being processed, or next in its hand)
    failures: tuple[str, ...] = ()  # the latest failed attempts, newest last: `Work[3] ValueError`


class _Hand:
    """A worker's own deliveries and counts, kept off the shared queue and its lock (`_take`).

    `next`: the first invoke its current delivery handed over (`submit_envelope`), which this
    worker takes next without queueing it (a chain's successor; the first of a fan-out);
    `taken`: due deliveries taken ahead in one batch; `pushes`: the current delivery's other
    handed-over invokes, queued every WAKE_BATCH and when it ends (`_flush`); `owed`: its
    `submit`s queued at once whose wake-up is still owed. `started`, `finished`, `in_flight`,
    `stats`, `committed`: counts the platform's own do not hold yet (`_settle`, under its lock,
    at least every HOP_BUDGET deliveries or SETTLE_INTERVAL seconds, and before it waits)."""

    __slots__ = ("batching", "current", "one_hop", "next", "taken", "pushes", "owed", "hops", "since", "settle_by",
                 "quick", "started", "finished", "in_flight", "stats", "committed")

    def __init__(self, *, batching: bool) -> None:
        self.batching = batching  # a worker's hand; not one made for a single `_take` (tests)
        self.current: Delivery | None = None  # the delivery being processed (a fan-out's origin)
        self.one_hop = False  # ... sends one call at most, its chain hop's (`Runtime.passes_one_hop`)
        self.next: Delivery | None = None
        self.taken: deque[Delivery] = deque()
        self.pushes: list[Delivery | CallRun] = []
        self.owed = 0
        self.hops = 0             # deliveries taken from this hand since the last settle
        self.since = 0.0          # time.monotonic() of the last settle
        self.settle_by = 0.0
        self.quick = False        # its deliveries took less than QUICK each since the settle before
        self.started = 0          # deliveries taken from `next` (not counted by the platform yet)
        self.finished = 0         # deliveries done (still counted by the platform as in flight)
        self.in_flight: dict[str, int] = {}
        self.stats: Counter[str] = Counter()
        self.committed: Counter[str] = Counter()


class _LocalInvoker:
    """The Invoker every runtime gets: queue a delivery on the platform (an `EnvelopeInvoker`)."""

    def __init__(self, platform: LocalPlatform) -> None:
        self._platform = platform

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self._platform.submit(function, payload)

    def invoke_envelope(self, function: str, envelope: Envelope) -> None:
        self._platform.submit_envelope(function, envelope)

    def invoke_fan_out(self, calls: FanOutCalls) -> bool:
        return self._platform.submit_fan_out(calls)

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
                 invocation_log: InvocationLog | None = None, helpers: int | None = None) -> None:
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
        self._halted: StoreUnusable | None = None  # why the platform stopped by itself (`_halt`)
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
        self._waited_timers: set[str] = set()  # ... of them, those `wait_idle` waits for (not a watchdog's)
        self._lock = YieldingLock()  # many workers take it in turn (unum_entry.yielding_lock: why)
        self._work_cv = threading.Condition(self._lock)  # type: ignore[arg-type]  # workers: a delivery was queued, or stop
        # Per worker thread: its `_Hand` (`hand`); absent on any other thread.
        self._local = threading.local()
        self._idle_workers = 0  # workers waiting for a due delivery (lock held)
        self._idle_cv = threading.Condition(self._lock)  # type: ignore[arg-type]  # wait_idle: nothing is outstanding any more
        self._stopping = False
        self._executor = ThreadPoolExecutor((config or RuntimeConfig()).dispatch_workers, thread_name_prefix="unum-dispatch")
        invoker = _LocalInvoker(self)
        self.invoker = invoker  # what sends to this platform from outside a function (a redrive, a resume)
        # An invoke here is a queue push (no latency to overlap): unless configured otherwise, a
        # fan-out's calls go out one after another from the invoking worker, not from 64 dispatch
        # threads that would contend with the workers for the GIL and the queue's lock.
        sequential = config is None and not invoke_latency and faults is None
        if not workflow.watchdog:  # the workflow's manifest turned its deadline watchdog off
            config = replace(config or RuntimeConfig(), watchdog=False)
        if sequential:
            config = replace(config or RuntimeConfig(), dispatch_workers=1)
        # Whether a worker may run a batch of fan-in branches with their commits together
        # (`_batch`): not when each delivery is to be seen on its own (faults picking the order,
        # an invocation log timing each, a simulated invoke latency).
        self._batching = faults is None and invocation_log is None and not invoke_latency
        # Helper processes that run batches of a wide fan-out's calls on the other CPUs
        # (unum_entry.local.helpers): None where they cannot run what a worker would.
        self._helpers = self._helper_pool(helpers, config, wrap) if self._batching else None
        self._bulk_expected = False  # told the store that a long run of writes comes (`_process_batch`)
        self.runtimes: dict[str, Runtime] = {}
        for name, spec in workflow.functions.items():
            handler = load_handler(spec.folder, spec.ir.handler, function=name)
            if wrap is not None:  # tests: record or replace user code
                handler = wrap(name, handler)
            self.runtimes[name] = platform_runtime(spec.ir, handler, store, invoker, config=config, hooks=faults,
                                                   executor=self._executor)
        self._workers = [threading.Thread(target=self._work, name=f"unum-worker-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._workers:
            thread.start()

    def _helper_pool(self, helpers: int | None, config: RuntimeConfig | None,
                     wrap: HandlerWrapper | None) -> helping.HelperPool | None:
        """The pool of helper processes: `helpers` of them at most (default: UNUM_HELPERS, else
        one per CPU the engine's workers leave free), on the SQLite store with its own clock and
        a durable queue, the runtimes' retention the store's, and no handler wrapped (tests): a
        helper opens the same files and runs the same handlers with the same rules. Else None."""
        from unum_entry.stores.sqlite import SQLiteStore  # (imported by the queue module already)

        store, config = self.store, config or RuntimeConfig()
        if (not isinstance(store, SQLiteStore) or store._clock is not time.time or not self.queue.durable
                or wrap is not None or config.retention is not None):
            return None
        if helpers is None:
            try:
                helpers = int(os.environ.get(helping.SWITCH, helping.other_cpus()))
            except ValueError:
                log.warning("local platform: %s=%r is not a number of processes: no helper processes",
                            helping.SWITCH, os.environ.get(helping.SWITCH))
                helpers = 0
        if helpers <= 0:
            return None
        database = store.database
        launch = helping.Launch(
            workflow=str(self.workflow.folder), database=str(database.path), durability=database.durability.value,
            busy_timeout=database.busy_timeout, ttl_seconds=store.ttl_seconds, inline_limit=config.inline_limit,
            watchdog=config.watchdog and self.workflow.watchdog, retry_base=self._backoff.base,
            retry_cap=self._backoff.cap)
        # Before the first helper writes, the writers of the file take turns without polling.
        return helping.HelperPool(launch, helpers, share=database.share_writes)

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
        seconds; default: when `timeout` ends) or a deadline watchdog's. Raises WorkflowTimeout,
        or the StoreUnusable that stopped the platform (`_halt`)."""
        deadline = time.time() + timeout if until is None else until
        with self._lock:
            if not self._idle_cv.wait_for(lambda: self._halted is not None or self._idle(deadline), timeout):
                raise WorkflowTimeout(f"{self._outstanding} deliveries still in flight after {timeout:.0f} s")
            if self._halted is not None:
                raise self._halted

    def _idle(self, deadline: float) -> bool:
        """Nothing running or queued, but timers due after `deadline` or a watchdog's (lock held)."""
        if self._outstanding:
            return False
        if not self._waited_timers and not self._ready:  # the common case: no timer queued but watchdogs
            return True  # (each workflow started has one: a scan of them at every wake-up would cost O(workflows))
        due = self.next_timer(lock=False)
        return not self._ready and (due is None or due > deadline)

    def next_timer(self, *, lock: bool = True) -> float | None:
        """When the earliest queued timer is due (epoch seconds; a watchdog's excepted), or None."""
        with self._lock if lock else contextlib.nullcontext():
            return min((at for at, _ in self._queued_timers()), default=None)

    def timer_workflows(self) -> set[str]:
        """The workflows with a timer queued (a deadline watchdog's excepted): what `run` checks
        before it stops waiting for timers of a workflow that ended (builder.commands.run)."""
        with self._lock:
            return {delivery.workflow for _, delivery in self._queued_timers()}

    def _queued_timers(self) -> list[tuple[float, Delivery]]:
        """(due, timer) of every queued timer but a deadline watchdog's (lock held)."""
        if not self._waited_timers:
            return []
        return [(at, d) for at, d in self.queue.snapshot() if d.timer is not None and not d.background]

    def recover(self, workflow_id: str) -> int:
        """Queue again the deliveries and timers of `workflow_id` that a previous process left
        unfinished in a durable queue (none in memory); returns how many, not counting a deadline
        watchdog's timer (`Delivery.background`): with only that left, the caller starts again."""
        found = self.queue.recover(workflow_id)
        hops = [hop for _, delivery in found for hop in self._committed_hops(delivery)]
        runs = self._recover_fan_outs(workflow_id)
        with self._lock:
            for ready_at, delivery in found:
                self.queue.restore(delivery, ready_at)
                self._count_queued(delivery)
            now = time.time()
            for hop in hops:
                self.queue.push(hop, now)
                self._count_queued(hop)
            for run in runs:
                self.queue.push_run(run)
                self._count_run(run)
            self._work_cv.notify_all()
        return (sum(1 for _, delivery in found if not delivery.background) + len(hops)
                + sum(len(run) for run in runs))

    def _committed_hops(self, delivery: Delivery) -> list[Delivery]:
        """The chain hops after the recovered `delivery` that committed, each to be delivered
        again as a duplicate (its egress re-run: the crash may have cut it short): the hops
        that held its row (`SQLiteQueue.pass_row`), built again from their senders'
        checkpoints (`Runtime.hop_after`), up to MAX_HOPS of them. The last committed one's
        duplicate sends the first hop that did not commit. Raises what reading the store raises
        (nothing is lost: the row stays)."""
        runtime = self.runtimes.get(delivery.function)
        if runtime is None or delivery.timer is not None or delivery.background:
            return []
        try:
            env = Envelope.from_wire(decode(delivery.payload))
        except (EnvelopeError, ValueError):  # its delivery fails the same way, and says why
            return []
        if not env.deadline or env.watchdog:  # a workflow's first delivery never heads a chain's row
            return []
        hops: list[Delivery] = []
        sent: Call | None = None  # the hop `env` is, once known to have committed
        try:
            for _ in range(MAX_HOPS + 1):
                committed, call = runtime.hop_after(env)
                if not committed:
                    break
                if sent is not None:
                    hops.append(Delivery(env.workflow, sent.function,
                                         envelope_wire(replace(sent.envelope, redelivered=True))))
                if call is None or (runtime := self.runtimes.get(call.function)) is None:
                    break
                sent, env = call, call.envelope
        except (EnvelopeError, PlanError, ValueError):  # the hop's delivery fails the same way, and says why
            pass
        return hops

    def _recover_fan_outs(self, workflow_id: str) -> list[CallRun]:
        """The runs of calls a previous process left unfinished, each fan-out's calls planned
        again from its origin's checkpoint (`Runtime.fan_out`: the calls it sent). A fan-out
        that cannot be planned again (its origin unknown here, its checkpoint gone) is given up
        for its origin's delivery, queued again: a duplicate, which sends the calls whose
        invocation has not committed. Raises what reading the store raises (nothing is lost:
        the rows stay)."""
        runs: list[CallRun] = []
        for fan_out, pending in self.queue.recover_fan_outs(workflow_id):
            runtime = self.runtimes.get(fan_out.function)
            fan_out.recovered = True
            try:  # with the deadline it ran with: a workflow's first delivery gets its deadline when it runs
                calls = runtime.fan_out(fan_out.origin()) if runtime else None
            except (EnvelopeError, PlanError, ValueError):  # its delivery fails the same way, and says why
                calls = None
            if calls is None:
                self.queue.abandon_fan_out(fan_out, [row for row, _ in pending])
                self._enqueue(Delivery(fan_out.workflow, fan_out.function, fan_out.payload), 0.0)
                continue
            again = calls.redelivered()  # a call that committed runs only its egress (the crash may have cut it short)
            runs += [CallRun(again, positions, first_id=row, fan_out=fan_out, unfinished=len(positions))
                     for row, positions in pending]
        return runs

    def close(self) -> None:
        if self._cancelled:
            return
        if self._helpers is not None:  # before the workers end: a helper dies with the thread that started it
            self._helpers.close()      # (PR_SET_PDEATHSIG); a batch still lent is run by its worker instead
        with self._lock:
            self._stop_taking()
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
            self._cancelled = True
            self._stop_taking()
        if self._helpers is not None:  # as if their instances crashed too
            self._helpers.close(kill=True)
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

    def submit_envelope(self, function: str, envelope: Envelope) -> None:
        """Accept one asynchronous invoke as the `Envelope` itself (`EnvelopeInvoker`: egress).

        On a worker, the first one its current delivery sends becomes the worker's own next
        delivery: no wire form (unless a durable queue journals it), no queue, no lock; its
        inline values are sealed (unum_entry.local.handoff), so the handler that receives it
        owns them. The others are queued in their wire form (compact: a wide fan-out is not an
        object per branch), WAKE_BATCH at a time. Raises what encoding the envelope raises.
        `submit` stays the one place that sees every invoke: a platform that overrides it (tests
        that record or alter invokes) gets these there, in their wire form."""
        hand = self._handing_hand()
        if hand is None:
            self.submit(function, envelope.to_wire())
            return
        if self.invoke_latency:
            time.sleep(self.invoke_latency)
        if hand.next is None:
            if self.queue.durable:  # the journal keeps the wire form; the worker skips decoding it when it can
                delivery = Delivery(envelope.workflow, function, b"", envelope=envelope) if is_plain(envelope) else \
                    Delivery(envelope.workflow, function, encode(envelope.to_wire(), what="envelope"))
                # A chain hop holds its sender's row when it can: no row of its own to write and delete.
                if not (hand.one_hop and hand.current is not None and self.queue.pass_row(hand.current, delivery)):
                    delivery.hops = 0
                    self.queue.journal(delivery, time.time())  # before the current delivery is finished
            else:
                delivery = Delivery(envelope.workflow, function, b"", envelope=seal(envelope))
            hand.next = delivery
        else:
            hand.pushes.append(Delivery(envelope.workflow, function, encode(envelope.to_wire(), what="envelope")))
            if len(hand.pushes) >= WAKE_BATCH:  # a wide fan-out: other workers start on it as it goes
                self._flush(hand, ending=False)
        hand.stats["invokes"] += 1

    def _handing_hand(self) -> _Hand | None:
        """The calling worker's hand when an invoke may be handed over without `submit` - on a
        worker, without faults (the injector sees every delivery queued), and with `submit` not
        overridden (it is then the one place that sees every invoke) - else None."""
        if self.faults is not None or getattr(self.submit, "__func__", None) is not LocalPlatform.submit:
            return None
        return getattr(self._local, "hand", None)

    def submit_fan_out(self, calls: FanOutCalls) -> bool:
        """Accept a whole fan-out as `submit_envelope` accepts each of its calls, but queue each
        as (`calls`, its position) - about half the memory of its wire form, nothing encoded -
        and build it when a worker takes it (unum_entry.local.handoff.open_call). A durable queue
        journals each call's wire form (encoded here, outside the platform's lock) and then keeps
        only its position. Declines (False: egress sends the calls one by one) where
        `submit_envelope` would encode them anyway - not on a worker, with faults, an overridden
        `submit` or an invoke latency - and when the first call's values are not immutable
        scalars: those would take more memory held decoded than encoded.

        A durable queue journals the fan-out as its origin - the current delivery, whose
        committed checkpoint plans these calls again after a crash - and a row per run of calls
        (unum_entry.local.queue), before the current delivery is finished; no call's wire form
        is encoded but the first's (the worker's own next delivery, journaled on its own)."""
        hand = self._handing_hand()
        if (hand is None or self.invoke_latency
                or not (calls.workflow and calls.functions) or not is_plain(calls[0].envelope)):
            return False
        queue, durable = self.queue, self.queue.durable
        origin = hand.current
        if durable and origin is None:
            return False
        positions = calls.positions
        if hand.next is None:
            first = positions[0]
            positions = positions[1:]
            hand.next = Delivery(calls.workflow, calls.functions[first], call_wire(calls, first) if durable else b"",
                                 source=calls, position=first)
            if durable:
                queue.journal(hand.next, time.time())
        fan_out = queue.journal_fan_out(calls.workflow, origin.function, origin.wire(), calls[0].envelope.deadline) \
            if durable and origin is not None and positions else None
        for start in range(0, len(positions), WAKE_BATCH):
            run = CallRun(calls, positions[start:start + WAKE_BATCH])
            queue.journal_run(run, fan_out)
            hand.pushes.append(run)
            if len(run) == WAKE_BATCH:  # a wide fan-out: other workers start on it as it goes
                self._flush(hand, ending=False)
        if fan_out is not None:
            queue.seal_fan_out(fan_out)
        hand.stats["invokes"] += len(calls)
        return True

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
        hand: _Hand | None = getattr(self._local, "hand", None)
        with self._lock:
            for i, extra in enumerate(delays):
                copy = delivery if i == 0 else delivery.again(delivery.failures)
                self.queue.push(copy, now + delay + extra)
                self._count_queued(copy)
            if delay or any(delays):
                self._work_cv.notify_all()  # sleeping workers recompute when the next one is due
            elif hand is None:
                self._work_cv.notify(len(delays))
            elif hand.owed + 1 >= WAKE_BATCH:  # a wide fan-out: wake an idle worker as it goes (it passes the baton on)
                hand.owed = 0
                self._work_cv.notify(1)
            else:
                hand.owed += 1

    def _flush(self, hand: _Hand, *, ending: bool = True) -> None:
        """Queue the invokes `hand`'s delivery handed over beyond its next one (journaled, in a
        durable queue, before that delivery is finished), and wake one idle worker when it left
        more than its worker takes itself; `ending`: the delivery ended (its owed wake-ups are
        paid too)."""
        pushes = hand.pushes
        owed = hand.owed if ending else 0
        if ending:
            hand.owed = 0
        if not pushes and (owed + (hand.next is not None) <= 1 or not self._idle_workers):
            return
        hand.pushes = []
        now = time.time()
        with self._lock:
            for entry in pushes:
                if isinstance(entry, CallRun):
                    self.queue.push_run(entry)
                    self._count_run(entry)
                else:
                    self.queue.push(entry, now)
                    self._count_queued(entry)
            self._work_cv.notify(1)  # it passes the baton on (`_take_shared`)

    def _take(self, done: Delivery | None = None, hand: _Hand | None = None) -> Delivery | None:
        """The next delivery for a worker whose `hand` just finished `done`: its own next one or
        one it took ahead, without the shared queue's lock, while its budget lasts (HOP_BUDGET,
        SETTLE_INTERVAL); else the next due from the shared queue (`_take_shared`). Blocks until
        one is due; None once the platform is closing. Without `hand` (not a worker): one due
        delivery from the shared queue."""
        if hand is None:
            hand = _Hand(batching=False)
        if done is not None:
            _finished(hand, done)
        if (hand.next is not None or hand.taken) and hand.hops < HOP_BUDGET and not self._stopping \
                and time.monotonic() < hand.settle_by:
            hand.hops += 1
            delivery = hand.next
            if delivery is None:
                return hand.taken.popleft()
            hand.next = None
            hand.started += 1
            hand.in_flight[delivery.function] = hand.in_flight.get(delivery.function, 0) + 1
            return delivery
        return self._take_shared(hand)

    def _take_shared(self, hand: _Hand) -> Delivery | None:
        """`_take` from the shared queue: settle `hand`'s counts, then the earliest due delivery
        (with faults, any due one the injector picks; a due timer before the invokes due). A
        worker whose deliveries are quick takes up to TAKE_BATCH at once, at most its share of
        what is due (one lock acquisition for all), and finishes a batch before it takes more.
        O(log n) per delivery."""
        queue = self.queue
        with self._lock:
            self._settle(hand)
            while not self._stopping:
                if hand.taken:  # its budget ran out with a batch in hand (at most TAKE_BATCH quick ones): go on
                    self._restart(hand)
                    return hand.taken.popleft()
                now = time.time()
                if self.faults is None:
                    if (delivery := queue.pop_due(now)) is not None:
                        self._taken(delivery)
                        if hand.quick and hand.batching:
                            for _ in range(min(TAKE_BATCH - 1, len(queue) // len(self._workers))):
                                if (more := queue.pop_due(now)) is None:
                                    break
                                hand.taken.append(self._taken(more))
                        if self._idle_workers and (due := queue.next_due()) is not None and due <= now:
                            self._work_cv.notify(1)  # more is due: an idle worker takes the next (the baton)
                        self._restart(hand)
                        return delivery
                else:
                    ready = self._ready
                    while (delivery := queue.pop_due(now)) is not None:
                        ready.append(delivery)
                    if ready:
                        i = self.faults.pick(len(ready))
                        ready[i], ready[-1] = ready[-1], ready[i]
                        self._restart(hand)
                        return self._taken(ready.pop())
                due = queue.next_due()
                wait = due - now if due is not None else 0.05
                self._idle_workers += 1
                try:
                    self._work_cv.wait(max(0.0005, min(wait, 0.05)))
                finally:
                    self._idle_workers -= 1
            return None

    def _restart(self, hand: _Hand) -> None:
        """A new budget for `hand`; were its deliveries since the last one quick?"""
        now = time.monotonic()
        hand.quick = now - hand.since < QUICK * (hand.hops + 1)
        hand.hops = 0
        hand.since = now
        hand.settle_by = now + SETTLE_INTERVAL

    def _settle(self, hand: _Hand) -> None:
        """Add `hand`'s counts to the platform's (lock held). Its next delivery, if any, has had
        its turn: it is queued behind what is due already (fairness: a chain on one worker
        yields to other work every HOP_BUDGET deliveries)."""
        if (nxt := hand.next) is not None:
            hand.next = None
            self._count_queued(nxt)
            self.queue.requeue(nxt)
        if hand.started != hand.finished:
            moved = hand.started - hand.finished
            self._outstanding += moved
            self._running += moved
            hand.started = hand.finished = 0
        if hand.in_flight:
            in_flight = self._in_flight
            for function, n in hand.in_flight.items():
                in_flight[function] += n
            hand.in_flight.clear()
        if hand.stats:
            with self._stats_lock:
                self.stats.update(hand.stats)
                self._committed.update(hand.committed)
            hand.stats.clear()
            hand.committed.clear()
        if not self._outstanding:
            self._idle_cv.notify_all()

    def _count_queued(self, delivery: Delivery) -> None:
        """Count a delivery just queued (lock held): a timer only from when it is taken."""
        if delivery.timer is None:
            self._outstanding += 1
            self._in_flight[delivery.function] += 1
        else:
            self._timer_names.add(delivery.timer)
            if not delivery.background:
                self._waited_timers.add(delivery.timer)

    def _count_run(self, run: CallRun) -> None:
        """Count the calls of a run just queued (lock held), as `_count_queued` counts each."""
        self._outstanding += len(run)
        in_flight, functions = self._in_flight, run.calls.functions
        for position in run.positions:
            in_flight[functions[position]] += 1

    def _taken(self, delivery: Delivery) -> Delivery:
        """A timer counts as in flight from when it is taken (lock held)."""
        self._running += 1
        if delivery.timer is not None:
            self._timer_names.discard(delivery.timer)
            self._waited_timers.discard(delivery.timer)
            self._outstanding += 1
            self._in_flight[delivery.function] += 1
        return delivery

    def _work(self) -> None:
        """A worker's loop. The first invoke its delivery hands over (egress: a chain's
        successor) stays in its hand and is its next delivery, queued nowhere, waking no one
        (`submit_envelope`); the others wait in its hand until it has sent WAKE_BATCH of them or
        the delivery ended, then join the shared queue at once and wake one idle worker
        (`_flush`; what it `submit`s - user code's invokes - is queued at once, its wake-up
        owed until then). A worker that takes a delivery while more are due and others idle
        wakes one more (`_take_shared`: the baton), so a fan-out spreads over every worker one
        wake-up at a time instead of all idle workers racing for each push. Idle workers also
        poll the queue every 50 ms: a push from a handler that then blocks in user code is
        never stranded longer than that."""
        hand = _Hand(batching=True)
        self._local.hand = hand
        done: Delivery | None = None
        while (delivery := self._take(done, hand)) is not None:
            done = None
            hand.current = delivery
            batch = self._batch(delivery, hand) if hand.taken else None
            try:
                if batch is None:
                    self._process(delivery, hand)
                else:
                    self._process_batch(batch, self.runtimes[delivery.function], hand)
            except BaseException as exc:  # a bug in the platform itself: keep the worker alive
                log.exception("local platform: delivery to %s lost", delivery.function)
                for lost in batch or (delivery,):
                    self._dead_letter(f"{lost.function}: internal error in the local platform: "
                                      f"{type(exc).__name__}: {exc}")
            finally:
                self._flush(hand)  # its successors are queued (journaled) before it is finished
                if batch is None:
                    self.queue.finish(delivery)  # after whatever it re-queued: a crash until here redelivers it
                else:
                    for finished in batch:
                        self.queue.finish(finished)
                    for extra in batch[1:]:  # (the first is accounted for as `done`)
                        _finished(hand, extra)
                done = delivery  # accounted for when this worker takes its next one

    def _batch(self, delivery: Delivery, hand: _Hand) -> list[Delivery] | None:
        """`delivery` and the deliveries `hand` took ahead that follow it in one batch, when its
        function's runtime commits fan-in branches together on this store
        (`Runtime.handle_many`): calls of a queued fan-out (each a first delivery) to the same
        function, as many as are next in `hand` (at most TAKE_BATCH, within its HOP_BUDGET).
        None for any other delivery: processed on its own."""
        if delivery.source is None or not self._batching:
            return None
        runtime = self.runtimes.get(delivery.function)
        if runtime is None or not runtime.batches_branches:
            return None
        batch, taken, function = [delivery], hand.taken, delivery.function
        while taken and hand.hops < HOP_BUDGET and taken[0].function == function and taken[0].source is not None:
            batch.append(taken.popleft())
            hand.hops += 1
        return batch if len(batch) > 1 else None

    def _open(self, delivery: Delivery) -> Envelope:
        """The envelope `delivery` brings, the handler's own (a fresh copy of every mutable value)."""
        if delivery.envelope is not None:
            return open_sealed(delivery.envelope)
        if delivery.source is not None:
            return open_call(delivery.source, delivery.position)
        return Envelope.from_wire(decode(delivery.payload))

    def _process(self, delivery: Delivery, hand: _Hand) -> None:
        runtime = self.runtimes.get(delivery.function)
        env = self._runnable(delivery, runtime)
        if env is None or runtime is None:
            return
        started = time.perf_counter()
        hand.one_hop = runtime.passes_one_hop(env)
        outcome = deliver(runtime, env, retry=self._backoff)
        if self.invocation_log is not None:
            self.invocation_log.write(InvocationRecord.of(delivery.function, env, outcome.status, outcome.error,
                                                          (time.perf_counter() - started) * 1000,
                                                          state=self._states.get(delivery.function)))
        self._act_on(delivery, runtime, env, outcome, hand)

    def _process_batch(self, deliveries: list[Delivery], runtime: Runtime, hand: _Hand) -> None:
        """`_process` of a batch of one function's deliveries (`_batch`), their commits made
        together (`deliver_many`): by a helper process when one is free (`_lend`)."""
        if not self._bulk_expected and len(self.queue) >= helping.HELPER_QUEUED:  # a wide fan-out runs
            self._bulk_expected = True  # (once per platform: a hint, raced harmlessly)
            self.store.expect_bulk_writes()
        if self._helpers is not None:
            deliveries = self._lend(deliveries, runtime, hand)
            if not deliveries:
                return
        ready: list[tuple[Delivery, Envelope]] = []
        hand.one_hop = False
        for delivery in deliveries:
            env = self._runnable(delivery, runtime)
            if env is not None:
                ready.append((delivery, env))
        outcomes = deliver_many(runtime, [env for _, env in ready], retry=self._backoff)
        for (delivery, env), outcome in zip(ready, outcomes, strict=True):
            self._act_on(delivery, runtime, env, outcome, hand)

    def _lend(self, deliveries: list[Delivery], runtime: Runtime, hand: _Hand) -> list[Delivery]:
        """Have a helper process run `deliveries` (unum_entry.local.helpers) when they are first
        deliveries of one journaled fan-out's calls, of a workflow that has not failed here, and
        a helper is free; then do what each outcome asks, as `_act_on` does for the worker's own,
        and queue what the helper's executions sent. Returns the deliveries left for the worker
        to run itself: all of them when no helper ran them (or it died meanwhile), those whose
        outcome asks for a redelivery (they run again here at once: the store struggling, a bug)."""
        first = deliveries[0]
        fan_out = first.run.fan_out if first.run is not None else None
        if (fan_out is None or first.workflow in self._failed_here
                or any(d.run is None or d.run.fan_out is not fan_out or d.failures for d in deliveries)):
            return deliveries
        pool = self._helpers
        assert pool is not None  # (the caller's check)
        helper = pool.lend(len(self.queue))
        if helper is None:
            return deliveries
        # A helper's batch is larger than a worker's: its answer waits for this process's interpreter.
        if len(deliveries) < helping.BATCH:
            with self._lock:
                more = self.queue.pop_calls(fan_out, first.function, helping.BATCH - len(deliveries))
                for delivery in more:
                    self._taken(delivery)
            deliveries += more  # (in place: the caller finishes the batch it passed, these with it)
        try:
            runs = {id(d.run): d for d in deliveries}  # each run's row on disk before the helper commits
            try:
                for delivery in runs.values():
                    self.queue.before_run(delivery, elsewhere=True)
            except StoreError:
                return deliveries  # (the worker's own attempt redelivers them, saying why)
            answer = helper.run(helping.Batch(fan_out.id, fan_out.function, fan_out.payload, fan_out.deadline,
                                              fan_out.recovered, first.function, [d.position for d in deliveries]))
        finally:
            pool.give_back(helper)
        if answer is None or len(answer.outcomes) != len(deliveries):
            return deliveries
        hand.stats["helped"] += len(deliveries)
        for sent in answer.sent:
            if sent[0] == helping.INVOKE:  # (few: a map's join sends its target once)
                self.submit(sent[1], decode(sent[2]))
            else:
                _, when, function, wire, name = sent
                self.submit_at(when, function, decode(wire), name=name)
        again: list[Delivery] = []
        for delivery, outcome in zip(deliveries, answer.outcomes, strict=True):
            kind = outcome[0]
            if kind == helping.DONE:
                self._count_done(delivery, hand, created=outcome[1], failed=outcome[2])
            elif kind == helping.AGAIN:
                again.append(delivery)
            else:
                env = self._open(delivery)
                if kind == helping.DROPPED:
                    done = DeliveryOutcome(DeliveryStatus.DROPPED)
                else:
                    error = HelperReported(outcome[-1])
                    done = DeliveryOutcome(DeliveryStatus.FAILED, error=error) if kind == helping.FAILED else \
                        DeliveryOutcome(DeliveryStatus.RETRY_HANDLER, retry=Envelope.from_wire(decode(outcome[1])),
                                        delay=outcome[2], error=error)
                self._act_on(delivery, runtime, env, done, hand)
        return again

    def _runnable(self, delivery: Delivery, runtime: Runtime | None) -> Envelope | None:
        """The envelope `delivery` brings, ready to run; None when it must not run (a bad
        envelope or an unknown function: dead-lettered; its workflow ended here; its journal
        row could not be written: redelivered)."""
        try:
            env = self._open(delivery)
        except EnvelopeError as exc:
            self._count("deliveries")
            self._dead_letter(f"{delivery.function}: {exc}")
            return None
        if runtime is None:
            self._count("deliveries")
            self._dead_letter(f"invoke of unknown function {delivery.function!r} in workflow {env.workflow}")
            return None
        if self._ended(env):
            self._count("deliveries")
            self._count("stale")
            return None
        try:
            self.queue.before_run(delivery)
        except StoreError as exc:  # its row is not on disk: it must not run yet (the journal's file is struggling)
            self._redeliver(delivery, runtime, env, exc)
            return None
        return env

    def _act_on(self, delivery: Delivery, runtime: Runtime, env: Envelope, outcome: DeliveryOutcome,
                hand: _Hand) -> None:
        """Count `delivery`'s outcome and do what it asks (a retry, a redelivery)."""
        status = outcome.status
        if status is DeliveryStatus.DONE:  # (first and alone: nearly every delivery)
            report = outcome.done_report
            self._count_done(delivery, hand, created=report.created, failed=report.failed)
            return
        self._count("deliveries")
        if status is DeliveryStatus.FAILED:
            with self._lock:
                self._failed_here.add(env.workflow)
        if status in (DeliveryStatus.RETRY_HANDLER, DeliveryStatus.FAILED):  # named by `run`'s progress line
            top = env.top
            where = f"{delivery.function}[{top.index}]" if top.size > 1 else delivery.function
            with self._lock:
                self._failures.append(f"{where} {error_type(outcome.error) or 'error'}")
        if status is DeliveryStatus.DROPPED:
            self._count("stale")
        elif status is DeliveryStatus.RETRY_HANDLER:
            # The next attempt gets the input this delivery brought, not what the handler left of it.
            retry_envelope = replace(outcome.retry_envelope, inputs=self._open(delivery).inputs)
            self._count("handler_retries")
            self.submit(delivery.function, retry_envelope.to_wire(), delay=outcome.delay)
        elif status is DeliveryStatus.FAILED:
            self._count("failed")
        else:
            self._redeliver(delivery, runtime, env, outcome.cause)

    def _count_done(self, delivery: Delivery, hand: _Hand, *, created: bool, failed: bool = False) -> None:
        """Count a delivery done (its commit `created` or replayed), in `hand` (`_settle` adds
        it to the platform's); `failed`: its egress ended the workflow in failure."""
        if failed:
            with self._lock:
                self._failed_here.add(delivery.workflow)
        stats = hand.stats
        stats["deliveries"] += 1
        if created:
            stats["committed"] += 1
            hand.committed[delivery.function] += 1
        else:
            stats["replayed"] += 1

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
            self._enqueue(delivery.again(failures), delay)
            if isinstance(error, StoreUnusable):
                self._halt(error)
            return
        gave_up = RedeliveriesExhausted(delivery.function, failures, error)
        self._dead_letter(f"{delivery.function}: workflow {env.workflow}: {gave_up}")
        if record_failure(runtime, env, gave_up).status is DeliveryStatus.FAILED:
            self._count("failed")

    def _halt(self, error: StoreUnusable) -> None:
        """Stop taking deliveries: the store takes no write until someone acts on it, so every
        redelivery would fail the same way until the platform gave up on it. What is queued
        stays queued (journaled, in a durable queue: the next run with the workflow's id resumes
        it once the store is usable); `wait_idle` raises `error`."""
        with self._lock:
            if self._halted is None:
                self._halted = error
            self._stop_taking()

    def _stop_taking(self) -> None:
        """Workers take no more deliveries; wake every waiter to see it (lock held)."""
        self._stopping = True
        self._work_cv.notify_all()
        self._idle_cv.notify_all()

    def _count(self, key: str) -> None:
        with self._stats_lock:
            self.stats[key] += 1

    def _dead_letter(self, message: str) -> None:
        log.error("dropped delivery: %s", message)
        self._count("dead_letters")
        with self._lock:
            self.dead_letters.append(message)


def _finished(hand: _Hand, delivery: Delivery) -> None:
    """`hand`'s worker finished `delivery` (counted by the platform at the next `_settle`)."""
    hand.finished += 1
    hand.in_flight[delivery.function] = hand.in_flight.get(delivery.function, 0) - 1


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
