"""The steps layer: what the runtime core calls (through `unum_entry.hooks.Layer`) so that
`@durable` handlers get a step journal and a failed workflow is compensated. The core knows
nothing of journals or compensations; the platforms build every Runtime with this layer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from unum_entry import naming
from unum_entry.checkpoint import committed_meanwhile, witnesses
from unum_entry.codec import decode
from unum_entry.context import InvocationContext
from unum_entry.envelope import Envelope
from unum_entry.errors import UnumError
from unum_entry.hooks import FunctionParts, StepPoint
from unum_entry.steps.api import DeliveryStepContext, StepContext
from unum_entry.steps.journal import HookRaised, Journal, StepEnv, _at
from unum_entry.steps.saga import CompensationRequest, advance, compensation_request, start_compensations

log = logging.getLogger("unum.steps")


class StepsLayer:
    """The `Layer` of exactly-once side effects for one function (a `LayerFactory`: built from
    the Runtime's parts)."""

    def __init__(self, parts: FunctionParts) -> None:
        self.env = StepEnv(store=parts.store, invoker=parts.invoker, hooks=parts.hooks, function=parts.function,
                           handler=parts.handler)
        # Decided once per function, here, not at its first delivery: a chain of n functions
        # run once each would pay for it (inspecting the handler) n times per run.
        self._durable = self.env.durable
        # A plain handler gets a step context without a journal (a step explains why it cannot
        # run) and raises no HookRaised (only a journal's steps do): the runtime builds the one
        # and calls the handler itself, with nothing of this layer on the path.
        self.plain_context: type[InvocationContext] | None = None if self._durable else DeliveryStepContext
        self.wraps_calls = self._durable

    def intercept(self, env: Envelope) -> bool:
        """A compensation request (saga.compensation_request) runs one compensation."""
        request = compensation_request(env)
        if request is None:
            return False
        try:
            run_compensation(self.env, env.workflow, request)
        except HookRaised as escape:
            raise escape.original from None
        return True

    def give_up(self, env: Envelope, error: UnumError) -> bool:
        """A compensation that keeps failing is skipped so that the older ones still run."""
        request = compensation_request(env)
        if request is None:
            return False
        log.error("workflow %s: compensation %d failed for good: %s", env.workflow, request.index, error)
        advance(self.env.store, self.env.invoker, env.workflow, request)
        return True

    def context(self, base: InvocationContext, env: Envelope, checkpoint: str | None) -> InvocationContext:
        """A StepContext; with a journal for a `@durable` handler (plain handlers: no step work)."""
        journal = None
        if self._durable:
            store = self.env.store
            journal = Journal(self.env, env.workflow, base.invocation,
                              recheck=lambda: committed_meanwhile(store, checkpoint), guards=witnesses(env, checkpoint),
                              deadline=env.deadline)
        return StepContext.extending(base, journal)

    def call(self, run: Callable[[], Any]) -> Any:
        """A hook that raised inside a step leaves user code as HookRaised; re-raise what it carries."""
        try:
            return run()
        except HookRaised as escape:
            raise escape.original from None

    def workflow_failed(self, workflow: str) -> None:
        start_compensations(self.env.store, self.env.invoker, workflow)


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
