"""Fault injection for the embedded platform: the misbehaviour a FaaS platform is allowed.

One `FaultInjector` per run, seeded, shared by every function's runtime (as their `Hooks`) and by
the local invoker (for deliveries): crashes at every step boundary, duplicate and concurrent
duplicate deliveries, delayed (hence reordered) deliveries. A budget bounds the crashes so every
run terminates.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field

from unum_entry.hooks import FaultPoint


class InjectedCrash(Exception):
    """The execution 'died' at a fault point. Not an UnumError: nothing in unum raises it."""

    def __init__(self, point: FaultPoint, invocation: str) -> None:
        super().__init__(f"injected crash at {point.value} in {invocation}")
        self.point = point


@dataclass(frozen=True)
class FaultRates:
    """Probabilities per event. `crash` is per fault point, per time the point is reached."""

    crash: dict[FaultPoint, float] = field(default_factory=dict)
    duplicate: float = 0.0              # deliver a second copy later
    concurrent_duplicate: float = 0.0   # deliver two copies at once (two workers race)
    delay: float = 0.0                  # hold a delivery back for up to `max_delay` seconds
    max_delay: float = 0.02
    max_crashes: int = 40

    @classmethod
    def everything(cls, p: float = 0.15) -> FaultRates:
        return cls(crash={point: p for point in FaultPoint}, duplicate=p, concurrent_duplicate=p / 2, delay=p)


@dataclass(frozen=True)
class DeliveryPlan:
    """How the platform delivers one invocation: copies, each after a delay (seconds)."""

    delays: tuple[float, ...]


class FaultInjector:
    """Seeded, thread-safe source of faults; also the runtime `Hooks` of every function."""

    def __init__(self, rates: FaultRates, seed: int) -> None:
        self.rates = rates
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.injected: Counter[str] = Counter()

    def at(self, point: FaultPoint, invocation: str) -> None:
        """Hooks: maybe crash here."""
        p = self.rates.crash.get(point, 0.0)
        if not p:
            return
        with self._lock:
            if self.injected["crash"] >= self.rates.max_crashes or self._rng.random() >= p:
                return
            self.injected["crash"] += 1
            self.injected[f"crash:{point.value}"] += 1
        raise InjectedCrash(point, invocation)

    def plan_delivery(self) -> DeliveryPlan:
        """Copies and delays for one invoke."""
        r = self.rates
        with self._lock:
            rng = self._rng
            first = rng.uniform(0, r.max_delay) if rng.random() < r.delay else 0.0
            delays = [first]
            if rng.random() < r.concurrent_duplicate:
                delays.append(first)
                self.injected["concurrent_duplicate"] += 1
            if rng.random() < r.duplicate:
                delays.append(first + rng.uniform(0, r.max_delay * 5))
                self.injected["duplicate"] += 1
            if first:
                self.injected["delay"] += 1
        return DeliveryPlan(tuple(delays))

    def pick(self, n: int) -> int:
        """Which of `n` ready deliveries a worker takes next (reordering)."""
        with self._lock:
            return self._rng.randrange(n)
