"""A join's target reads its members a group of leaf shards at a time (unum_entry.ingress._gather)
on a real SQLite store: every value in slot order across groups, as many store calls as before
for a join of up to 4,096 branches, and a gone leaf or checkpoint in a later group named. A wider
join's values come by one scan of the workflow's rows when the store says it is cheaper
(`Store.scans_cheaper`, `_gather_scanning`), with the same event and the same errors; values
stored by reference and members of another workflow are read all the same."""

from __future__ import annotations

import json
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


def point_reads_only(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "scans_cheaper", lambda workflow, count: False)


def scans(store: SQLiteStore) -> list[int]:
    """Counts the store's scans of a workflow's values."""
    calls = [0]
    scan_values = store.scan_values

    def counted(workflow: str) -> Any:
        calls[0] += 1
        return scan_values(workflow)

    store.scan_values = counted  # type: ignore[method-assign]
    return calls


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


WIDE = GATHER_LEAVES * fanin.SHARD_SLOTS * 2 + 5  # three groups of leaves


@pytest.mark.parametrize("scanning", [True, False], ids=["scan", "point-reads"])
@pytest.mark.parametrize("width", [40, GATHER_LEAVES * fanin.SHARD_SLOTS, WIDE])
def test_a_join_target_gets_every_value_in_slot_order(tmp_path: Path, width: int, scanning: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    store = SQLiteStore.open(tmp_path / "s.db", durability="off")
    env = joined(store, width)
    if not scanning:
        point_reads_only(store, monkeypatch)
    calls, scanned = counting(store), scans(store)
    result = ingress(env, store, "c-target")
    assert isinstance(result, Ready) and result.event == [i * 3 for i in range(width)]
    groups = -(-width // (GATHER_LEAVES * fanin.SHARD_SLOTS))
    # Two batch reads per group: its leaves (the first group's with the checkpoint), then its
    # members' checkpoints. Up to 4,096 branches: the two reads of a join, as before. Wider,
    # scanning: each group's leaves, then one scan for every value.
    wide = groups > 1 and scanning
    assert (calls, scanned) == ([groups] if wide else [2 * groups], [1] if wide else [0])
    store.close()


@pytest.mark.parametrize("scanning", [True, False], ids=["scan", "point-reads"])
def test_a_gone_leaf_or_checkpoint_in_a_later_group_is_named(tmp_path: Path, scanning: bool,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    width = GATHER_LEAVES * fanin.SHARD_SLOTS + 20
    store = SQLiteStore.open(tmp_path / "s.db", durability="off")
    env = joined(store, width)
    if not scanning:
        point_reads_only(store, monkeypatch)
    store.delete([f"c-{width - 3}"])
    with pytest.raises(RetentionExpired, match=f"fan-in input c-{width - 3} is gone"):
        ingress(env, store, "c-target")
    store.delete([naming.set_shard_key(SET, 0, GATHER_LEAVES)])
    with pytest.raises(RetentionExpired, match=f"shard {GATHER_LEAVES} of {width} branches is gone"):
        ingress(env, store, "c-target")
    store.close()


def test_a_scan_reads_values_stored_by_reference_and_members_of_another_workflow(tmp_path: Path) -> None:
    """The scan hands over what it reads of the workflow's own inline values; the rest (a value
    in chunks, a member written under another workflow id) comes by point reads, in its slot."""
    store = SQLiteStore.open(tmp_path / "s.db", durability="off")
    ledger = Ledger(WORKFLOW, 2**31, store_retention(store))
    store.max_value_bytes = 512  # values longer than this are stored in chunks, behind a manifest
    big = {"blob": "x" * 1500}
    for i in range(WIDE):
        value = big if i == 7 else i * 3
        store.create(f"c-{i}", encode(value), workflow="wf-other" if i == 4100 else WORKFLOW, expires_at=2**31)
        fanin.join(store, ledger, SET, WIDE, i, f"c-{i}")
    scanned = scans(store)
    result = ingress(Envelope(workflow=WORKFLOW, gathered=True, gather=Gather(SET, WIDE)), store, "c-target")
    assert scanned == [1]
    assert isinstance(result, Ready) and result.event == [big if i == 7 else i * 3 for i in range(WIDE)]
    store.close()


def test_a_workflow_with_many_more_rows_than_the_join_is_read_key_by_key(tmp_path: Path) -> None:
    """A scan reads every row of the workflow: not when the join's members are fewer than 1 in
    SCAN_SHARE of them."""
    from unum_entry.stores.sqlite import SCAN_MIN, SCAN_SHARE

    store = SQLiteStore.open(tmp_path / "s.db", durability="off")
    for i in range(SCAN_SHARE * SCAN_MIN + 1):
        store.create(f"c-{i}", encode(i), workflow=WORKFLOW, expires_at=2**31)
    assert not store.scans_cheaper(WORKFLOW, SCAN_MIN)
    assert store.scans_cheaper(WORKFLOW, SCAN_MIN + 1)
    assert not store.scans_cheaper(WORKFLOW, SCAN_MIN - 1)  # too few keys to be worth a scan
    assert not store.scans_cheaper("wf-absent", SCAN_MIN - 1)
    store.close()


@pytest.mark.parametrize("order", ["shuffled", "others-first", "shuffled-bytes"])
def test_rows_the_scan_brings_out_of_order_or_not_at_all_are_read_by_key(tmp_path: Path, order: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan keeps at most SCAN_AHEAD rows (SCAN_AHEAD_BYTES of values) ahead of the members'
    turn: members written in an order far from their slots, or after many rows of the workflow
    that are not members, are read by key once the window is full - the event is the same."""
    import random

    from unum_entry import ingress as ingress_module

    if order == "shuffled-bytes":  # the window full by its values' bytes (~5 values), not its rows
        monkeypatch.setattr(ingress_module, "SCAN_AHEAD_BYTES", 5 * len(encode(WIDE * 3)))
    else:
        monkeypatch.setattr(ingress_module, "SCAN_AHEAD", 50)
    store = SQLiteStore.open(tmp_path / "s.db", durability="off")
    ledger = Ledger(WORKFLOW, 2**31, store_retention(store))
    if order == "others-first":
        for i in range(200):
            store.create(f"c-other-{i}", encode(-1), workflow=WORKFLOW, expires_at=2**31)
    slots = list(range(WIDE))
    if order.startswith("shuffled"):
        random.Random(7).shuffle(slots)
    for i in slots:
        store.create(f"c-{i}", encode(i * 3), workflow=WORKFLOW, expires_at=2**31)
        fanin.join(store, ledger, SET, WIDE, i, f"c-{i}")
    calls = counting(store)
    result = ingress(Envelope(workflow=WORKFLOW, gathered=True, gather=Gather(SET, WIDE)), store, "c-target")
    assert isinstance(result, Ready) and result.event == [i * 3 for i in range(WIDE)]
    assert calls[0] > 3  # some members were read by key (beyond the three groups' leaves)
    store.close()


def test_a_store_error_inside_the_scan_fails_the_read_and_a_redelivery_gathers_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan that breaks after some pages raises the store's error (never a short event); on
    the embedded engine the join's target is delivered again and the workflow gets every
    value."""
    from unum_entry.errors import StoreError
    from unum_entry.local.platform import LocalPlatform
    from unum_entry.local.queue import SQLiteQueue
    from unum_entry.workflow import load_workflow

    store = SQLiteStore.open(tmp_path / "s.db", durability="off")
    env = joined(store, WIDE)
    scan_values = store.scan_values
    failures = [1]

    def breaking(workflow: str) -> Any:
        for i, row in enumerate(scan_values(workflow)):
            if i == 2500 and failures[0]:
                failures[0] -= 1
                raise StoreError("disk I/O error (injected in the middle of a scan)")
            yield row

    monkeypatch.setattr(store, "scan_values", breaking)
    with pytest.raises(StoreError, match="injected"):
        ingress(env, store, "c-target")
    assert isinstance(result := ingress(env, store, "c-target"), Ready) and result.event == [i * 3 for i in range(WIDE)]
    store.close()

    folder = tmp_path / "wf"
    for name, code, instructions in [
            ("Split", f"def handler(event, context):\n    return list(range({WIDE}))\n",
             [{"op": "create_set", "function": "Sum", "shape": "aggregate"}, {"op": "map", "function": "Item"}]),
            ("Item", "def handler(event, context):\n    return event * 3\n", [{"op": "fan_in", "function": "Sum"}]),
            ("Sum", "def handler(event, context):\n    return event\n", [])]:
        (folder / name).mkdir(parents=True)
        (folder / name / "app.py").write_text(code)
        (folder / name / "unum-ir.json").write_text(json.dumps(
            {"unum_ir": 1, "function": name, "handler": "app.handler", "instructions": instructions}))
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "m", "entry": "Split"}))
    store = SQLiteStore.open(tmp_path / "engine.db", durability="off")
    scan_values = store.scan_values
    failures[0] = 1
    monkeypatch.setattr(store, "scan_values", breaking)
    with LocalPlatform(load_workflow(folder), store, workers=4, queue=SQLiteQueue(store.database), helpers=0,
                       retry_delay=0.001) as platform:
        result_ = platform.run(None, workflow_id="wf-scan", timeout=120)
    assert failures == [0]  # the scan broke once
    assert result_.failure is None and result_.result == [i * 3 for i in range(WIDE)]
