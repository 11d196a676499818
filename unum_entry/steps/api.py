"""The user API of exactly-once side effects: `@durable` and the step methods of the context.

    @durable
    def handler(event, ctx):
        ctx.step("charge", charge, card, amount, compensate=refund)   # run once, recorded
        ctx.transact("debit", debit, account, amount)                # effect + record in one transaction
        ctx.now(), ctx.random(), ctx.uuid4()                          # non-determinism, recorded
        ctx.abort("InsufficientFunds", "balance 3 < 10")             # fail the workflow, compensate

What each call guarantees is stated in unum_entry.steps.journal and docs/steps.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from unum_entry.context import InvocationContext, TimersOnFirstUse
from unum_entry.errors import StepError
from unum_entry.errors import WorkflowAborted as Aborted

if TYPE_CHECKING:
    from unum_entry.timers import Timers



class Journal(Protocol):
    """What the step methods need of the invocation's journal (unum_entry.steps.journal.Journal
    implements it; a protocol here keeps the user API free of the journal's imports)."""

    current: str | None

    def step(self, name: str, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any],
             compensate: Callable[..., Any] | None) -> Any: ...

    def transact(self, name: str, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any],
                 compensate: Callable[..., Any] | None) -> Any: ...

DURABLE_ATTRIBUTE = "__unum_durable__"

__all__ = ["Aborted", "DURABLE_ATTRIBUTE", "StepContext", "StepsAPI", "durable", "is_durable"]


def durable(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Declare that a handler uses steps. Returns the handler itself, marked.

    Required for `ctx.step` / `ctx.transact` / `ctx.now` / `ctx.random` / `ctx.uuid4`: the mark
    tells the steps layer to give the handler a step journal. Functions without it never pay a
    store operation for any of this."""
    setattr(handler, DURABLE_ATTRIBUTE, True)
    return handler


def is_durable(handler: Callable[..., Any]) -> bool:
    return bool(getattr(handler, DURABLE_ATTRIBUTE, False))


def _random() -> float:
    import random  # lazy: most functions never run a step, a cold start should not pay for it

    return random.random()


def _uuid4() -> str:
    import uuid  # lazy: uuid imports `platform`

    return str(uuid.uuid4())


class StepsAPI:
    """The step methods of `StepContext` (mixed in; `_journal` is set by the steps layer)."""

    __slots__ = ()
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
        now: float = self._steps().step("unum.now", time.time, (), {}, None)
        return now

    def random(self) -> float:
        """A float in [0, 1), the same in every execution (a step)."""
        value: float = self._steps().step("unum.random", _random, (), {}, None)
        return value

    def uuid4(self) -> str:
        """A random UUID (as a string), the same in every execution (a step)."""
        value: str = self._steps().step("unum.uuid4", _uuid4, (), {}, None)
        return value

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


class StepContext(InvocationContext, StepsAPI):
    """The context of a handler under the steps layer: the invocation's identity
    (InvocationContext) and the step API. `_journal` is None for a handler not declared
    `@durable` (a step then explains itself)."""

    __slots__ = ("_journal",)
    _compared = _shown = InvocationContext._compared  # (not the journal: two contexts of one invocation are equal)

    def __init__(self, workflow_id: str, function_name: str, invocation: str, attempt: int, index: int, size: int,
                 iteration: int, deadline: int = 0, timers: Timers | Callable[[], Timers] | None = None,
                 _journal: Journal | None = None) -> None:
        InvocationContext.__init__(self, workflow_id, function_name, invocation, attempt, index, size, iteration,
                                   deadline, timers)
        self._journal = _journal

    @classmethod
    def extending(cls, base: InvocationContext, journal: Journal | None) -> StepContext:
        """`base`'s identity with the step API over `journal`; timers `base` has not built yet
        (a DeliveryContext's) stay unbuilt."""
        kind = DeliveryStepContext if cls is StepContext and isinstance(base, TimersOnFirstUse) else cls
        # a context that builds its timers on first use takes the builder as it is; any other, the timers built now
        builder = base._timers_builder if issubclass(kind, TimersOnFirstUse) else None
        timers = builder if builder is not None else base.timers
        return kind(base.workflow_id, base.function_name, base.invocation, base.attempt, base.index, base.size,
                    base.iteration, base.deadline, timers, journal)  # type: ignore[arg-type]  # (a builder: TimersOnFirstUse)


class DeliveryStepContext(TimersOnFirstUse, StepContext):
    """The StepContext the steps layer hands a handler (its timers built on first use)."""

    __slots__ = ()
    # (StepContext's __init__: `timers` may be the builder)
