"""A join's target reads its members a group of leaf shards at a time (unum_entry.ingress._gather)
on a real SQLite store: every value in slot order across groups, as many store calls as before
for a join of up to 4,096 branches, and a gone leaf or checkpoint in a later group named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from unum_entry import fanin, naming
from unum_entry.codec import encode
from unum_entry.envelope import Envelope, Gather
from unum_entry.errors import RetentionExpired
from unum_entry.ingress import GATHER_LEAVES, Ready, ingress
from unum_entry.retention import Ledger, store_retention
from unum_entry.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.integration

SET = "s-join"
WORKFLOW = "wf-gather"


def joined(store: SQLiteStore, width: int) -> Envelope:
    """Every branch of a `width`-wide join committed (value i * 3) and joined; the target's envelope."""
    ledger = Ledger(WORKFLOW, 2**31, store_retention(store))
    for i in range(width):
        store.create(f"c-{i}", encode(i * 3), workflow=WORKFLOW, expires_at=2**31)
        fanin.join(store, ledger, SET, width, i, f"c-{i}")
    return Envelope(workflow=WORKFLOW, gathered=True, gather=Gather(SET, width))


def counting(store: SQLiteStore) -> list[int]:
    """Counts the store's batch reads (`_get_many` for a `read`, `_get_values` for a `get_many`:
    one per call)."""
    calls = [0]
    get_many, get_values = store._get_many, store._get_values

    def counted(keys: list[str]) -> Any:
        calls[0] += 1
        return get_many(keys)

    def counted_values(keys: list[str], now: float) -> Any:
        calls[0] += 1
        return get_values(keys, now)

    store._get_many = counted  # type: ignore[method-assign]
    store._get_values = counted_values  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize("width", [40, GATHER_LEAVES * fanin.SHARD_SLOTS, GATHER_LEAVES * fanin.SHARD_SLOTS * 2 + 5])
def test_a_join_target_gets_every_value_in_slot_order(tmp_path: Path, width: int) -> None:
    store = SQLiteStore.open(tmp_path / "s.db", durability="off")
    env = joined(store, width)
    calls = counting(store)
    result = ingress(env, store, "c-target")
    assert isinstance(result, Ready) and result.event == [i * 3 for i in range(width)]
    groups = -(-width // (GATHER_LEAVES * fanin.SHARD_SLOTS))
    # Two batch reads per group: its leaves (the first group's with the checkpoint), then its
    # members' checkpoints. Up to 4,096 branches: the two reads of a join, as before.
    assert calls == [2 * groups]
    store.close()


def test_a_gone_leaf_or_checkpoint_in_a_later_group_is_named(tmp_path: Path) -> None:
    width = GATHER_LEAVES * fanin.SHARD_SLOTS + 20
    store = SQLiteStore.open(tmp_path / "s.db", durability="off")
    env = joined(store, width)
    store.delete([f"c-{width - 3}"])
    with pytest.raises(RetentionExpired, match=f"fan-in input c-{width - 3} is gone"):
        ingress(env, store, "c-target")
    store.delete([naming.set_shard_key(SET, 0, GATHER_LEAVES)])
    with pytest.raises(RetentionExpired, match=f"shard {GATHER_LEAVES} of {width} branches is gone"):
        ingress(env, store, "c-target")
    store.close()
