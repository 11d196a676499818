"""What a handler may know about its invocation: the second handler argument."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

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
