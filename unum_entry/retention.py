"""The retention rule: how long a workflow's objects live, and when a workflow has outlived them.

Nothing the runtime writes is deleted by the runtime. Every checkpoint, set shard and result
expires at `max(deadline, now + redelivery)`:

- the workflow's *deadline* (its start plus the TTL) keeps every object of a running workflow
  readable while the workflow may still need it;
- `now + redelivery` (the platform's longest redelivery window: Lambda's maximum event age of
  6 h plus its maximum timeout) keeps an object written late in a workflow alive as long as a
  duplicate of the invocation that wrote it can still arrive.

So the create-if-absent commit alone answers every duplicate: slow, concurrent or late.

An execution that would start after `deadline - margin` (margin: the longest a function may
run) could read objects that expire under it; it does not run, and the workflow ends with the
failure `Unum.RetentionExpired` instead of stalling silently (see `check`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from typing import TYPE_CHECKING

from unum_entry.errors import RetentionExpired
from unum_entry.frozen import Frozen, frozen

if TYPE_CHECKING:
    from unum_entry.stores.base import Store

DEFAULT_TTL_SECONDS = 7 * 24 * 3600
DEFAULT_REDELIVERY_SECONDS = 6 * 3600 + 15 * 60   # Lambda: max event age + max function timeout
DEFAULT_MARGIN_SECONDS = 15 * 60                   # Lambda: max function timeout


@frozen
class Retention(Frozen):
    """The retention settings of one deployment (every function of a workflow must agree)."""

    ttl_seconds: int = DEFAULT_TTL_SECONDS
    redelivery_seconds: int = DEFAULT_REDELIVERY_SECONDS
    margin_seconds: int = DEFAULT_MARGIN_SECONDS
    clock: Callable[[], float] = time.time

    def __init__(self, ttl_seconds: int = DEFAULT_TTL_SECONDS, redelivery_seconds: int = DEFAULT_REDELIVERY_SECONDS,
                 margin_seconds: int = DEFAULT_MARGIN_SECONDS, clock: Callable[[], float] = time.time) -> None:
        self.__dict__.update(ttl_seconds=ttl_seconds, redelivery_seconds=redelivery_seconds,
                             margin_seconds=margin_seconds, clock=clock)

    def deadline(self) -> int:
        """The deadline of a workflow that starts now."""
        return int(self.clock()) + self.ttl_seconds

    def expires_at(self, deadline: int) -> int:
        """When an object written now by a workflow with `deadline` may be deleted."""
        return max(deadline, int(self.clock()) + self.redelivery_seconds)

    def check(self, workflow: str, deadline: int) -> None:
        """Raise RetentionExpired when an execution must not start any more (see module doc)."""
        now = self.clock()
        if now >= deadline - min(self.margin_seconds, self.ttl_seconds // 2):
            raise RetentionExpired(
                f"workflow {workflow} outlived its retention: its objects expire at {deadline} "
                f"(start + TTL {self.ttl_seconds} s) and this execution started at {int(now)}; "
                "raise the store's TTL for workflows that run this long")


def store_retention(store: Store) -> Retention:
    """The retention rule over a store's TTL and clock."""
    return Retention(ttl_seconds=store.ttl_seconds, clock=getattr(store, "_clock", time.time))
