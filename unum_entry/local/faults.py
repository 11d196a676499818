"""Fault injection for the embedded platform: the misbehaviour a FaaS platform is allowed.

One `FaultInjector` per run, seeded, shared by every function's runtime (as their `Hooks`) and by
the local invoker (for deliveries): crashes at every step boundary, duplicate and concurrent
duplicate deliveries, delayed (hence reordered) deliveries. A budget bounds the crashes so every
run terminates.

The same injector also decides the faults that need a test harness around the platform and the
store (tests/support/faulty_platform.py, tests/support/faulty_store.py):

- *slow* concurrent duplicates (`slow_copy`): one more copy of a delivery, one execution of
  which is held back (before or after its handler) so it finishes after the rest of the
  workflow moved on;
- *late* duplicates (`late_copies`): after the workflow finished, a copy of every delivery the
  platform ever accepted is delivered again;
- transient store errors (`store_fault`): a store operation fails before it happens, after it
  happened (the write landed but the caller sees an error), or half-way through a multi-key
  read or delete;
- partial batches (`unprocessed_split`): DynamoDB hands back part of a BatchGetItem /
  BatchWriteItem as unprocessed, as it does under throttling;
- handler errors (`handler_fails`): the user code raises on a first attempt (the platform
  retries it with attempt + 1).

Every decision draws from the one seeded generator, under one lock, each in a budget.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field

from unum_entry.hooks import FaultPoint, StepPoint

STORE_ERROR_MODES = ("before", "after", "partial")


class InjectedCrash(Exception):
    """The execution 'died' at a fault point. Not an UnumError: nothing in unum raises it."""

    def __init__(self, point: FaultPoint | StepPoint, invocation: str) -> None:
        super().__init__(f"injected crash at {point.value} in {invocation}")
        self.point = point


@dataclass(frozen=True)
class FaultRates:
    """Probabilities per event. `crash` is per fault point, per time the point is reached."""

    crash: dict[FaultPoint | StepPoint, float] = field(default_factory=dict)
    duplicate: float = 0.0              # deliver a second copy later
    concurrent_duplicate: float = 0.0   # deliver two copies at once (two workers race)
    delay: float = 0.0                  # hold a delivery back for up to `max_delay` seconds
    max_delay: float = 0.02
    max_crashes: int = 40
    # Harness-driven kinds (see the module docstring); the plain LocalPlatform ignores them.
    slow_duplicate: float = 0.0         # per invoke: one more copy whose execution is held back
    max_slow: float = 0.5               # seconds a slow copy is held at most
    max_slow_duplicates: int = 3
    late_duplicate: float = 0.0         # per accepted delivery: delivered again after the run
    store_error: float = 0.0            # per store operation
    store_error_modes: tuple[str, ...] = STORE_ERROR_MODES
    max_store_errors: int = 40
    unprocessed: float = 0.0            # per DynamoDB batch call: part of it comes back unprocessed
    handler_error: float = 0.0          # per first attempt of a handler: the user code raises

    @classmethod
    def everything(cls, p: float = 0.15) -> FaultRates:
        """Every fault the plain LocalPlatform injects by itself."""
        return cls(crash={point: p for point in FaultPoint}, duplicate=p, concurrent_duplicate=p / 2, delay=p)

    @classmethod
    def all_kinds(cls, p: float = 0.15) -> FaultRates:
        """`everything`, plus slow concurrent duplicates, transient store errors (before, after,
        half-way) and a late duplicate of every delivery (these need the test harness)."""
        base = cls.everything(p)
        return cls(crash=base.crash, duplicate=base.duplicate, concurrent_duplicate=base.concurrent_duplicate,
                   delay=base.delay, slow_duplicate=p / 2, late_duplicate=1.0, store_error=p / 3,
                   unprocessed=p, handler_error=p / 2)


@dataclass(frozen=True)
class DeliveryPlan:
    """How the platform delivers one invocation: copies, each after a delay (seconds)."""

    delays: tuple[float, ...]


@dataclass(frozen=True)
class SlowCopy:
    """One held-back execution: held at most `seconds`, before its handler or after it."""

    seconds: float
    before_handler: bool


class FaultInjector:
    """Seeded, thread-safe source of faults; also the runtime `Hooks` of every function."""

    def __init__(self, rates: FaultRates, seed: int) -> None:
        self.rates = rates
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.injected: Counter[str] = Counter()

    def at(self, point: FaultPoint | StepPoint, invocation: str) -> None:
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

    # ---- harness-driven faults ---------------------------------------------------------------

    def slow_copy(self) -> SlowCopy | None:
        """Whether one invoke gets an extra, held-back copy (and how it is held), in budget."""
        r = self.rates
        if not r.slow_duplicate:
            return None
        with self._lock:
            if self.injected["slow_duplicate"] >= r.max_slow_duplicates or self._rng.random() >= r.slow_duplicate:
                return None
            self.injected["slow_duplicate"] += 1
            before = self._rng.random() < 0.5
            self.injected[f"slow_duplicate:{'before' if before else 'after'}_handler"] += 1
            return SlowCopy(seconds=self._rng.uniform(r.max_slow / 10, r.max_slow), before_handler=before)

    def late_copies(self, n: int) -> list[int]:
        """Which of `n` accepted deliveries are delivered again after the run (in this order)."""
        p = self.rates.late_duplicate
        if not p:
            return []
        with self._lock:
            chosen = [i for i in range(n) if p >= 1.0 or self._rng.random() < p]
            self._rng.shuffle(chosen)
            self.injected["late_duplicate"] += len(chosen)
        return chosen

    def store_fault(self, operation: str, keys: int = 1) -> tuple[str, int] | None:
        """Whether a store operation on `keys` keys fails, and how: ("before", 0), ("after", 0)
        or ("partial", k) — only the first k (>= 1, < keys) keys are read or deleted before the
        error. "partial" needs a multi-key operation; otherwise it becomes "after"."""
        r = self.rates
        if not r.store_error:
            return None
        with self._lock:
            if self.injected["store_error"] >= r.max_store_errors or self._rng.random() >= r.store_error:
                return None
            mode = self._rng.choice(r.store_error_modes)
            done = 0
            if mode == "partial":
                if keys >= 2:
                    done = self._rng.randint(1, keys - 1)
                else:
                    mode = "after"
            self.injected["store_error"] += 1
            self.injected[f"store_error:{mode}"] += 1
            self.injected[f"store_error:{mode}:{operation}"] += 1
            return mode, done

    def unprocessed_split(self, items: int) -> int | None:
        """Whether a batch call of `items` items is only partly processed: how many of them
        (0 .. items-1, the first ones) are; None: all of them."""
        if not self.rates.unprocessed or items < 1:
            return None
        with self._lock:
            if self._rng.random() >= self.rates.unprocessed:
                return None
            self.injected["unprocessed"] += 1
            return self._rng.randrange(items)

    def handler_fails(self, attempt: int) -> bool:
        """Whether the user handler raises in this execution (first attempts only, so the
        platform's retry with attempt + 1 always gets through)."""
        if not self.rates.handler_error or attempt > 0:
            return False
        with self._lock:
            if self._rng.random() >= self.rates.handler_error:
                return False
            self.injected["handler_error"] += 1
            return True
