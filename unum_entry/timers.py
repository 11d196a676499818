"""Durable timers as a handler sees them (`context.timers`): arm a timer that delivers an event to
an invocation of the same function, on the platform's own scheduler (`Invoker.invoke_at`).

The runtime builds one `Timers` per delivery and hands it to the handler in its context; it does
no I/O until used. A timer is an invocation like any other: its envelope names the invocation it
delivers to (by default the *next* invocation of this thread: the same fan-out frames, the
innermost iteration + 1, exactly where a task-token callback sends its continuation), and its
name (`naming.timer_name`) is deterministic, so every execution that arms it arms the same one.

A delivered timer must be absorbed whatever the scheduler does: delivered twice (the continuation
commits once, create-if-absent), late (it just runs later), or early — the receiving handler
re-arms a timer (a new name: a name is used once, as Cloud Tasks remembers task names after they
ran) and raises `TimerNotDue`, so the delivery is dropped without a commit (`Runtime.handle`) —
and so is one delivered after the workflow ended (a stop, a failure, a timeout: `Timers.read`).
The ASL runner (unum_entry/asl/runner.py) waits on these timers: Wait states, `.waitForTaskToken`
timeouts and heartbeats, long Retry back-offs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TYPE_CHECKING

from unum_entry import naming
from unum_entry.envelope import DataRef, Envelope, Frame
from unum_entry.errors import EndedBeforeDelivery, StaleInvocation
from unum_entry.frozen import ReadOnly

if TYPE_CHECKING:
    from unum_entry.invokers import Invoker
    from unum_entry.stores.base import Record, Store

TIMER = "__unum_timer__"  # the key of a timer's event: {TIMER: {...what the timer is for...}}


class TimerNotDue(StaleInvocation):
    """A timer delivered before its time (or before what it waits on was committed): it has been
    re-armed, and this delivery is dropped without a commit (the runtime drops a
    StaleInvocation raised by a handler, or continues as a duplicate if the invocation had
    committed meanwhile)."""


class TimerAfterEnding(TimerNotDue, EndedBeforeDelivery):
    """A timer delivered after its workflow ended (`Timers.read`): dropped, never re-armed."""


class Timers(ReadOnly):
    """The timer capability of one delivery: `function` handling `envelope` (its workflow,
    fan-out frames and deadline), over the function's store, invoker and the store's clock.
    `latest`: the last instant (store clock) at which a delivery still runs a handler
    (`deadline - margin`, unum_entry.retention)."""

    __slots__ = ("store", "invoker", "function", "envelope", "clock", "latest")

    store: Final[Store]
    invoker: Final[Invoker]
    function: Final[str]
    envelope: Final[Envelope]
    clock: Final[Callable[[], float]]
    latest: Final[float]

    def __init__(self, store: Store, invoker: Invoker, function: str, envelope: Envelope,
                 clock: Callable[[], float], latest: float) -> None:
        self.store = store
        self.invoker = invoker
        self.function = function
        self.envelope = envelope
        self.clock = clock
        self.latest = latest

    def now(self) -> float:
        """Epoch seconds on the store's clock (the clock every timer's `when` is on)."""
        return self.clock()

    @property
    def workflow(self) -> str:
        return self.envelope.workflow

    def next_frames(self) -> tuple[Frame, ...]:
        """The next invocation of this thread: the same frames, the innermost iteration + 1."""
        *outer, top = self.envelope.frames
        return (*outer, Frame(top.index, top.size, top.iteration + 1))

    def name(self, purpose: str, *parts: object) -> str:
        """The timer name for `purpose` and `parts` in this workflow (naming.timer_name)."""
        return naming.timer_name(self.workflow, purpose, *parts)

    def arm(self, when: float, event: Mapping[str, Any], *, name: str, here: bool = False,
            function: str | None = None) -> None:
        """Deliver `event` (the handler's input) at or after `when` to the next invocation of this
        thread, or with `here` to this same invocation (an early delivery re-arming itself);
        `function`: of another function at those frames (a fan-out's join, which the branches'
        fan-in invokes at the next frames too), else this one."""
        frames = self.envelope.frames if here else self.next_frames()
        env = Envelope(workflow=self.workflow, frames=frames, inputs=(DataRef(value=dict(event)),),
                       deadline=self.envelope.deadline)
        self.invoker.invoke_at(when, function or self.function, env.to_wire(), name=name)

    def read(self, keys: Iterable[str]) -> dict[str, Record]:
        """Committed records by key (absent keys are missing from the result), read in one batch
        with the workflow's two ending records (`outcome.Ending`: no request added). Raises
        TimerNotDue when the workflow has ended — a result, a failure, or the claim of a stop or
        an execution timeout, even one between its two writes — so a timer delivered after the
        ending (late, twice, or while a stop is half-way) is dropped before it continues the
        workflow: it never runs the next state (docs/history.md, "Stop")."""
        from unum_entry.outcome import Ending  # lazy: the rules layer, needed only by a fired timer

        wanted = list(keys)
        ending = Ending.of(self.workflow)
        found = self.store.read([*wanted, *(k for k in ending.keys if k not in wanted)])
        if ending.reached(found):
            raise TimerAfterEnding(f"a timer of workflow {self.workflow}: the workflow has ended")
        return {key: record for key, record in found.items() if key in wanted}


def timers_of(context: Any) -> Timers | None:
    """The context's Timers, or None where the handler runs without a runtime (unit tests)."""
    timers = getattr(context, "timers", None)
    return timers if isinstance(timers, Timers) else None
