"""The step journal of one execution: idempotent steps and transactional local effects
(Ramalingam and Vaswani, "Fault Tolerance via Idempotence", POPL 2013: the idempotence monad's
`imatomic`/`imbind`, §3.1 and §4.1).

Step number `seq` of invocation `I` (the checkpoint name the runtime already gives it) is recorded
under `naming.step_key(I, seq)` by create-if-absent; every later execution of `I` — a retry, a
redelivery, a concurrent duplicate — finds the record and returns the recorded value instead of
running the step again. What that buys, precisely (docs/steps.md):

- the *value* of every step is the same in every execution (exactly once, always);
- `ctx.transact` effects on application tables are exactly once: the step record and the writes
  commit in one store transaction, so "done" and "recorded" never diverge;
- a plain `ctx.step` effect on an outside system can run more than once if an execution dies (or
  a concurrent duplicate runs) between the effect and its record: pass `ctx.step_id` (stable across
  executions) to that system as its idempotency key to make it exactly once.

Before a step runs afresh, the journal checks the checkpoint rule's witnesses
(unum_entry.checkpoint.witnesses): a late or slow duplicate of an invocation that has committed,
or of a workflow that has ended, never performs a new effect. Compensations registered by
completed steps go to the workflow's compensation log (unum_entry.steps.saga).
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TYPE_CHECKING

from unum_entry.codec import UnencodableValue, decode, encode
from unum_entry.errors import GuardFailed, StaleInvocation, StepError, TransactionConflict
from unum_entry.frozen import ReadOnly
from unum_entry.hooks import Hooks, StepPoint
from unum_entry.invokers import Invoker
from unum_entry.outcome import Ending
from unum_entry.retention import Ledger, store_retention
from unum_entry.steps.api import Aborted, is_durable
from unum_entry.steps.saga import append_compensation, compensation_envelope
from unum_entry.steps.transaction import Transaction
from unum_entry.stores.base import AppOp, Guard, Kind, Store

if TYPE_CHECKING:
    from uuid import UUID

log = logging.getLogger("unum.steps")

_TRANSACT_ATTEMPTS = 20      # optimistic retries of one transactional step under contention


class HookRaised(BaseException):
    """A hook raised inside a step (the platform observing, or in tests killing, the execution).
    A BaseException so the handler's own `except Exception` cannot swallow it; the runtime
    re-raises `original` once it is out of user code."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


def _at(hooks: Hooks, point: StepPoint, where: str) -> None:
    try:
        hooks.at(point, where)
    except Exception as exc:
        raise HookRaised(exc) from exc


# `random` and `uuid` are imported on first use: most functions never run a step, and a cold
# start should not pay for them (uuid imports `platform`).
def _jitter(bound: float) -> float:
    """A random delay in [0, bound] seconds (backoff between transaction attempts)."""
    import random

    return random.uniform(0, bound)


def _uuid4() -> UUID:
    import uuid

    return uuid.uuid4()


class StepEnv(ReadOnly):
    """What steps need from the runtime of one function (built once per Runtime)."""

    __slots__ = ("store", "invoker", "hooks", "function", "handler")

    store: Final[Store]
    invoker: Final[Invoker]
    hooks: Final[Hooks]
    function: Final[str]
    handler: Final[Callable[..., Any]]

    def __init__(self, store: Store, invoker: Invoker, hooks: Hooks, function: str, handler: Callable[..., Any]) -> None:
        self.store = store
        self.invoker = invoker
        self.hooks = hooks
        self.function = function
        self.handler = handler

    @property
    def durable(self) -> bool:
        """Whether the handler is `@durable` (through functools.wraps layers)."""
        return is_durable(self.handler) or is_durable(inspect.unwrap(self.handler))

    def module_globals(self) -> Mapping[str, Any]:
        """The namespace of the module defining the handler (through functools.wraps layers)."""
        return getattr(inspect.unwrap(self.handler), "__globals__", {})

    def resolve(self, name: str) -> Callable[..., Any]:
        """A module-level function of the handler's module, by name (compensations)."""
        target = self.module_globals().get(name)
        if not callable(target):
            raise StepError(f"function {self.function!r}: compensation {name!r} is not a function "
                            "of the handler's module (was the code changed while the workflow ran?)")
        return target


# ---- the step journal of one execution --------------------------------------------------------

class Journal:
    """The steps of one execution of one invocation, numbered in call order."""

    def __init__(self, env: StepEnv, workflow: str, invocation: str, *, guard: bool = True,
                 recheck: Callable[[], None] | None = None, guards: Sequence[Guard] = (),
                 deadline: int = 0) -> None:
        self.env = env
        self.workflow = workflow
        self.invocation = invocation
        # Keys and expiries of step records and compensations (`deadline`: the workflow's; 0 for
        # a compensation request, which carries none: the ledger's bound then).
        self.ledger = Ledger.bounded(workflow, deadline, store_retention(env.store))
        # Before running a step afresh, make sure the workflow has not ended and (`recheck`,
        # the runtime's ingress check again) that this invocation has not committed and been
        # collected meanwhile (see `_lookup`); off for compensations, which run because it ended.
        self.guard = guard
        self.recheck = recheck
        # ...and the same witnesses again inside the transaction that records the step, so a
        # duplicate that passed `recheck` just before its invocation was collected still cannot
        # record (or, transactionally, perform) the step: see `witnesses`.
        self.guards = list(guards)
        self.steps = 0                  # steps called so far = the next step's number
        self.current: str | None = None  # step_id of the step whose function is running

    def step_id(self, seq: int) -> str:
        """The step's idempotency key: the same in every execution of the invocation."""
        return f"{self.invocation}/{seq}"

    def step(self, name: str, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any],
             compensate: Callable[..., Any] | None) -> Any:
        seq, key = self._begin(name, fn, compensate)
        hooks = self.env.hooks
        stored = self._lookup(key)
        if stored is None:
            _at(hooks, StepPoint.BEFORE_EFFECT, key)
            result = self._run(seq, fn, args, kwargs)
            _at(hooks, StepPoint.AFTER_EFFECT, key)
            value = self._encode(name, result)
            for attempt in range(_TRANSACT_ATTEMPTS):
                try:
                    stored = self._record(key, value, [])
                    break
                except TransactionConflict:  # a concurrent transaction on the record or a guard key
                    if attempt == _TRANSACT_ATTEMPTS - 1:
                        raise
                    time.sleep(_jitter(0.002 * (attempt + 1)))
            _at(hooks, StepPoint.AFTER_RECORD, key)
        if stored is None:  # pragma: no cover  (the loop either recorded or raised)
            raise TransactionConflict(f"{key}: not recorded after {_TRANSACT_ATTEMPTS} attempts")
        result, effect = self._recorded(stored, name, seq)
        if compensate is not None:
            self._register(seq, effect, name, compensate, args, kwargs, result, transactional=False)
        return result

    def transact(self, name: str, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any],
                 compensate: Callable[..., Any] | None) -> Any:
        seq, key = self._begin(name, fn, compensate)
        store, hooks = self.env.store, self.env.hooks
        stored = self._lookup(key)
        attempt = 0
        while stored is None:
            tx = Transaction(store)
            _at(hooks, StepPoint.BEFORE_EFFECT, key)
            result = self._run(seq, fn, (tx, *args), kwargs)
            try:
                stored = self._record(key, self._encode(name, result), tx.ops())
            except TransactionConflict:
                attempt += 1
                if attempt >= _TRANSACT_ATTEMPTS:
                    raise
                time.sleep(_jitter(0.002 * attempt))
                continue
            _at(hooks, StepPoint.AFTER_RECORD, key)
        result, effect = self._recorded(stored, name, seq)
        if compensate is not None:
            self._register(seq, effect, name, compensate, args, kwargs, result, transactional=True)
        return result

    # ---- helpers ---------------------------------------------------------------------------

    def _record(self, key: str, value: bytes, ops: list[AppOp]) -> bytes:
        """Record a step (with its application writes), under the guards when there are any."""
        store = self.env.store
        if not ops and not self.guards:
            return self.ledger.create(store, key, value, Kind.STEP)[0]
        try:
            return self.ledger.transact(store, key, value, ops, guards=self.guards)[0]
        except GuardFailed as exc:
            raise HookRaised(StaleInvocation(f"{self.invocation}: {exc}")) from exc

    def _lookup(self, key: str) -> bytes | None:
        """The step's record, if recorded. When it is not and the workflow already has a
        root-level result or a failure record, this execution is a late re-run of an invocation
        whose journal was collected with its checkpoint (e.g. a duplicate of the entry delivered
        after the workflow finished): running the step again would repeat its effect, so the
        execution is dropped instead (StaleInvocation, like a stale delivery at ingress)."""
        if not self.guard:
            return self.env.store.get(key)
        ending = Ending.of(self.workflow)
        found = self.env.store.get_many([key, *ending.keys])
        if key in found:
            return found[key]
        if ending.reached(found):
            raise HookRaised(StaleInvocation(f"workflow {self.workflow} has ended; not running step "
                                             f"{self.steps - 1} of {self.invocation} again"))
        if self.recheck is not None:
            # A slow duplicate whose invocation committed while it ran: it must not run a new
            # step (the runtime continues with the committed output instead).
            try:
                self.recheck()
            except StaleInvocation as exc:
                raise HookRaised(exc) from exc
        return None

    def _begin(self, name: str, fn: Callable[..., Any], compensate: Callable[..., Any] | None) -> tuple[int, str]:
        where = f"function {self.env.function!r}, step {self.steps} ({name!r})"
        if not self.env.durable:
            raise StepError(f"{where}: the handler uses steps but is not declared durable; decorate it "
                            "with @unum_entry.durable")
        if not isinstance(name, str) or not name:
            raise StepError(f"{where}: a step needs a non-empty name, found {name!r}")
        if not callable(fn):
            raise StepError(f"{where}: expected a callable to run, found {type(fn).__name__}")
        if self.current is not None:
            raise StepError(f"{where}: steps cannot be nested (called inside step {self.current})")
        if compensate is not None:
            qualname = getattr(compensate, "__qualname__", "")
            if self.env.module_globals().get(qualname) is not compensate:
                raise StepError(f"{where}: compensate={qualname or compensate!r} must be a module-level "
                                "function of the handler's module (it runs later, in this function's code)")
        seq = self.steps
        self.steps += 1
        return seq, self.ledger.step(self.invocation, seq)

    def _run(self, seq: int, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        self.current = self.step_id(seq)
        try:
            return fn(*args, **kwargs)
        finally:
            self.current = None

    def _encode(self, name: str, result: Any) -> bytes:
        # `e` names this one execution of the effect: a re-execution after the record was
        # collected is a different effect, and its compensation must be registered anew.
        try:
            return encode({"n": name, "r": result, "e": _uuid4().hex})
        except UnencodableValue as exc:
            raise StepError(f"function {self.env.function!r}, step {name!r}: its result cannot be recorded: {exc}") from exc

    def _recorded(self, stored: bytes, name: str, seq: int) -> tuple[Any, str]:
        record = decode(stored)
        if record["n"] != name:
            raise StepError(f"function {self.env.function!r}: step {seq} is {name!r} in this execution but "
                            f"{record['n']!r} in the recorded one: the handler must call its steps in the same "
                            "order every time (capture time, randomness and outside reads as steps)")
        return record["r"], record["e"]

    def _register(self, seq: int, effect: str, name: str, compensate: Callable[..., Any], args: Sequence[Any],
                  kwargs: Mapping[str, Any], result: Any, *, transactional: bool) -> None:
        entry = {"f": self.env.function, "i": self.invocation, "s": seq, "e": effect, "n": name,
                 "c": compensate.__qualname__, "a": list(args), "kw": dict(kwargs), "r": result, "tx": transactional}
        try:
            data = encode(entry)
        except UnencodableValue as exc:
            raise StepError(f"function {self.env.function!r}, step {name!r}: a step with a compensation needs "
                            f"recordable arguments: {exc}") from exc
        index, aborted = append_compensation(self.env.store, self.workflow, data, effect,
                                             deadline=self.ledger.deadline)
        if aborted and index >= 0:
            # The workflow aborted while this step ran: its compensation chain may not include
            # us, so compensate our own step now (still exactly once: compensations are steps).
            self.env.invoker.invoke(self.env.function, compensation_envelope(self.workflow, index, index, index).to_wire())
            raise Aborted("unum.WorkflowAborted", f"workflow {self.workflow} aborted while step {name!r} ran")
