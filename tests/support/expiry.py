"""Expiries for tests that write to a store directly: every store write states its `expires_at`
(unum_entry.retention: stores have no default TTL), and the runtime's ledger stamps it. A test
that only needs "a record that lives as long as a workflow's would" uses `ttl_from_now`."""

from __future__ import annotations

import time

from unum_entry.stores import Store


def ttl_from_now(store: Store) -> int:
    """`now + the store's TTL` on the store's clock: what a workflow started now would get as its
    deadline (and what stores stamped by default before every write had to say)."""
    return int(getattr(store, "_clock", time.time)()) + store.ttl_seconds
