"""serve's RedriveExecution, one at a time per execution, continuing a redrive whose server died.

`serve` drives its executions itself (builder.serve.engine), so within one server the only
redrive of an execution that can be in progress is one this server runs. `Redrives.redrive`
runs an execution's redrives one at a time (a lock per workflow, held across the checks and
the sends), so when it starts, a redrive claim (`naming.redrive_key`) that

- still holds the failure record (a server killed between the claim and the clearing of the
  failure record), or
- cleared it while the workflow has no outcome (killed before what it sent was journaled)

belongs to a redrive whose server died. It is continued under its number
(`unum_entry.redrive.redrive(adopt=True)`: what it would have sent is sent again under the same
names, a duplicate is a redelivery), never refused (the execution would stay stuck) and never
redriven again (a second attempt). A dead redrive whose sends were journaled is re-driven from
this server's queue instead (`LocalPlatform.recover`), sending nothing twice. What a redrive
sends is flushed to the queue's file before the registry notes the redrive, so a server killed
after that note resumes the execution from what it journaled. A second
RedriveExecution waiting on the lock then finds the execution running, as AWS answers it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from unum_entry.local.platform import LocalPlatform
    from unum_entry.stores.base import Store


class Redrives:
    """The redrives of one server's executions over `store` (module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    @contextmanager
    def one_at_a_time(self, workflow: str) -> Iterator[None]:
        """Held while a RedriveExecution of `workflow` checks and sends (module docstring)."""
        with self._guard:
            lock = self._locks.setdefault(workflow, threading.Lock())
        with lock:
            yield

    def redrive(self, workflow: str, platform: LocalPlatform, *, redriven: Callable[[], None]) -> None:
        """Redrive `workflow` on `platform`, or continue the redrive a dead server left of it;
        call `redriven` (the registry's note of the redrive) once it is sent. Call under
        `one_at_a_time(workflow)`. Raises unum_entry.redrive.CannotRedrive with one line."""
        from unum_entry import naming
        from unum_entry.redrive import redrive
        from unum_entry.watchdog import Rearm

        cleared = self.store.get(naming.failure_key(workflow)) is None
        if cleared and platform.recover(workflow):  # a dead redrive journaled its sends: they run here now
            redriven()
            return
        redrive(self.store, workflow, platform.invoker, adopt=True, rearm=Rearm.of(platform.workflow))
        # on disk before the registry says "running": a server killed after that note resumes the
        # execution from its queue (builder.serve.app), which then holds what this redrive sent
        platform.queue.flush()
        redriven()
