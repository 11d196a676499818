"""GetActivityTask: hand a waiting activity Task to one worker (unum_entry.asl.activities).

`claim_task(store, workflows, activity_arn, worker)` looks through the given workflows' committed
wait decisions for one that waits for a worker of `activity_arn`, whose callback has not
arrived and that no worker holds yet, and hands it out with one create-if-absent record
(`activities.claim_key`): of two workers polling at once, one gets it and the other looks on.
The record lives as long as the waiting checkpoint. A worker that dies after the hand-out leaves
the Task to its HeartbeatSeconds / TimeoutSeconds, as on AWS.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

POLL_INTERVAL = 0.1  # seconds between looks while a poll waits


def claim_task(store: Any, workflows: Iterable[str], activity_arn: str, worker: str | None) -> dict[str, str] | None:
    """`{"taskToken", "input"}` of a task now handed to `worker`, or None (module docstring)."""
    from unum_entry import naming
    from unum_entry.asl import activities
    from unum_entry.asl.callbacks import WAIT
    from unum_entry.codec import decode, encode
    from unum_entry.stores.base import Kind

    marker = WAIT.encode()
    for workflow in workflows:
        records = list(store.records(workflow))
        keys = {record.key for record in records}
        for record in records:
            if record.kind is not Kind.CHECKPOINT or record.value is None or marker not in record.value:
                continue
            try:
                wait = pending(decode(record.value), activity_arn)
            except Exception:  # noqa: BLE001 - not a decision of ours
                continue
            if wait is None:
                continue
            callback = naming.callback_key(record.key, str(wait.get("nonce")))
            claim = activities.claim_key(callback)
            if callback in keys or claim in keys:
                continue
            _, created = store.create(claim, encode({"worker": worker, "at": time.time()}), workflow=workflow,
                                      kind=Kind.MARKER, expires_at=record.expires_at)
            if created:
                return {"taskToken": str(wait["token"]),
                        "input": json.dumps(wait[activities.KEY].get("input"), separators=(",", ":"))}
    return None


def pending(decision: Any, activity_arn: str) -> Mapping[str, Any] | None:
    """The wait of a committed decision if it waits for a worker of `activity_arn`, else None."""
    from unum_entry.asl import activities
    from unum_entry.asl.callbacks import WAIT

    if not isinstance(decision, Mapping) or decision.get("__next__") != WAIT:
        return None
    wait = decision.get("wait")
    if not isinstance(wait, Mapping) or not isinstance(wait.get(activities.KEY), Mapping):
        return None
    return wait if wait[activities.KEY].get("arn") == activity_arn else None


def poll(store: Any, workflows: Any, activity_arn: str, worker: str | None, *, wait: float) -> dict[str, str]:
    """Claim a task, waiting up to `wait` seconds for one; `{}` when none came (AWS answers an
    empty task). `workflows()` gives the workflows to look through at each look."""
    deadline = time.monotonic() + wait
    while True:
        task = claim_task(store, workflows(), activity_arn, worker)
        if task is not None:
            return task
        if time.monotonic() >= deadline:
            return {}
        time.sleep(POLL_INTERVAL)
