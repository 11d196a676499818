"""What a finished workflow may leave in its store (docs/coordination.md, "What is left after a
workflow"): its outcome — the result records or the failure record — and, until they expire,
the objects the runtime retains (checkpoints, set shards, step records, compensation entries,
chunks of values stored by reference). Nothing is deleted by the runtime, but nothing lives
forever either: every record expires, at most the store's TTL after it was written.

`assert_only_ttl_bounded` checks that once; a test then asserts its outcome on the records it
returns (`outcome_kinds`, `outcomes`) exactly as before. (The retention rule stamps
`max(deadline, now + redelivery window)`: the bound holds for a TTL of at least the redelivery
window, 6 h 15 min — the default TTL is 7 days.)
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from unum_entry.stores import Kind, Record, Store

RETAINED_KINDS = frozenset({Kind.CHECKPOINT, Kind.SET, Kind.STEP, Kind.COMPENSATION, Kind.CHUNK, Kind.MARKER})
OUTCOME_KINDS = frozenset({Kind.RESULT, Kind.FAILURE})
SLACK_SECONDS = 60  # clock skew between the writer (a container, an emulator) and the test


def assert_only_ttl_bounded(store: Store, workflow_id: str | None = None) -> list[Record]:
    """Assert that every live record of `workflow_id` (of the whole store when None) is an
    outcome (result/failure) or of a retained kind, and expires at a time `t` with
    `0 < t <= now + store.ttl_seconds + 60`; return the records (in key order)."""
    records = sorted(store.records(workflow_id), key=lambda r: r.key)
    now = getattr(store, "_clock", time.time)()  # the clock the store (and the runtime) stamps expiries with
    horizon = now + store.ttl_seconds + SLACK_SECONDS
    foreign = [(r.kind.value, r.key) for r in records if r.kind not in RETAINED_KINDS | OUTCOME_KINDS]
    assert not foreign, f"records of a kind a finished workflow must not leave: {foreign}"
    unbounded = [(r.kind.value, r.key, r.expires_at) for r in records if not 0 < r.expires_at <= horizon]
    assert not unbounded, (f"records that do not expire within the TTL ({store.ttl_seconds} s, "
                           f"horizon {int(horizon)}): {unbounded}")
    return records


def outcomes(records: Iterable[Record]) -> list[Record]:
    """The result and failure records among `records`."""
    return [r for r in records if r.kind in OUTCOME_KINDS]


def outcome_kinds(records: Iterable[Record]) -> list[str]:
    """The kinds of the outcome records, sorted, one per record (["result"], ["failure"], …)."""
    return sorted(r.kind.value for r in outcomes(records))
