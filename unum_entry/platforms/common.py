"""Load one function once per process from its image (IR, handler, store, invoker, Runtime), and
the delivery policy every platform applies (`deliver`: the Lambda and Cloud Run adapters through
`run_delivery`, and the embedded local platform).

Configuration comes from the environment (the function image sets the first; deploy templates
and the local stack set the others):

- `UNUM_FUNCTION_DIR` (default `/var/task`): the user code and its `unum-ir.json`.
- `UNUM_STORE`: a store URL for `open_store` (e.g. `dynamodb://TABLE?region=us-east-1`).
- `UNUM_INVOKER`: an invoker URL for `open_invoker` (e.g. `lambda://?prefix=my-stack-`).
- `UNUM_INLINE_LIMIT` (bytes, optional): values larger than this travel by reference.
- `UNUM_RETRY_BASE_DELAY` (seconds, optional): the base of the handler-retry backoff.
- `UNUM_INVOCATION_LOG` (optional): `0` turns off the JSON line per delivery (unum_entry.invocation_log).
- `UNUM_WATCHDOG` (optional): `0` starts workflows without a deadline watchdog (unum_entry.watchdog).
"""

from __future__ import annotations

import enum
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from unum_entry.invokers import Invoker
from unum_entry.codec import decode, encode
from unum_entry.envelope import DataRef, Envelope
from unum_entry.errors import (ConfigurationError, HandlerFailed, IncompleteOutcome, InvokeError, RedeliveriesExhausted,
                               StaleInvocation, StoreError, UnumError)
from unum_entry.frozen import ReadOnly
from unum_entry.invocation_log import InvocationLog, InvocationRecord, hosted_state
from unum_entry.ir import IR_FILE_NAME, FunctionIR, load_ir
from unum_entry.runtime import Runtime, RuntimeConfig
from unum_entry.durable_functions.chained import workflow_ended
from unum_entry.handlers import load_handler
from unum_entry.steps.layer import StepsLayer
from unum_entry.stores.base import Store

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from unum_entry.egress import EgressReport
    from unum_entry.hooks import Hooks
    from unum_entry.runtime import Handler

DEFAULT_FUNCTION_DIR = "/var/task"

log = logging.getLogger("unum.platform")


def platform_runtime(ir: FunctionIR, handler: Handler, store: Store, invoker: Invoker, *,
                     config: RuntimeConfig | None = None, hooks: Hooks | None = None,
                     executor: Executor | None = None) -> Runtime:
    """A function's Runtime as every platform builds it (Lambda, Cloud Run, the embedded engine
    and its helper processes): with the steps layer (exactly-once steps, compensations) and a
    chained invoke's end answering its durable caller (durable_functions.chained.workflow_ended).
    Both are chosen here only, so a platform that builds its Runtime here cannot leave one out;
    a bare `Runtime(...)` (tests, bench) runs plain handlers and answers no durable caller."""
    return Runtime(ir, handler, store, invoker, config=config, hooks=hooks, executor=executor, layer=StepsLayer,
                   on_workflow_end=workflow_ended)


@dataclass(frozen=True)
class FunctionSettings:
    """What `load_function` needs, read from the environment by `from_env`."""

    function_dir: Path
    store_url: str
    invoker_url: str
    config: RuntimeConfig

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> FunctionSettings:
        """Raises ConfigurationError naming the missing or malformed variable."""
        missing = [name for name in ("UNUM_STORE", "UNUM_INVOKER") if not environ.get(name)]
        if missing:
            raise ConfigurationError(f"environment variable {missing[0]} is not set "
                                     f"(UNUM_STORE: a store URL, UNUM_INVOKER: an invoker URL)")
        config = RuntimeConfig()
        raw_limit = environ.get("UNUM_INLINE_LIMIT")
        if raw_limit:
            try:
                config = RuntimeConfig(inline_limit=int(raw_limit))
            except ValueError:
                raise ConfigurationError(f"UNUM_INLINE_LIMIT: expected a number of bytes, found {raw_limit!r}") from None
        if environ.get("UNUM_WATCHDOG", "1") == "0":
            config = replace(config, watchdog=False)
        return cls(function_dir=Path(environ.get("UNUM_FUNCTION_DIR") or DEFAULT_FUNCTION_DIR),
                   store_url=environ["UNUM_STORE"], invoker_url=environ["UNUM_INVOKER"], config=config)


@dataclass(frozen=True)
class LoadedFunction:
    """One function ready to handle deliveries; built once per process (the init phase)."""

    ir: FunctionIR
    runtime: Runtime
    store: Store
    invoker: Invoker
    # one JSON line per delivery on stdout (unum_entry.invocation_log; UNUM_INVOCATION_LOG=0: off)
    invocation_log: InvocationLog = field(default_factory=lambda: InvocationLog.from_env(os.environ))
    state: str | None = None  # the state a compiled function starts at (for the log line)


def load_function(settings: FunctionSettings) -> LoadedFunction:
    """IR, then handler, then store and invoker clients, then the Runtime. Raises an UnumError
    subclass (IRError, HandlerLoadError, ConfigurationError, StoreError) naming what is wrong."""
    from unum_entry.invokers import open_invoker
    from unum_entry.stores import open_store

    ir_path = settings.function_dir / IR_FILE_NAME
    if not ir_path.is_file():
        raise ConfigurationError(f"{ir_path}: missing (UNUM_FUNCTION_DIR={settings.function_dir} "
                                 f"must hold the function's code and {IR_FILE_NAME})")
    ir = load_ir(ir_path)
    handler = load_handler(settings.function_dir, ir.handler, function=ir.function)
    store = open_store(settings.store_url)
    invoker = open_invoker(settings.invoker_url, store=store)
    runtime = platform_runtime(ir, handler, store, invoker, config=settings.config)
    return LoadedFunction(ir=ir, runtime=runtime, store=store, invoker=invoker,
                          state=hosted_state(str(settings.function_dir)))


@dataclass(frozen=True)
class RetryPolicy:
    """Delay before an adapter re-invokes a failed handler: `base * 2**attempt`, at most `cap`
    seconds (Step Functions' IntervalSeconds=1, BackoffRate=2 by default)."""

    base: float = 1.0
    cap: float = 30.0

    def delay(self, attempt: int) -> float:
        return min(self.cap, self.base * (2 ** attempt))

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> RetryPolicy:
        raw = environ.get("UNUM_RETRY_BASE_DELAY")
        if not raw:
            return cls()
        try:
            return cls(base=float(raw))
        except ValueError:
            raise ConfigurationError(f"UNUM_RETRY_BASE_DELAY: expected seconds, found {raw!r}") from None


class DeliveryStatus(enum.Enum):
    """What became of one delivery under the delivery policy (`deliver`)."""

    DONE = "done"                    # handled: committed (or replayed) and dispatched
    DROPPED = "dropped"              # a stale duplicate: nothing to do
    RETRY_HANDLER = "retry_handler"  # the handler failed: invoke `retry` (attempt + 1) after `delay`
    REDELIVER = "redeliver"          # transient trouble or a crash: the same delivery must come again
    FAILED = "failed"                # the workflow's failure is recorded (`Runtime.fail` returned)


class DeliveryOutcome(ReadOnly):
    """The policy's answer for one delivery. `report` is set for DONE; `retry` and `delay` for
    RETRY_HANDLER; `error` (what went wrong) for RETRY_HANDLER, REDELIVER and FAILED."""

    __slots__ = ("status", "report", "retry", "delay", "error")

    def __init__(self, status: DeliveryStatus, report: EgressReport | None = None, retry: Envelope | None = None,
                 delay: float = 0.0, error: BaseException | None = None) -> None:
        self.status: Final = status
        self.report: Final = report
        self.retry: Final = retry
        self.delay: Final = delay
        self.error: Final = error

    # What each status needs, typed as present (IncompleteOutcome when the policy left it out).

    @property
    def done_report(self) -> EgressReport:
        """`report` of a DONE outcome."""
        if self.report is None:
            raise IncompleteOutcome(f"a {self.status.name} delivery outcome without its report")
        return self.report

    @property
    def retry_envelope(self) -> Envelope:
        """`retry` of a RETRY_HANDLER outcome: the envelope of the next attempt."""
        if self.retry is None:
            raise IncompleteOutcome(f"a {self.status.name} delivery outcome without the envelope to retry")
        return self.retry

    @property
    def cause(self) -> BaseException:
        """`error` of a RETRY_HANDLER, REDELIVER or FAILED outcome."""
        if self.error is None:
            raise IncompleteOutcome(f"a {self.status.name} delivery outcome without its error")
        return self.error


def deliver(runtime: Runtime, env: Envelope, *, retry: RetryPolicy) -> DeliveryOutcome:
    """The delivery policy of every platform (Lambda and Cloud Run adapters, the local platform):
    handle one delivery and say what the platform must do next. Never raises an Exception.

    - handled → DONE; a stale duplicate (`handle` returned None) → DROPPED;
    - the handler raised (HandlerFailed) → RETRY_HANDLER with `attempt + 1` after
      `retry.delay(attempt)` while the IR's `max_attempts` allows, else `Runtime.fail` → FAILED;
    - store or invoke trouble (StoreError, InvokeError) → REDELIVER: it is transient, and the
      checkpoints absorb the repeat;
    - any other UnumError (the request or output does not fit the IR: no retry can help) →
      `Runtime.fail` → FAILED;
    - anything else (a crash: a bug, an injected fault) → REDELIVER, as a platform redelivers a
      crashed execution;
    - `Runtime.fail` itself raising (a throttled store) → REDELIVER: the redelivery fails the
      same way and records the failure then (the first failure record wins).

    The caller acts on the outcome: it schedules RETRY_HANDLER and REDELIVER (Lambda and Cloud
    Run re-invoke / raise to the platform; the local platform re-queues with a bounded backoff).
    """
    try:
        report = runtime.handle(env)
    except Exception as exc:
        return _outcome_of_error(runtime, env, exc, retry)
    if report is None:  # (`_outcome_of_report`, inlined: every delivery comes here, ~0.5 % of a chain hop)
        return DeliveryOutcome(DeliveryStatus.DROPPED)
    return DeliveryOutcome(DeliveryStatus.DONE, report=report)


def deliver_many(runtime: Runtime, envs: Sequence[Envelope], *, retry: RetryPolicy) -> list[DeliveryOutcome]:
    """`deliver` of each of `envs` (a worker's batch of one function's deliveries), their
    commits made together where the runtime can (`Runtime.handle_many`); each outcome as
    `deliver` gives it. Never raises an Exception."""
    outcomes: list[DeliveryOutcome] = []
    for env, result in zip(envs, runtime.handle_many(envs), strict=True):
        outcomes.append(_outcome_of_error(runtime, env, result, retry) if isinstance(result, Exception)
                        else _outcome_of_report(result))
    return outcomes


def _outcome_of_report(report: EgressReport | None) -> DeliveryOutcome:
    if report is None:
        return DeliveryOutcome(DeliveryStatus.DROPPED)
    return DeliveryOutcome(DeliveryStatus.DONE, report=report)


def _outcome_of_error(runtime: Runtime, env: Envelope, error: Exception, retry: RetryPolicy) -> DeliveryOutcome:
    """The policy for a delivery whose handling raised `error` (`deliver`: the first class that matches)."""
    if isinstance(error, HandlerFailed):
        if env.attempt + 1 < runtime.ir.max_attempts:
            log.warning("%s: attempt %d failed (%s); retrying", runtime.ir.function, env.attempt + 1, error)
            retry_env = env.next_attempt(runtime.retention.clock(), f"{error.error_type}: {error.message}")  # history
            return DeliveryOutcome(DeliveryStatus.RETRY_HANDLER, retry=retry_env, delay=retry.delay(env.attempt),
                                   error=error)
        log.error("%s: workflow %s failed after %d attempt(s): %s", runtime.ir.function, env.workflow,
                  env.attempt + 1, error)
        return record_failure(runtime, env, error)
    if isinstance(error, (StoreError, InvokeError)):
        log.warning("%s: workflow %s: transient error, to be redelivered: %s", runtime.ir.function, env.workflow,
                    error)
        return DeliveryOutcome(DeliveryStatus.REDELIVER, error=error)
    if isinstance(error, StaleInvocation):
        return DeliveryOutcome(DeliveryStatus.DROPPED)
    if isinstance(error, UnumError):  # the request does not fit the IR: retrying cannot help
        log.error("%s: workflow %s failed: %s", runtime.ir.function, env.workflow, error)
        return record_failure(runtime, env, error)
    # A crash; the caller logs it (it knows injected crashes from bugs).
    return DeliveryOutcome(DeliveryStatus.REDELIVER, error=error)


def record_failure(runtime: Runtime, env: Envelope, error: UnumError) -> DeliveryOutcome:
    """`Runtime.fail(env, error)` → FAILED; REDELIVER (with what `fail` raised) when recording the
    failure did not succeed, so the platform comes back and records it then. Never raises."""
    try:
        runtime.fail(env, error)
    except Exception as exc:
        log.warning("%s: workflow %s: recording its failure failed, to be redelivered: %s: %s",
                    runtime.ir.function, env.workflow, type(exc).__name__, exc)
        return DeliveryOutcome(DeliveryStatus.REDELIVER, error=exc)
    return DeliveryOutcome(DeliveryStatus.FAILED, error=error)


def run_delivery(loaded: LoadedFunction, envelope: Envelope, stored_key: str | None, *, retry: RetryPolicy,
                 sleep: Callable[[float], None], request_id: str | None = None) -> dict[str, Any]:
    """Handle one decoded delivery on a cloud platform (Lambda, Cloud Run) through `deliver`;
    returns a summary for the platform's answer, or raises so the platform redelivers.

    - DONE / DROPPED / FAILED: a summary (the delivery is acked);
    - RETRY_HANDLER: the adapter re-invokes its own function with `attempt + 1` after the delay
      (so the IR's `max_attempts` holds exactly whatever the platform's own retry settings);
    - REDELIVER: the error is raised (Lambda's async retries, a Pub/Sub 500).
    A stored (by-reference) envelope is deleted once handled."""
    function = loaded.ir.function
    # The handler receives its inputs' objects themselves and may change them in place; a retry
    # must get the input as it was delivered (as a platform's own retry would), so the inline
    # inputs are kept as bytes first (a few µs against a cloud delivery's milliseconds).
    delivered = encode([d.value for d in envelope.inputs if d.inline], what="envelope")
    started = time.perf_counter()
    outcome = deliver(loaded.runtime, envelope, retry=retry)
    loaded.invocation_log.write(InvocationRecord.of(function, envelope, outcome.status, outcome.error,
                                                    (time.perf_counter() - started) * 1000,
                                                    request_id=request_id, state=loaded.state))
    status = outcome.status
    if status is DeliveryStatus.REDELIVER:
        raise outcome.cause  # transient platform trouble or a crash: the platform redelivers
    summary: dict[str, Any] = {"function": function, "workflow": envelope.workflow, "attempt": envelope.attempt}
    if status is DeliveryStatus.RETRY_HANDLER:
        retry_envelope = _as_delivered(outcome.retry_envelope, delivered)
        sleep(outcome.delay)
        loaded.invoker.invoke(function, retry_envelope.to_wire())
        summary.update(retrying=retry_envelope.attempt, error=str(outcome.error))
    elif status is DeliveryStatus.FAILED:
        summary["failed"] = str(outcome.error)
    elif status is DeliveryStatus.DROPPED:
        summary["stale"] = True
    else:
        report = outcome.done_report
        summary.update(committed=report.created, invoked=report.invoked, terminal=report.terminal)
    if stored_key is not None:
        loaded.store.delete([stored_key])
    return summary


def _as_delivered(env: Envelope, delivered: bytes) -> Envelope:
    """`env` with its inline input values replaced, in order, by those `delivered` holds (the
    values before the handler ran, encoded by `run_delivery`)."""
    values = iter(decode(delivered))
    return replace(env, inputs=tuple(DataRef(d.ref, next(values), d.item, d.path) if d.inline else d
                                     for d in env.inputs))
