"""The part of EventBridge Scheduler that moto does not do: firing one-time schedules.

moto's `scheduler` API stores schedules (and refuses a second one of the same name) but never
runs them. `SchedulerFiringLoop` polls it every `interval` seconds: each enabled `at(...)`
schedule that is due gets its target invoked asynchronously (`Invoke`, `InvocationType=Event`,
the schedule's Input as payload) through the given Lambda endpoint (the local stack's
`AsyncInvokeEndpoint`), then, with `ActionAfterCompletion=DELETE`, deleted, as Scheduler does.

    with SchedulerFiringLoop(scheduler_client, lambda_client) as loop:
        ...                  # loop.fired: (schedule name, target ARN) in firing order

Scheduler's own guarantee is at-least-once, and so is this loop's: a crash between the invoke
and the delete fires the schedule again. An invoke the endpoint refuses (unknown function) is
retried on the next poll, up to `max_attempts` polls, as Scheduler retries a failed target.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Any, Self

from builder.local_stack.process import Service
from unum_entry.invokers.eventbridge_scheduler import parse_at_expression, schedule_input

log = logging.getLogger("unum.scheduler_loop")


class SchedulerFiringLoop(Service):
    """Fires due one-time schedules of a (moto) EventBridge Scheduler through a Lambda client:
    those of schedule group `group`, or of every group (None)."""

    def __init__(self, scheduler: Any, lambda_client: Any, *, group: str | None = None, interval: float = 0.25,
                 max_attempts: int = 185, clock: Any = time.time) -> None:
        self.scheduler = scheduler
        self.group = group
        self.lambda_client = lambda_client
        self.interval = interval
        self.max_attempts = max_attempts
        self.fired: list[tuple[str, str]] = []
        self.stats: Counter[str] = Counter()
        self._failures: Counter[str] = Counter()
        self._done: set[tuple[str, str]] = set()  # fired schedules kept by ActionAfterCompletion=NONE
        self._known: dict[tuple[str, str], dict[str, Any]] = {}  # get_schedule answers (schedules never change)
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="scheduler-firing-loop", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.fire_due()
            except Exception as exc:  # moto restarting, a transient error: poll again
                self.stats["poll_errors"] += 1
                log.warning("scheduler poll failed: %s: %s", type(exc).__name__, exc)

    def pending(self) -> int:
        """How many one-time schedules are waiting (due or not)."""
        return sum(1 for _ in self._schedules())

    def fire_due(self) -> int:
        """One poll: fire every due schedule; returns how many fired."""
        fired = 0
        now = self._clock()
        listed = list(self._schedules())
        for gone in set(self._known) - set(listed):
            del self._known[gone]
        for group, name in listed:
            if (group, name) in self._done:
                continue
            schedule = self._known.get((group, name))
            if schedule is None:
                schedule = self._known[(group, name)] = self.scheduler.get_schedule(Name=name, GroupName=group)
            when = parse_at_expression(schedule.get("ScheduleExpression", ""))
            if when is None or when > now or schedule.get("State") != "ENABLED":
                continue
            if self._fire(group, name, schedule):
                fired += 1
        return fired

    def _schedules(self) -> Any:
        kwargs = {"GroupName": self.group} if self.group else {}
        for page in self.scheduler.get_paginator("list_schedules").paginate(**kwargs):
            for summary in page.get("Schedules", []):
                yield summary.get("GroupName") or "default", summary["Name"]

    def _fire(self, group: str, name: str, schedule: dict[str, Any]) -> bool:
        target = schedule["Target"]["Arn"]
        try:
            response = self.lambda_client.invoke(FunctionName=target, InvocationType="Event",
                                                 Payload=schedule_input(schedule))
            if response.get("StatusCode") != 202:
                raise RuntimeError(f"status {response.get('StatusCode')}")
        except Exception as exc:  # the target refused: Scheduler retries, then gives up (no DLQ here)
            self._failures[name] += 1
            self.stats["invoke_errors"] += 1
            log.warning("schedule %s/%s: invoke of %s failed (%d): %s", group, name, target,
                        self._failures[name], exc)
            if self._failures[name] >= self.max_attempts:
                self.stats["dropped"] += 1
                self._complete(group, name, schedule)
            return False
        self.fired.append((name, target))
        self.stats["fired"] += 1
        self._complete(group, name, schedule)
        return True

    def _complete(self, group: str, name: str, schedule: dict[str, Any]) -> None:
        self._known.pop((group, name), None)
        if schedule.get("ActionAfterCompletion") == "DELETE":
            try:
                self.scheduler.delete_schedule(Name=name, GroupName=group)
                return
            except Exception as exc:  # deleted meanwhile: fine; otherwise it fires again (at least once)
                log.info("schedule %s/%s: delete after completion: %s", group, name, exc)
        self._done.add((group, name))
