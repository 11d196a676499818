"""Points in ingress/egress where a platform may observe or (in tests) crash an execution."""

from __future__ import annotations

import enum
from typing import Protocol


class FaultPoint(str, enum.Enum):
    """Every step boundary of one execution, in order."""

    BEFORE_HANDLER = "before_handler"
    AFTER_HANDLER = "after_handler"          # handler returned, checkpoint not yet written
    AFTER_CHECKPOINT = "after_checkpoint"    # committed, nothing invoked yet
    BEFORE_INVOKE = "before_invoke"          # once per outgoing invoke: a crash here leaves some branches sent
    BEFORE_GC = "before_gc"                  # everything invoked, nothing collected


class StepPoint(str, enum.Enum):
    """Boundaries inside one step (`unum_entry.steps`), reported to the same `Hooks.at`. Kept
    apart from FaultPoint: only functions that use steps ever reach them."""

    BEFORE_EFFECT = "step_before_effect"    # no record found; the step's function is about to run
    AFTER_EFFECT = "step_after_effect"      # it ran (a plain step's effect happened), not yet recorded
    AFTER_RECORD = "step_after_record"      # recorded (a transactional step: effect and record committed)
    BEFORE_COMPENSATE = "step_before_compensate"  # a compensation is about to run


class Hooks(Protocol):
    def at(self, point: FaultPoint, invocation: str) -> None:
        """Called at each point; raising simulates the execution dying there."""


class NoHooks:
    """The production default: observe nothing."""

    def at(self, point: FaultPoint, invocation: str) -> None:
        return None
