"""The fan-in rule (a tree of 16-slot shards) and the retention rule, over the memory store."""

from __future__ import annotations

import random

import pytest

from unum_entry import fanin, naming
from unum_entry.errors import RetentionExpired
from unum_entry.retention import Ledger, Retention, store_retention
from unum_entry.stores.memory import MemoryStore

pytestmark = pytest.mark.unit

SET = "s-join"


def join_all(store: MemoryStore, width: int, order: list[int]) -> list[int]:
    """Join every slot in `order`; returns the slots whose join saw the set complete."""
    ledger = Ledger("wf", 2**31, store_retention(store))
    return [slot for slot in order if fanin.join(store, ledger, SET, width, slot, f"c-{slot}")]


@pytest.mark.parametrize("width", [1, 2, 15, 16, 17, 256, 257, 4097])
def test_exactly_the_last_join_sees_the_set_complete_in_any_order(width: int) -> None:
    order = list(range(width))
    random.Random(width).shuffle(order)
    store = MemoryStore()
    assert join_all(store, width, order) == [order[-1]]
    records = store.read(fanin.leaf_keys(SET, width))
    assert fanin.members(records, SET, width) == [f"c-{i}" for i in range(width)]


def test_no_shard_holds_more_than_sixteen_members_and_joins_are_idempotent() -> None:
    store = MemoryStore()
    width = 1000
    join_all(store, width, list(range(width - 1)))
    assert max(len(r.members) for r in store.records("wf")) <= fanin.SHARD_SLOTS
    assert join_all(store, width, [5, 5, 999]) == [999]   # a repeated join changes nothing
    # A retry of the completing join carries it on again; the store (apply order) tells every
    # other adder that someone else completed its shard, so no parent takes extra adds.
    assert join_all(store, width, [999, 0, 998]) == [999]


def test_where_the_store_cannot_tell_who_completed_a_shard_only_its_claimer_carries_on() -> None:
    store = MemoryStore()
    store.ordered_sets = False  # as DynamoDB
    assert join_all(store, 20, list(range(20))) == [19]
    # Later joins (duplicates, retries, late copies) all see every shard full; only the branch
    # that claimed carrying on (19 completed leaf 1, then the root) invokes the target again.
    assert join_all(store, 20, [3, 15, 19, 0]) == [19]
    assert all(len(r.members) <= fanin.SHARD_SLOTS + 1 for r in store.records("wf"))  # + the claim


def test_a_branch_whose_leaf_add_did_not_fill_its_shard_ends_there_and_the_filler_carries_on() -> None:
    """`leaf_state`: the add the store made with the branch's commit (`Store.create_joining`).
    A shard it did not fill ends the branch's join (`ends_at_leaf`) without another write or
    the ledger (egress then builds none); the add that fills it carries the join on."""
    from unum_entry.stores.base import SetState

    class Untouchable:  # the ledger and the store: any use is an error here
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"used {name}")

    partial = SetState(16, {slot: f"c-{slot}" for slot in range(5)}, None)
    assert fanin.ends_at_leaf(partial) and not fanin.ends_at_leaf(None)
    assert fanin.join(Untouchable(), Untouchable(), SET, 40, 4, "c-4", leaf_state=partial) is False  # type: ignore[arg-type]

    store = MemoryStore()
    join_all(store, 20, list(range(15)) + list(range(16, 20)))  # every branch but 15: leaf 0 lacks one
    full = SetState(16, {slot: f"c-{slot}" for slot in range(16)}, 15)
    assert not fanin.ends_at_leaf(full)
    store.add_to_set(naming.set_shard_key(SET, 0, 0), 15, "c-15", size=16, workflow="wf", expires_at=2**31)
    assert fanin.join(store, Ledger("wf", 2**31, store_retention(store)), SET, 20, 15, "c-15", leaf_state=full)


def test_a_target_whose_shard_expired_fails_clearly_instead_of_waiting() -> None:
    store = MemoryStore()
    join_all(store, 40, list(range(40)))
    records = store.read(fanin.leaf_keys(SET, 40))
    del records[naming.set_shard_key(SET, 0, 1)]
    with pytest.raises(RetentionExpired, match="shard 1 of 40 branches is gone"):
        fanin.members(records, SET, 40)


def test_retention_keeps_early_objects_to_the_deadline_and_late_ones_through_redelivery() -> None:
    now = [1_000_000.0]
    rule = Retention(ttl_seconds=7 * 86400, redelivery_seconds=6 * 3600, margin_seconds=900, clock=lambda: now[0])
    deadline = rule.deadline()
    assert rule.expires_at(deadline) == deadline
    now[0] = deadline - 3600  # written an hour before the deadline: lives through redelivery
    assert rule.expires_at(deadline) == int(now[0]) + 6 * 3600
    rule.check("wf", deadline)
    now[0] = deadline - 600  # inside the margin: must not start
    with pytest.raises(RetentionExpired, match="outlived its retention"):
        rule.check("wf", deadline)
