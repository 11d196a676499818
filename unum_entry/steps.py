"""Exactly-once side effects inside a handler: idempotent steps, transactional local effects and
compensations (seed 002: the idempotence monad's `imatomic`/`imbind`, §3.1 and §4.1).

A handler declared `@durable` gets, through its context:

    ctx.step("charge", charge, card, amount, compensate=refund)   # run once, recorded
    ctx.transact("debit", debit, account, amount)                # effect + record in one transaction
    ctx.now(), ctx.random(), ctx.uuid4()                          # non-determinism, recorded
    ctx.abort("InsufficientFunds", "balance 3 < 10")             # fail the workflow, compensate

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

Compensations registered by completed steps go to a per-workflow log in completion order; an abort
(`ctx.abort`, a handler's last failed attempt via `Runtime.fail`, or `start_compensations` from a
compiled Fail state) drives a chain of compensation invocations through the
invoker, newest first, each run in the code of the function that ran the step, each itself a step
(recorded, so it runs once).
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from unum_entry import naming
from unum_entry.codec import UnencodableValue, decode, encode
from unum_entry.envelope import ROOT, DataRef, Envelope
from unum_entry.errors import GuardFailed, StaleInvocation, StepError, TransactionConflict
from unum_entry.frozen import Frozen, frozen
from unum_entry.hooks import Hooks, StepPoint
from unum_entry.stores.base import AppOp, Guard, Kind, Store

if TYPE_CHECKING:
    from uuid import UUID

log = logging.getLogger("unum.steps")

DURABLE_ATTRIBUTE = "__unum_durable__"
COMPENSATION_FIELD = "$unum_compensation"
_PROBE = 16                  # at most this many compensation-log keys per batch read (1, 2, 4, … 16)
_TRANSACT_ATTEMPTS = 20      # optimistic retries of one transactional step under contention


def durable(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Declare that a handler uses steps. Returns the handler itself, marked.

    Required for `ctx.step` / `ctx.transact` / `ctx.now` / `ctx.random` / `ctx.uuid4`: the mark
    tells the runtime to look for the invocation's step journal on replays (so it can collect it)
    and to drop the workflow's compensation log when the function ends the workflow. Functions
    without it never pay a store operation for any of this."""
    setattr(handler, DURABLE_ATTRIBUTE, True)
    return handler


def is_durable(handler: Callable[..., Any]) -> bool:
    return bool(getattr(handler, DURABLE_ATTRIBUTE, False))


class Aborted(Exception):
    """Raised by `ctx.abort`: the workflow fails with (error, cause) and compensates. The
    runtime catches it (it is not retried); user code should let it propagate."""

    def __init__(self, error: str, cause: str = "") -> None:
        super().__init__(f"{error}: {cause}" if cause else error)
        self.error = error
        self.cause = cause


class HookRaised(BaseException):
    """A hook raised inside a step (the platform observing, or in tests killing, the execution).
    A BaseException so the handler's own `except Exception` cannot swallow it; the runtime
    re-raises `original` once it is out of user code."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


def _at(hooks: Hooks, point: StepPoint, where: str) -> None:
    try:
        hooks.at(point, where)  # type: ignore[arg-type]  # Hooks.at takes step points too
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


@frozen
class StepEnv(Frozen):
    """What steps need from the runtime of one function (built once per Runtime)."""

    store: Store
    invoker: Any             # egress.Invoker (not imported: egress imports the runtime's pieces)
    hooks: Hooks
    function: str
    handler: Callable[..., Any]

    def __init__(self, store: Store, invoker: Any, hooks: Hooks, function: str, handler: Callable[..., Any]) -> None:
        self.__dict__.update(store=store, invoker=invoker, hooks=hooks, function=function, handler=handler)

    @functools.cached_property
    def durable(self) -> bool:
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
                 recheck: Callable[[], None] | None = None, guards: Sequence[Guard] = ()) -> None:
        self.env = env
        self.workflow = workflow
        self.invocation = invocation
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
            return store.create(key, value, workflow=self.workflow, kind=Kind.STEP)[0]
        try:
            return store.transact(key, value, ops, workflow=self.workflow, guards=self.guards)[0]
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
        result, failure = naming.result_key(self.workflow, ROOT), naming.failure_key(self.workflow)
        found = self.env.store.get_many([key, result, failure])
        if key in found:
            return found[key]
        if result in found or failure in found:
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
                            "with @unum_entry.steps.durable")
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
        return seq, naming.step_key(self.invocation, seq)

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
        index, aborted = _append(self.env.store, self.workflow, data, effect)
        if aborted and index >= 0:
            # The workflow aborted while this step ran: its compensation chain may not include
            # us, so compensate our own step now (still exactly once: compensations are steps).
            self.env.invoker.invoke(self.env.function, compensation_envelope(self.workflow, index, index, index).to_wire())
            raise Aborted("unum.WorkflowAborted", f"workflow {self.workflow} aborted while step {name!r} ran")


class Transaction:
    """Reads and writes of one transactional step on application tables; committed (or not)
    together with the step record by `Store.transact`. Values are JSON-like data."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._versions: dict[tuple[str, str], int] = {}
        self._values: dict[tuple[str, str], Any] = {}
        self._writes: dict[tuple[str, str], bytes | None] = {}

    def get(self, table: str, key: str, default: Any = None) -> Any:
        """The item's value as of this transaction (its own writes included), or `default`."""
        item = (table, key)
        if item not in self._versions:
            self._read(table, key)
        value = self._values.get(item)
        return default if value is None else value

    def put(self, table: str, key: str, value: Any) -> None:
        item = (table, key)
        if item not in self._versions:
            self._read(table, key)
        try:
            self._writes[item] = encode(value, what=f"application item {table}/{key}")
        except UnencodableValue as exc:
            raise StepError(str(exc)) from exc
        self._values[item] = value

    def delete(self, table: str, key: str) -> None:
        item = (table, key)
        if item not in self._versions:
            self._read(table, key)
        self._writes[item] = None
        self._values[item] = None

    def ops(self) -> list[AppOp]:
        """Every item read (version check) or written (conditional write)."""
        return [AppOp(table, key, expected, write=(table, key) in self._writes, value=self._writes.get((table, key)))
                for (table, key), expected in self._versions.items()]

    def _read(self, table: str, key: str) -> None:
        found = self._store.app_read(table, [key]).get(key)
        self._versions[(table, key)] = found.version if found else 0
        self._values[(table, key)] = decode(found.value) if found else None


class StepsAPI:
    """The step methods of `InvocationContext` (mixed in; `_journal` is set by the runtime)."""

    _journal: Journal | None

    def step(self, name: str, fn: Callable[..., Any], /, *args: Any,
             compensate: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` once per invocation and return its (recorded) result.

        Later executions of this invocation return the recorded result without calling `fn`.
        `compensate(result, *args, **kwargs)`, a module-level function, runs if the workflow
        aborts after this step completed."""
        return self._steps().step(name, fn, args, kwargs, compensate)

    def transact(self, name: str, fn: Callable[..., Any], /, *args: Any,
                 compensate: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
        """Run `fn(tx, *args, **kwargs)` (reads and writes through `tx`, a Transaction) and commit
        its writes together with its record: exactly once. `fn` may be re-run on a write conflict,
        so it must act only through `tx`. `compensate(tx, result, *args, **kwargs)` is transactional too."""
        return self._steps().transact(name, fn, args, kwargs, compensate)

    def now(self) -> float:
        """Seconds since the epoch, the same in every execution of this invocation (a step)."""
        return self._steps().step("unum.now", time.time, (), {}, None)

    def random(self) -> float:
        """A float in [0, 1), the same in every execution (a step)."""
        import random  # lazy: see _jitter

        return self._steps().step("unum.random", random.random, (), {}, None)

    def uuid4(self) -> str:
        """A random UUID (as a string), the same in every execution (a step)."""
        return self._steps().step("unum.uuid4", lambda: str(_uuid4()), (), {}, None)

    @property
    def step_id(self) -> str | None:
        """Inside a running step: its idempotency key (`<invocation>/<seq>`), stable across every
        execution of the invocation; pass it to outside services that deduplicate by key."""
        return self._journal.current if self._journal is not None else None

    def abort(self, error: str, cause: str = "") -> NoReturn:
        """Fail the workflow now with (error, cause), not retried, and run the compensations of
        every completed step in reverse completion order."""
        raise Aborted(error, cause)

    def _steps(self) -> Journal:
        if self._journal is None:
            raise StepError(f"function {getattr(self, 'function_name', '?')!r}: steps need the handler declared "
                            "with @unum_entry.steps.durable (and the context the unum runtime passes to it)")
        return self._journal


# ---- the compensation log -----------------------------------------------------------------------

def _append(store: Store, workflow: str, data: bytes, identity: str) -> tuple[int, bool]:
    """Append a compensation entry (for the effect `identity`) to the workflow's log, once.
    Returns (index, aborted?); index -1 when the workflow already succeeded (nothing will ever
    be compensated, nothing is appended).

    The log is the keys `compensation_key(workflow, 0, 1, …)` filled by create-if-absent in
    order, so the filled keys form a prefix and index order is a completion order. An entry for
    the same effect already in the log is returned instead of appended twice (a replayed step).
    `aborted` says the workflow has a failure record and we appended the entry (a replay that
    finds its entry already logged leaves it to whoever appended it). It is read again *after* our entry exists:
    an abort reads the log only after writing its failure record, so either its read sees our
    entry (its chain compensates it) or our read sees its failure (we compensate ourselves) —
    or both, harmlessly: a compensation runs once per index.
    """
    failure, result = naming.failure_key(workflow), naming.result_key(workflow, ROOT)
    aborted = False
    extra = [failure, result]
    start, size = 0, 1
    while True:
        keys = [naming.compensation_key(workflow, i) for i in range(start, start + size)]
        found = store.get_many([*keys, *extra])
        if extra:
            if result in found:
                return -1, False
            aborted, extra = failure in found, []
        gap = None
        for i, key in enumerate(keys, start):
            if key not in found:
                gap = i
                break
            if decode(found[key]).get("e") == identity:
                # A replay of a logged step: whoever appended the entry answered for it (the
                # abort's chain, or that appender's own compensation), so an abort is not ours
                # to act on; compensating here would run it out of the chain's order.
                return i, False
        if gap is not None:
            break
        start, size = start + size, min(2 * size, _PROBE)
    index = gap
    while True:
        stored, created = store.create(naming.compensation_key(workflow, index), data, workflow=workflow,
                                       kind=Kind.COMPENSATION)
        if created:
            after = store.get_many([failure, result])
            if result in after and failure not in after:
                # The workflow succeeded meanwhile: nothing will be compensated. The entry stays
                # until its expiry like everything else (nothing is deleted before it).
                return -1, False
            return index, aborted or failure in after
        if decode(stored).get("e") == identity:
            return index, False  # a concurrent replay appended it: it answers for it (above)
        index += 1


def _first_gap(store: Store, workflow: str) -> int:
    """The number of entries in the log (the index of its first missing key). One read of one
    key when the log is empty, which is every workflow that registered no compensation."""
    start, size = 0, 1
    while True:
        keys = [naming.compensation_key(workflow, i) for i in range(start, start + size)]
        found = store.get_many(keys)
        for i, key in enumerate(keys, start):
            if key not in found:
                return i
        start, size = start + size, min(2 * size, _PROBE)


def start_compensations(store: Store, invoker: Any, workflow: str) -> int:
    """THE workflow-abort entry point; call it after the workflow's failure record exists. It
    invokes the newest registered compensation; each compensation invokes the next older one
    (steps that register later compensate themselves, see `_append`). Idempotent: calling it
    again (a retry of the aborting invocation) re-drives the chain and every compensation still
    runs once. Returns how many compensations the chain covers (0: nothing to undo; then it
    cost one read of one key)."""
    count = _first_gap(store, workflow)
    if count == 0:
        return 0
    newest = decode(store.get(naming.compensation_key(workflow, count - 1)) or encode({}))
    if "f" not in newest:
        return 0
    invoker.invoke(newest["f"], compensation_envelope(workflow, count - 1, 0, count - 1).to_wire())
    return count


def abort_workflow(store: Store, invoker: Any, workflow: str, record: Mapping[str, Any]) -> None:
    """Record the workflow's failure (`{"Error", "Cause", "Function", ...}`, first one wins) and
    start its compensations."""
    store.create(naming.failure_key(workflow), encode(dict(record)), workflow=workflow, kind=Kind.FAILURE)
    start_compensations(store, invoker, workflow)


# ---- compensation invocations ------------------------------------------------------------------

@frozen
class CompensationRequest(Frozen):
    """Run compensation `index`, then continue down to `stop`; entries stop..top are this chain's."""

    index: int
    stop: int
    top: int

    def __init__(self, index: int, stop: int, top: int) -> None:
        self.__dict__.update(index=index, stop=stop, top=top)


def compensation_envelope(workflow: str, index: int, stop: int, top: int) -> Envelope:
    """A compensation request travels as an ordinary envelope (every platform and invoker
    carries it, retries it and gives up on it like any delivery) whose inline input is marked."""
    request = {COMPENSATION_FIELD: {"index": index, "stop": stop, "top": top}}
    return Envelope(workflow=workflow, inputs=(DataRef(value=request),))


def compensation_request(env: Envelope) -> CompensationRequest | None:
    """The request an envelope carries, or None for an ordinary invocation (one dict lookup)."""
    if env.start or len(env.inputs) != 1 or not env.inputs[0].inline:
        return None
    value = env.inputs[0].value
    if not isinstance(value, dict) or COMPENSATION_FIELD not in value:
        return None
    raw = value[COMPENSATION_FIELD]
    return CompensationRequest(index=int(raw["index"]), stop=int(raw["stop"]), top=int(raw["top"]))


def run_compensation(env: StepEnv, workflow: str, request: CompensationRequest) -> bool:
    """Run one compensation of the chain (exactly once: it is step 0 of its own invocation),
    then pass the chain on. Returns False when the chain had already finished (a late duplicate)."""
    raw = env.store.get(naming.compensation_key(workflow, request.index))
    if raw is None:
        return False
    entry = decode(raw)
    compensate = env.resolve(entry["c"])
    journal = Journal(env, workflow, naming.compensation_invocation(workflow, request.index), guard=False)
    _at(env.hooks, StepPoint.BEFORE_COMPENSATE, journal.invocation)
    name = f"compensate {entry['n']}"
    if entry["tx"]:
        journal.transact(name, compensate, (entry["r"], *entry["a"]), entry["kw"], None)
    else:
        journal.step(name, compensate, (entry["r"], *entry["a"]), entry["kw"], None)
    advance(env.store, env.invoker, workflow, request)
    return True


def advance(store: Store, invoker: Any, workflow: str, request: CompensationRequest) -> None:
    """After compensation `request.index` ran (or was given up on): invoke the next older one.

    At the end of the chain nothing is deleted: an aborted workflow keeps its log entries and
    compensation records until their TTL, because a replay of a step (say, a retry of the
    aborting invocation) must still find its entry — by the effect's id — and the entry's
    compensation record, or it would compensate the same effect twice."""
    if request.index > request.stop:
        older = request.index - 1
        key = naming.compensation_key(workflow, older)
        # "Passed on" marker (step 1 of this compensation's journal): a duplicate of this
        # request that finds it stops instead of re-driving the rest of the chain, which would
        # otherwise grow with every duplicate delivery at every link.
        passed = naming.step_key(naming.compensation_invocation(workflow, request.index), 1)
        found = store.get_many([key, passed])
        raw = found.get(key)
        if raw is not None and passed not in found:
            invoker.invoke(decode(raw)["f"], compensation_envelope(workflow, older, request.stop, request.top).to_wire())
            store.create(passed, b"", workflow=workflow, kind=Kind.STEP)
        return


def witnesses(env: Envelope, checkpoint: str | None) -> list[Guard]:
    """What must still hold for an execution of the invocation `env` to run a step afresh: the
    workflow has no root-level result and no failure, and the invocation has not committed (a
    slow duplicate whose invocation committed meanwhile must not perform a new effect; it
    continues with the committed output instead)."""
    guards = [Guard(naming.result_key(env.workflow, ROOT), present=False),
              Guard(naming.failure_key(env.workflow), present=False)]
    if checkpoint is not None:  # for a function that commits its result, that is the result key
        guards.append(Guard(checkpoint, present=False))
    return list({g.key: g for g in guards}.values())  # one operation per item in a transaction
