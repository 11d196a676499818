"""How the runtime core is observed and extended, without knowing who does it.

- `Hooks.at(point, invocation)`: the step boundaries of one execution (`FaultPoint`, and
  `StepPoint` inside steps) where a platform may observe or, in tests, crash it.
- `Layer`: what a layer above the core (the exactly-once steps of `unum_entry.steps` is the one
  shipped) does at the runtime's fixed points. The runtime calls a layer only through this
  interface; whoever builds the Runtime (the platforms) chooses the layer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, Final, Protocol, TYPE_CHECKING

from unum_entry.context import DeliveryContext
from unum_entry.frozen import ReadOnly

if TYPE_CHECKING:
    from unum_entry.context import InvocationContext
    from unum_entry.envelope import Envelope
    from unum_entry.errors import UnumError
    from unum_entry.invokers import Invoker
    from unum_entry.stores.base import Store


class FaultPoint(str, enum.Enum):
    """Every step boundary of one execution, in order."""

    BEFORE_HANDLER = "before_handler"
    AFTER_HANDLER = "after_handler"          # handler returned, checkpoint not yet written
    AFTER_CHECKPOINT = "after_checkpoint"    # committed, nothing invoked yet
    BEFORE_INVOKE = "before_invoke"          # once per outgoing invoke: a crash here leaves some branches sent


class StepPoint(str, enum.Enum):
    """Boundaries inside one step (`unum_entry.steps`), reported to the same `Hooks.at`. Kept
    apart from FaultPoint: only functions that use steps ever reach them."""

    BEFORE_EFFECT = "step_before_effect"    # no record found; the step's function is about to run
    AFTER_EFFECT = "step_after_effect"      # it ran (a plain step's effect happened), not yet recorded
    AFTER_RECORD = "step_after_record"      # recorded (a transactional step: effect and record committed)
    BEFORE_COMPENSATE = "step_before_compensate"  # a compensation is about to run


class Hooks(Protocol):
    def at(self, point: FaultPoint | StepPoint, invocation: str) -> None:
        """Called at each point; raising simulates the execution dying there."""


class NoHooks:
    """The production default: observe nothing."""

    def at(self, point: FaultPoint | StepPoint, invocation: str) -> None:
        return None


def observes(hooks: Hooks) -> bool:
    """Whether calling `hooks.at` can do anything: only NoHooks itself is known to observe
    nothing (a subclass may observe), so callers on the hot path skip the call for it alone."""
    return type(hooks) is not NoHooks


class FunctionParts(ReadOnly):
    """What a layer is built from: the parts of one function's Runtime."""

    __slots__ = ("function", "handler", "store", "invoker", "hooks")

    function: Final[str]
    handler: Final[Callable[..., Any]]
    store: Final[Store]
    invoker: Final[Invoker]
    hooks: Final[Hooks]

    def __init__(self, function: str, handler: Callable[..., Any], store: Store, invoker: Invoker,
                 hooks: Hooks) -> None:
        self.function = function
        self.handler = handler
        self.store = store
        self.invoker = invoker
        self.hooks = hooks


class Layer(Protocol):
    """A layer the runtime calls at its fixed points (one per Runtime, built by a LayerFactory).

    Two facts about the function, fixed when the layer is built, let the runtime leave the
    layer out of a delivery's path where it would add nothing (decided once per Runtime)."""

    #: The context class the runtime builds for every delivery (called with DeliveryContext's
    #: fields; its `timers` may be a builder) instead of calling `context`; None: call `context`.
    plain_context: type[InvocationContext] | None
    #: Whether the handler must run through `call`; False: it has no escape to turn back, and
    #: the runtime calls it directly.
    wraps_calls: bool

    def intercept(self, env: Envelope) -> bool:
        """Handle a delivery that belongs to the layer rather than to the function (e.g. a
        compensation request) and return True; False for an ordinary invocation (no I/O)."""

    def give_up(self, env: Envelope, error: UnumError) -> bool:
        """A delivery failed for good: True when it was the layer's own (handled here)."""

    def context(self, base: InvocationContext, env: Envelope, checkpoint: str | None) -> InvocationContext:
        """The context the handler gets: `base`, or an extension of it."""

    def call(self, run: Callable[[], Any]) -> Any:
        """Run the handler (`run`); turn the layer's own escapes back into what they carry."""

    def workflow_failed(self, workflow: str) -> None:
        """React to the workflow's end in failure (its failure record exists). Idempotent."""


LayerFactory = Callable[[FunctionParts], Layer]

#: Called when a workflow whose id is a chained invoke's target (naming.INVOKED) reached its end
#: (its root result or failure record is written), with (store, invoker, clock, workflow id);
#: called again by every duplicate of the ending invocation, so it must be idempotent.
#: unum_entry.durable_functions.chained.workflow_ended answers the durable caller.
WorkflowEnded = Callable[["Store", "Invoker", Callable[[], float], str], None]


class NoLayer:
    """No layer: plain handlers, nothing to intercept or undo."""

    plain_context: type[InvocationContext] | None = DeliveryContext
    wraps_calls = False

    def __init__(self, parts: FunctionParts | None = None) -> None:
        return None

    def intercept(self, env: Envelope) -> bool:
        return False

    def give_up(self, env: Envelope, error: UnumError) -> bool:
        return False

    def context(self, base: InvocationContext, env: Envelope, checkpoint: str | None) -> InvocationContext:
        return base

    def call(self, run: Callable[[], Any]) -> Any:
        return run()

    def workflow_failed(self, workflow: str) -> None:
        return None
