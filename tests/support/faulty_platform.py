"""The local platform with the faults that need a harness around it (unum_entry.local.faults):

- *slow concurrent duplicates*: when the injector says so, an invoke is accepted twice, and one
  execution of that invocation (whichever copy reaches its handler first) is held back — before
  its handler runs or after it returned, at most `SlowCopy.seconds`, and not longer than until
  every other delivery of the platform is done — so it commits (and loses) after the rest of the
  workflow consumed the first execution's output;
- *late duplicates*: every delivery the platform accepted is recorded; `redeliver_late` delivers
  a copy of each again once the workflow has finished;
- *handler errors*: the user code raises on a first attempt, so the platform's handler retry
  (attempt + 1) runs, possibly next to duplicates of the first attempt.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from unum_entry import naming
from unum_entry.codec import decode, encode
from unum_entry.envelope import Envelope
from unum_entry.errors import EnvelopeError
from unum_entry.local.faults import FaultInjector, SlowCopy
from unum_entry.local.platform import HandlerWrapper, LocalPlatform
from unum_entry.runtime import Handler, InvocationContext
from unum_entry.stores.base import Store
from unum_entry.workflow import Workflow


# Redeliveries after a transient error back off up to FAULT_BACKOFF s here, not the platform's 0.5 s:
# the injected store errors come at a rate per operation, not per second, so a long wait before the
# next attempt only stretches the run (same redelivery path, same counts). The limit of consecutive
# redeliveries grows so a real emulator's trouble still has the default's ~21 s before a delivery
# is dead-lettered (0.1 s x 220 ~ 0.5 s x 50).
FAULT_BACKOFF = 0.1
FAULT_REDELIVERIES = 220


@dataclass(frozen=True)
class Held:
    """One held-back execution: how long it was held, and whether it woke because everything
    else was done (it finished after the rest of the workflow)."""

    invocation: str
    seconds: float
    past_the_end: bool


class InjectedHandlerError(Exception):
    """User code failing on a first attempt (unum_entry.local.faults: handler_error)."""


class FaultyPlatform(LocalPlatform):
    """LocalPlatform + slow duplicates + a record of every accepted delivery (module docstring)."""

    def __init__(self, workflow: Workflow, store: Store, *, faults: FaultInjector,
                 wrap: HandlerWrapper | None = None, **kwargs: Any) -> None:
        self._harness_lock = threading.Lock()
        self.accepted: list[tuple[str, bytes]] = []   # every delivery accepted before `redeliver_late`
        self._recording = True
        self._slow: dict[str, list[SlowCopy]] = defaultdict(list)  # invocation → pending holds
        self._held = 0
        self.held_back: list[Held] = []

        def wrapped(name: str, handler: Handler) -> Handler:
            return self._hold_wrap(wrap(name, handler) if wrap is not None else handler)

        kwargs.setdefault("max_backoff", FAULT_BACKOFF)
        kwargs.setdefault("max_redeliveries", FAULT_REDELIVERIES)
        super().__init__(workflow, store, faults=faults, wrap=wrapped, **kwargs)

    # ---- deliveries --------------------------------------------------------------------------

    def submit(self, function: str, payload: dict[str, Any], *, delay: float = 0.0) -> None:
        data = encode(payload, what="envelope")
        slow = self.faults.slow_copy() if self.faults is not None else None
        invocation = _invocation(function, payload) if slow is not None else None
        with self._harness_lock:
            if self._recording:
                self.accepted.append((function, data))
            if invocation is not None and slow is not None:
                self._slow[invocation].append(slow)
        super().submit(function, payload, delay=delay)
        if invocation is not None:
            super().submit(function, payload, delay=delay)  # the copy that races the first one

    def redeliver_late(self) -> int:
        """After the workflow finished: deliver again a copy of every accepted delivery the
        injector picks (`late_copies`; each distinct delivery once). Returns how many."""
        with self._harness_lock:
            self._recording = False
            distinct = list(dict.fromkeys(self.accepted))
        assert self.faults is not None
        chosen = self.faults.late_copies(len(distinct))
        for i in chosen:
            function, data = distinct[i]
            super().submit(function, decode(data))
        return len(chosen)

    def in_flight(self) -> str:
        """What is still in flight, for a WorkflowTimeout: per function, queued or running; the
        consecutive failures of the queued deliveries; how long until the next one is due. A
        lost invoke shows as nothing in flight with an incomplete outcome (not a timeout); a
        delivery stuck in backoff as a queued one with many failures; load as many deliveries,
        few failures and the next one due now."""
        now = time.time()
        with self._lock:  # LocalPlatform's queue (due times: epoch seconds), and `_ready`
            queued = [(ready_at - now, d) for ready_at, d in self.queue.snapshot()] + [(0.0, d) for d in self._ready]
            outstanding = self._outstanding
        by_function = Counter(d.function for _, d in queued)
        failures = sorted((d.failures for _, d in queued), reverse=True)[:10]
        due = min((t for t, _ in queued), default=None)
        return (f"{outstanding} outstanding: {len(queued)} queued {dict(by_function)}, "
                f"{outstanding - len(queued)} running ({self._held} held back); most consecutive failures of "
                f"a queued delivery {failures}; next due in {'-' if due is None else f'{due:.2f} s'}; "
                f"platform {dict(self.stats)}")

    # ---- slow executions ---------------------------------------------------------------------

    def _hold_wrap(self, handler: Handler) -> Handler:
        @functools.wraps(handler)  # keeps what the runtime looks for through it (@durable)
        def held(event: Any, context: InvocationContext) -> Any:
            with self._harness_lock:
                pending = self._slow.get(context.invocation)
                slow = pending.pop() if pending else None
            if self.faults is not None and self.faults.handler_fails(context.attempt):
                raise InjectedHandlerError(f"injected handler error in {context.invocation} (attempt {context.attempt})")
            if slow is None:
                return handler(event, context)
            if slow.before_handler:
                self._hold(context.invocation, slow.seconds)
                return handler(event, context)
            output = handler(event, context)
            self._hold(context.invocation, slow.seconds)
            return output

        return held

    def _hold(self, invocation: str, seconds: float) -> None:
        """Sleep up to `seconds`, waking early once only held executions are outstanding (the
        rest of the workflow is done: this execution finishes past its end)."""
        start = time.monotonic()
        past_the_end = False
        with self._harness_lock:
            self._held += 1
        try:
            while time.monotonic() - start < seconds:
                outstanding = getattr(self, "_outstanding", None)  # LocalPlatform's in-flight count
                if outstanding is not None and outstanding <= self._held:
                    past_the_end = True
                    break
                time.sleep(0.005)
        finally:
            with self._harness_lock:
                self._held -= 1
                self.held_back.append(Held(invocation, time.monotonic() - start, past_the_end))


def _invocation(function: str, payload: dict[str, Any]) -> str | None:
    """The invocation name (its checkpoint key) a payload asks for, as the runtime computes it."""
    try:
        env = Envelope.from_wire(payload)
    except EnvelopeError:
        return None
    return naming.checkpoint_key(env.workflow, function, env.frames)
