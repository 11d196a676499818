"""Helper processes: a wide fan-out's calls run on the machine's other CPUs.

Why: the embedded engine's workers are threads of one process, so its Python runs on one CPU at
a time (the GIL), and a map of a million no-op branches is that Python: a second process on the
second CPU of a 2-CPU machine runs as many branches again, both committing to the one SQLite
file (WAL: one writer at a time, each commit a few hundred microseconds of a batch's tens of
milliseconds).

How: a `LocalPlatform` on the SQLite store with its durable queue (what `run` uses) lends a
worker's batch of a fan-out's calls (up to BATCH of one function's, of one journaled fan-out) to
a helper (each is lent to LENT_AT_ONCE workers at once), and starts one (up to `helpers`) when
`HELPER_QUEUED` calls or more wait. A helper is `python -m unum_entry.local.helpers`: it opens
the same workflow folder and database file, plans the fan-out's calls again from its origin's
checkpoint (`Runtime.fan_out`, as a resume does), runs the batch with the same delivery policy
(`deliver_many`), and answers with each call's outcome (`Answer`) and the invokes and timers its
executions sent, which the lending worker queues as its own before it finishes the batch.
Nothing else changes hands.

Exactly once, unchanged: the batch's journal row (its run's) is on disk before the helper runs
it (`DeliveryQueue.before_run(..., elsewhere=True)`: the helper's commits do not carry the
journal) and goes only once the worker finished the batch, after queueing what it sent. A kill
of either process at any instant leaves the row, and a resume runs the run again: its calls
that committed are duplicates their checkpoints absorb. A helper that dies (its pipe ends) is
dropped and the worker runs the batch itself; a call whose outcome is a redelivery (the store
struggling, a bug, a crash) runs again in the engine itself. A helper exits when its pipe ends
(the engine closed or died), and at once when the engine's thread that started it ends (Linux:
PR_SET_PDEATHSIG; that thread is a worker, which ends with the platform or the process: the
platform's `close` ends the helpers before its workers, so they exit on their own).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import msgpack

from unum_entry.errors import StoreError

log = logging.getLogger("unum.local")

#: The environment variable that sets how many helpers a platform may start ("0": none).
SWITCH = "UNUM_HELPERS"
#: Calls queued at or above which a worker starts a helper (one not started yet): below, the
#: engine alone finishes the fan-out before a helper would be ready (~0.3 s to start).
HELPER_QUEUED = 4096
#: Calls in a batch a helper runs (a worker adds calls of the same fan-out to its own batch).
BATCH = 256
#: Workers a helper is lent to at once: it has the next batch in hand when it answers one.
LENT_AT_ONCE = 2
#: Fan-outs whose planned calls a helper keeps (`_kept`: the engine sends an origin only when needed).
PLANS_KEPT = 8
#: Seconds `close` waits for a helper to exit before it kills it.
EXIT_PATIENCE = 2.0

# The kinds of an outcome in an answer (`Answer.outcomes`) and of a sent invoke (`Answer.sent`).
DONE, DROPPED, RETRY, FAILED, AGAIN = range(5)
INVOKE, TIMER = range(2)


def other_cpus() -> int:
    """How many helpers a platform starts by default: one per CPU this process may use but one
    (0 where the allowed CPUs are unknown: not Linux)."""
    return len(os.sched_getaffinity(0)) - 1 if hasattr(os, "sched_getaffinity") else 0


@dataclass(frozen=True, slots=True)
class Launch:
    """What a helper opens: the workflow folder, the SQLite database file and its settings,
    the store's TTL, the runtimes' settings, the retry backoff, and the CPUs: the engine's
    process's (the helper starts with the mask of the worker that started it: one CPU) and the
    one it runs unum's code on."""

    workflow: str
    database: str
    durability: str
    busy_timeout: float
    ttl_seconds: int
    inline_limit: int
    watchdog: bool
    retry_base: float
    retry_cap: float


@dataclass(frozen=True, slots=True)
class Batch:
    """Calls of one journaled fan-out to one function, by position: the fan-out's `origin`
    (the function that sent it, its wire form and the deadline it ran with) and `id` (its
    journal row: a helper plans a fan-out once while it keeps its plan, `_kept`), and whether
    it was recovered (its calls are redeliveries: `FanOutCalls.redelivered`)."""

    id: int
    origin_function: str
    origin_payload: bytes
    deadline: int
    recovered: bool
    function: str
    positions: Sequence[int]


@dataclass(frozen=True, slots=True)
class Answer:
    """A helper's answer for a batch: per call, in order, its outcome as a list - [DONE,
    created, failed], [DROPPED], [RETRY, next attempt's wire form, delay, error type],
    [FAILED, error type], [AGAIN] (run it in the engine) - and what the executions sent:
    [INVOKE, function, wire form] and [TIMER, when, function, wire form, name]."""

    outcomes: list[list[Any]]
    sent: list[list[Any]]


class Helper:
    """One helper process and its pipes, lent to up to LENT_AT_ONCE workers at once (`HelperPool.lend`)."""

    def __init__(self, launch: Launch) -> None:
        child_reads, parent_writes = os.pipe()
        parent_reads, child_writes = os.pipe()
        try:
            self.process = subprocess.Popen([sys.executable, "-m", "unum_entry.local.helpers", str(child_reads),
                                             str(child_writes), str(os.getpid())],
                                            pass_fds=(child_reads, child_writes), stdin=subprocess.DEVNULL)
        except BaseException:
            for fd in (parent_writes, parent_reads):
                os.close(fd)
            raise
        finally:
            os.close(child_reads)
            os.close(child_writes)
        self._out: IO[bytes] = os.fdopen(parent_writes, "wb")
        # Unbuffered: a read returns what the pipe holds (a buffered one would wait to fill its buffer).
        self._in: IO[bytes] = os.fdopen(parent_reads, "rb", buffering=0)
        self._answers = msgpack.Unpacker(self._in, raw=False, max_buffer_size=1 << 30)
        # The fan-outs whose calls the helper keeps planned, least recently sent first: the same
        # rule on both sides (`_Server.plan`), so the origin is sent exactly when it is needed.
        self.planned: OrderedDict[int, None] = OrderedDict()
        self.alive = True
        self.lent = 0  # workers it is lent to now (`HelperPool.lend`)
        # Batches are answered in the order they were sent: `_sent` numbers them, `_answered`
        # counts the answers read; a caller reads its own when its turn comes (`_turn`).
        self._sending = threading.Lock()
        self._turn = threading.Condition()
        self._sent = 0
        self._answered = 0
        self._send(["launch", *_fields(launch)])

    def run(self, batch: Batch) -> Answer | None:
        """The helper's answer for `batch`; None when the helper died (its pipe ended): it is
        then dead for good (`alive`), and the batch's calls may or may not have committed. Up
        to LENT_AT_ONCE workers may wait at once: the helper starts on the next batch as soon as
        it answered one, while that answer's worker waits for the interpreter."""
        with self._sending:
            origin = [] if _kept(self.planned, batch.id) else [batch.origin_function, batch.origin_payload,
                                                               batch.deadline, batch.recovered]
            if not self._send(["run", batch.id, batch.function, list(batch.positions), *origin]):
                return None
            ticket = self._sent
            self._sent += 1
        with self._turn:
            self._turn.wait_for(lambda: self._answered == ticket or not self.alive)
            try:
                if not self.alive:
                    return None
                try:
                    kind, outcomes, sent = next(self._answers)
                except (StopIteration, OSError, ValueError, msgpack.UnpackException):
                    self.alive = False
                    return None
                if kind != "answer":  # the helper could not run it (it said why on its stderr): no more of it
                    self.alive = False
                    return None
                return Answer(outcomes, sent)
            finally:
                self._answered += 1
                self._turn.notify_all()

    def _send(self, message: list[Any]) -> bool:
        try:
            self._out.write(msgpack.packb(message, use_bin_type=True))
            self._out.flush()
        except (OSError, ValueError):
            self.alive = False
        return self.alive

    def close(self, *, kill: bool = False) -> None:
        """End the helper: its pipe closed (it exits once its batch ends), killed after
        EXIT_PATIENCE seconds or at once (`kill`)."""
        self.alive = False
        for pipe in (self._out, self._in):
            try:
                pipe.close()
            except OSError:
                pass
        if kill:
            self.process.kill()
        try:
            self.process.wait(EXIT_PATIENCE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class HelperPool:
    """Up to `size` helpers, started when first needed (`lend`), `share` called before the
    first starts (`Database.share_writes`: a StoreError there means no helper). Thread-safe."""

    def __init__(self, launch: Launch, size: int, *, share: Callable[[], None]) -> None:
        self.launch = launch
        self.size = size
        self._share: Callable[[], None] | None = share
        self._all: list[Helper] = []
        self._lock = threading.Lock()
        self._closed = False

    def lend(self, queued: int) -> Helper | None:
        """A helper for one batch (lent to fewer than LENT_AT_ONCE workers), to `give_back`; a
        new one when none is free, fewer than `size` run, and `queued` calls wait (at least
        HELPER_QUEUED); else None (the worker runs its batch itself). Never waits for a batch."""
        with self._lock:
            if self._closed:
                return None
            for helper in self._all:
                if helper.alive and helper.lent < LENT_AT_ONCE:
                    helper.lent += 1
                    return helper
            if len(self._all) >= self.size or queued < HELPER_QUEUED:
                return None
            try:
                if self._share is not None:
                    self._share()
                    self._share = None
                helper = Helper(self.launch)
            except (OSError, StoreError) as exc:  # no process to be had: the engine runs everything itself
                log.warning("local platform: cannot start a helper process (%s); running alone", exc)
                self.size = 0
                return None
            helper.lent = 1
            self._all.append(helper)
            return helper

    def give_back(self, helper: Helper) -> None:
        """Return a lent helper; one that died is dropped (and ended) once no worker has it."""
        with self._lock:
            helper.lent -= 1
            if helper.alive and not self._closed:
                return
            if helper in self._all:
                self._all.remove(helper)
            if helper.lent:
                return
        helper.close(kill=True)

    def close(self, *, kill: bool = False) -> None:
        """End every helper (`Helper.close`). Idempotent."""
        with self._lock:
            self._closed = True
            helpers, self._all = self._all, []
        for helper in helpers:
            helper.close(kill=kill)


def _kept(plans: OrderedDict[int, Any], fan_out: int, planned: Any = None) -> bool:
    """The plan cache's rule, the same in the engine and in the helper: whether `fan_out` is
    kept (now the most recent), else it is added (`planned`) and the least recent beyond
    PLANS_KEPT dropped."""
    if fan_out in plans:
        plans.move_to_end(fan_out)
        return True
    plans[fan_out] = planned
    while len(plans) > PLANS_KEPT:
        plans.popitem(last=False)
    return False


def _fields(launch: Launch) -> list[Any]:
    return [getattr(launch, name) for name in Launch.__slots__]


# ---- the helper process ----------------------------------------------------------------------


class _Sending:
    """A helper runtime's invoker: what its executions send, kept per thread for the answer."""

    def __init__(self, functions: set[str]) -> None:
        self._functions = functions
        self._local = threading.local()

    @property
    def sent(self) -> list[list[Any]]:
        """What this thread's executions sent since `clear`."""
        sent: list[list[Any]] | None = getattr(self._local, "sent", None)
        if sent is None:
            sent = self._local.sent = []
        return sent

    def clear(self) -> None:
        self._local.sent = []

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        from unum_entry.codec import encode

        self.sent.append([INVOKE, function, encode(payload, what="envelope")])

    def invoke_envelope(self, function: str, envelope: Any) -> None:
        self.invoke(function, envelope.to_wire())

    def invoke_fan_out(self, calls: Any) -> bool:
        return False  # (egress sends the calls one by one)

    def invoke_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        from unum_entry.codec import encode

        self.sent.append([TIMER, when, function, encode(payload, what="envelope"), name])

    def has_function(self, function: str) -> bool:
        return function in self._functions


class _Server:
    """The helper process's side: the workflow's runtimes over the store, run batch by batch."""

    def __init__(self, launch: Launch) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from unum_entry.platforms.common import RetryPolicy, platform_runtime
        from unum_entry.runtime import RuntimeConfig
        from unum_entry.handlers import load_handler
        from unum_entry.stores.sqlite import SQLiteStore
        from unum_entry.workflow import load_workflow

        workflow = load_workflow(launch.workflow)
        store = SQLiteStore.open(launch.database, durability=launch.durability, busy_timeout=launch.busy_timeout,
                                 ttl_seconds=launch.ttl_seconds)
        store.database.share_writes()
        store.expect_bulk_writes()  # a helper runs only while a wide fan-out does
        self.invoker = _Sending(set(workflow.functions))
        config = RuntimeConfig(inline_limit=launch.inline_limit, dispatch_workers=1, watchdog=launch.watchdog)
        executor = ThreadPoolExecutor(1, thread_name_prefix="unum-dispatch")
        self.runtimes = {
            name: platform_runtime(spec.ir, load_handler(spec.folder, spec.ir.handler, function=name), store,
                                   self.invoker, config=config, executor=executor)
            for name, spec in workflow.functions.items()}
        self.retry = RetryPolicy(base=launch.retry_base, cap=launch.retry_cap)
        self._plans: OrderedDict[int, Any] = OrderedDict()  # fan-out id -> its FanOutCalls (`_kept`)

    def plan(self, request: list[Any]) -> Any:
        """The calls of a batch message's fan-out (its `FanOutCalls`): planned again from its
        origin's checkpoint when the message carries the origin (`_kept`: the first batch of a
        fan-out, or one the cache dropped since). Called in the order the messages came."""
        from unum_entry.local.queue import FanOut

        _, fan_out_id, _, _, *origin = request
        if origin:
            origin_function, payload, deadline, recovered = origin
            planned = self.runtimes[origin_function].fan_out(FanOut("", origin_function, payload, deadline).origin())
            if planned is None:
                raise RuntimeError(f"fan-out {fan_out_id} of {origin_function}: its origin's checkpoint is gone")
            _kept(self._plans, fan_out_id, planned.redelivered() if recovered else planned)
        elif not _kept(self._plans, fan_out_id):
            raise RuntimeError(f"fan-out {fan_out_id}: sent without its origin, and not planned here")
        return self._plans[fan_out_id]

    def run(self, calls: Any, request: list[Any]) -> list[Any]:
        """The answer message for one batch message (`Helper.run`) of the fan-out `calls` (`plan`)."""
        from unum_entry.codec import encode
        from unum_entry.invocation_log import error_type
        from unum_entry.local.handoff import open_call
        from unum_entry.platforms.common import DeliveryStatus, deliver_many

        _, _, function, positions, *_ = request
        runtime = self.runtimes[function]
        envs = [open_call(calls, position) for position in positions]
        self.invoker.clear()
        outcomes: list[list[Any]] = []
        for outcome in deliver_many(runtime, envs, retry=self.retry):
            status = outcome.status
            if status is DeliveryStatus.DONE:
                outcomes.append([DONE, outcome.done_report.created, outcome.done_report.failed])
            elif status is DeliveryStatus.DROPPED:
                outcomes.append([DROPPED])
            elif status is DeliveryStatus.RETRY_HANDLER:
                outcomes.append([RETRY, encode(outcome.retry_envelope.to_wire(), what="envelope"), outcome.delay,
                                 error_type(outcome.error)])
            elif status is DeliveryStatus.FAILED:
                outcomes.append([FAILED, error_type(outcome.error)])
            else:
                outcomes.append([AGAIN])
        return ["answer", outcomes, self.invoker.sent]


def _serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """The helper's loop: the launch message, then a batch per message until the pipe ends. Up
    to LENT_AT_ONCE batches run at once, on threads of their own (while one waits for the
    database's lock or its fsync, another runs; their writes share commits), and are answered
    in the order they came."""
    import queue
    from concurrent.futures import Future, ThreadPoolExecutor

    from unum_entry.local.heap import freeze_loaded

    unpacker = msgpack.Unpacker(requests, raw=False, max_buffer_size=1 << 30)
    server = _Server(Launch(*next(unpacker)[1:]))
    freeze_loaded()  # its workflow, loaded, stays out of the cycle collector's passes (unum_entry.local.heap)
    running: queue.Queue[Future[list[Any]] | None] = queue.Queue()

    def answer() -> None:
        while (future := running.get()) is not None:
            try:
                message = future.result()
            except Exception as exc:  # it cannot go on: say why, and let the engine run the batch itself
                log.error("unum helper process: %s: %s", type(exc).__name__, exc, exc_info=exc)
                message = ["error", str(exc), []]
            try:
                answers.write(msgpack.packb(message, use_bin_type=True))
                answers.flush()
            except OSError:  # the engine is gone
                os._exit(0)
            if message[0] != "answer":
                os._exit(1)

    writer = threading.Thread(target=answer, name="unum-helper-answers", daemon=True)
    writer.start()
    with ThreadPoolExecutor(LENT_AT_ONCE, thread_name_prefix="unum-helper") as pool:
        for request in unpacker:
            try:
                calls = server.plan(request)
            except Exception as exc:  # answered in its turn (`answer`), and the helper ends
                failed: Future[list[Any]] = Future()
                failed.set_exception(exc)
                running.put(failed)
                break
            running.put(pool.submit(server.run, calls, request))
        running.put(None)
    writer.join()


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when its parent dies (the engine killed: no orphan helper)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the call above
        os._exit(0)


def main(argv: Sequence[str]) -> int:
    """`python -m unum_entry.local.helpers REQUESTS_FD ANSWERS_FD PARENT_PID` (`Helper` runs it)."""
    requests_fd, answers_fd, parent = (int(arg) for arg in argv)
    _die_with_parent(parent)
    with os.fdopen(requests_fd, "rb", buffering=0) as requests, os.fdopen(answers_fd, "wb") as answers:
        try:
            _serve(requests, answers)
        except KeyboardInterrupt:
            return 0
        except Exception as exc:  # it could not start: say why (the engine runs every batch itself)
            log.error("unum helper process: %s: %s", type(exc).__name__, exc, exc_info=True)
            try:
                answers.write(msgpack.packb(["error", str(exc), []], use_bin_type=True))
                answers.flush()
            except OSError:
                pass
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
