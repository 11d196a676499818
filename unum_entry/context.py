"""What a handler may know about its invocation: the second handler argument."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from unum_entry.frozen import ReadOnly

if TYPE_CHECKING:
    from unum_entry.timers import Timers


class InvocationContext(ReadOnly):
    """The invocation's identity, the same in every execution of it except `attempt`.

    `invocation` is its checkpoint name; `index`/`size`/`iteration` describe its innermost
    fan-out frame; `deadline` is the workflow's (epoch seconds, unum_entry.retention; 0 when not
    known); `timers` lets the handler arm durable timers (unum_entry.timers; None outside a
    runtime). Handlers declared `@durable` get a `unum_entry.steps.StepContext`, which adds
    the step API (`step`, `transact`, `now`, `random`, `uuid4`, `abort`). Building one does no I/O.

    A `ReadOnly` value class (one is built per delivery): `dataclasses.replace` works on it;
    equality and repr leave the timers out. `timers` may be given as a zero-argument builder
    of the Timers (the runtime's contexts: `TimersOnFirstUse`), called when the handler first
    reads `timers`: a delivery whose handler never arms a timer does not build them."""

    __slots__ = ("workflow_id", "function_name", "invocation", "attempt", "index", "size", "iteration", "deadline",
                 "timers", "_timers_builder")
    _compared = ("workflow_id", "function_name", "invocation", "attempt", "index", "size", "iteration", "deadline")
    _shown = _compared  # (not the timers)

    workflow_id: Final[str]
    function_name: Final[str]
    invocation: Final[str]
    attempt: Final[int]
    index: Final[int]
    size: Final[int]
    iteration: Final[int]
    deadline: Final[int]
    timers: Final[Timers | None]

    def __init__(self, workflow_id: str, function_name: str, invocation: str, attempt: int, index: int, size: int,
                 iteration: int, deadline: int = 0, timers: Timers | Callable[[], Timers] | None = None) -> None:
        self.workflow_id = workflow_id
        self.function_name = function_name
        self.invocation = invocation
        self.attempt = attempt
        self.index = index
        self.size = size
        self.iteration = iteration
        self.deadline = deadline
        if callable(timers):  # a builder: `timers` stays unset until first read (`__getattr__`)
            self._timers_builder: Callable[[], Timers] | None = timers
        else:
            self.timers = timers
            self._timers_builder = None

    def __getattr__(self, name: str) -> Any:
        """`timers` read for the first time, given as a builder: built now, and kept (threads
        racing build equal ones). Any other missing attribute: AttributeError as usual."""
        builder = self._timers_builder if name == "timers" else None
        if builder is None:
            raise AttributeError(f"{type(self).__qualname__!r} object has no attribute {name!r}")
        built = builder()
        setattr(self, "timers", built)  # (the one write after __init__: the field was left unset for it)
        return built


class TimersOnFirstUse:
    """Marks the context classes the runtime builds, given a builder of their timers
    (`InvocationContext` says how it is called)."""

    __slots__ = ()


class DeliveryContext(TimersOnFirstUse, InvocationContext):
    """The InvocationContext the runtime hands a handler (its timers built on first use)."""

    __slots__ = ()
