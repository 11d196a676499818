"""What a handler may know about its invocation: the second handler argument."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any

from unum_entry.frozen import Frozen, frozen

if TYPE_CHECKING:
    from unum_entry.timers import Timers


@frozen
class InvocationContext(Frozen):
    """The invocation's identity, the same in every execution of it except `attempt`.

    `invocation` is its checkpoint name; `index`/`size`/`iteration` describe its innermost
    fan-out frame; `deadline` is the workflow's (epoch seconds, unum_entry.retention; 0 when not
    known); `timers` lets the handler arm durable timers (unum_entry.timers; None outside a
    runtime). Handlers declared `@durable` get a `unum_entry.steps.StepContext`, which adds
    the step API (`step`, `transact`, `now`, `random`, `uuid4`, `abort`). Building one does no I/O."""

    workflow_id: str
    function_name: str
    invocation: str
    attempt: int
    index: int
    size: int
    iteration: int
    deadline: int = 0
    timers: Timers | None = field(default=None, repr=False, compare=False)

    def __init__(self, workflow_id: str, function_name: str, invocation: str, attempt: int, index: int, size: int,
                 iteration: int, deadline: int = 0, timers: Timers | None = None) -> None:
        self.__dict__.update(workflow_id=workflow_id, function_name=function_name, invocation=invocation,
                             attempt=attempt, index=index, size=size, iteration=iteration, deadline=deadline,
                             timers=timers)


class TimersOnFirstUse:
    """Mixed into a context class ahead of it: its `timers` field may hold a zero-argument
    builder of the Timers instead (the runtime's), called when the handler first reads
    `timers`, so a delivery whose handler never arms a timer does not build them."""

    @property
    def timers(self) -> Timers | None:
        fields: dict[str, Any] = self.__dict__
        timers = fields["timers"]
        if callable(timers):  # still the builder: build once (threads racing build equal ones)
            timers = fields["timers"] = timers()
        return timers  # type: ignore[no-any-return]


@frozen
class DeliveryContext(TimersOnFirstUse, InvocationContext):  # type: ignore[override]  # read-only: it is frozen
    """The InvocationContext the runtime hands a handler (its timers built on first use)."""

    def __init__(self, workflow_id: str, function_name: str, invocation: str, attempt: int, index: int, size: int,
                 iteration: int, deadline: int = 0, timers: Timers | Callable[[], Timers] | None = None) -> None:
        self.__dict__.update(workflow_id=workflow_id, function_name=function_name, invocation=invocation,
                             attempt=attempt, index=index, size=size, iteration=iteration, deadline=deadline,
                             timers=timers)
