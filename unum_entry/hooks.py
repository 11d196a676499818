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


class Hooks(Protocol):
    def at(self, point: FaultPoint, invocation: str) -> None:
        """Called at each point; raising simulates the execution dying there."""


class NoHooks:
    """The production default: observe nothing."""

    def at(self, point: FaultPoint, invocation: str) -> None:
        return None
