"""FileStore beyond the shared contract (tests/integration/test_store_contract.py): sets and
creates raced across processes, one small file per set, O(1) file reads per add and per record
scanned, files a crashed writer left incomplete, sweeping and transactions holding large values."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from tests.support.expiry import ttl_from_now
from unum_entry.stores import Kind, SetState
from unum_entry.stores.base import AppOp
from unum_entry.stores import file as file_module
from unum_entry.stores.file import FileStore

pytestmark = pytest.mark.integration

PROCESSES = 4
SETS = 20
SLOTS = 16


def _in_processes(root: str, target) -> list:
    """Run `target(root, worker, start, results)` in PROCESSES forked processes released at once;
    each puts one result. Returns them (in arrival order) once every process exited cleanly."""
    FileStore(root)
    context = multiprocessing.get_context("fork")
    start, results = context.Event(), context.Queue()
    workers = [context.Process(target=target, args=(root, w, start, results)) for w in range(PROCESSES)]
    for worker in workers:
        worker.start()
    start.set()
    collected = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    return collected


def _adder(root: str, worker: int, start, results) -> None:
    store = FileStore(root)
    start.wait()
    full = []
    for s in range(SETS):
        for slot in range(worker, SLOTS, PROCESSES):
            state = store.add_to_set(f"s-{s}", slot, f"m-{slot}", size=SLOTS, workflow="wf", expires_at=ttl_from_now(store))
            assert state.members[slot] == f"m-{slot}"
            if state.full:
                full.append(s)
    results.put(full)


def test_adders_in_several_processes_all_land_and_someone_sees_each_set_full(tmp_path) -> None:
    root = str(tmp_path / "store")
    seen_full = [s for full in _in_processes(root, _adder) for s in full]

    store = FileStore(root)
    everyone = {slot: f"m-{slot}" for slot in range(SLOTS)}
    records = store.read([f"s-{s}" for s in range(SETS)])
    assert all(dict(record.members) == everyone for record in records.values()) and len(records) == SETS
    assert set(seen_full) == set(range(SETS))  # every set was seen full by the adder(s) completing it


def _creator(root: str, worker: int, start, results) -> None:
    store = FileStore(root)
    start.wait()
    results.put([store.create(f"c-{i}", f"w{worker}".encode(), workflow="wf", expires_at=ttl_from_now(store)) for i in range(50)])


def test_creates_in_several_processes_agree_on_one_winner_per_key(tmp_path) -> None:
    root = str(tmp_path / "store")
    outcomes = _in_processes(root, _creator)

    store = FileStore(root)
    for i in range(50):
        per_key = [outcome[i] for outcome in outcomes]
        assert sum(created for _, created in per_key) == 1
        assert {value for value, _ in per_key} == {store.get(f"c-{i}")}


def test_a_set_is_one_small_file(tmp_path) -> None:
    store = FileStore(tmp_path / "store")
    for slot in range(SLOTS):
        store.add_to_set("s-" + "0" * 32, slot, "c-" + f"{slot:032x}", size=SLOTS, workflow="w" * 32, expires_at=ttl_from_now(store))

    assert os.listdir(tmp_path / "store" / "objects") == ["s-" + "0" * 32]
    assert os.path.getsize(tmp_path / "store" / "objects" / ("s-" + "0" * 32)) < 1024
    assert os.listdir(tmp_path / "store" / "tmp") == []  # no scratch file left behind


def test_an_add_and_a_scanned_record_each_read_one_file(tmp_path, monkeypatch) -> None:
    store = FileStore(tmp_path / "store")
    reads: list[int] = []
    original = file_module._read_fd
    monkeypatch.setattr(file_module, "_read_fd", lambda fd: reads.append(fd) or original(fd))

    for slot in range(SLOTS):
        store.add_to_set("s-1", slot, f"m-{slot}", size=SLOTS, workflow="wf", expires_at=ttl_from_now(store))
    assert len(reads) == SLOTS  # one read per add, however full the set already is

    for i in range(300):
        store.create(f"c-{i}", b"x", workflow="wf", expires_at=ttl_from_now(store))
    assert len(reads) == SLOTS  # a first writer reads nothing
    reads.clear()
    assert len(list(store.records("wf"))) == 301
    assert len(reads) == 301


def test_a_file_left_incomplete_by_a_crashed_writer_is_absent_and_taken_over(tmp_path) -> None:
    store = FileStore(tmp_path / "store")
    objects = tmp_path / "store" / "objects"
    (objects / "c-empty").write_bytes(b"")  # created, then the writer died before writing
    store.create("c-cut", b"0123456789", workflow="wf", expires_at=ttl_from_now(store))
    (objects / "c-cut").write_bytes((objects / "c-cut").read_bytes()[:-3])  # died mid-write

    assert store.get_many(["c-empty", "c-cut"]) == {}
    assert list(store.records()) == []
    assert store.create("c-empty", b"new", workflow="wf", expires_at=ttl_from_now(store)) == (b"new", True)
    assert store.create("c-cut", b"new", workflow="wf", expires_at=ttl_from_now(store)) == (b"new", True)
    assert store.create("c-cut", b"late", workflow="wf", expires_at=ttl_from_now(store)) == (b"new", False)


def test_a_member_frame_cut_short_is_ignored_and_repaired_by_the_next_add(tmp_path) -> None:
    store = FileStore(tmp_path / "store")
    path = tmp_path / "store" / "objects" / "s-1"
    store.add_to_set("s-1", 0, "a", size=3, workflow="wf", expires_at=ttl_from_now(store))
    whole = path.read_bytes()
    store.add_to_set("s-1", 1, "b", size=3, workflow="wf", expires_at=ttl_from_now(store))
    path.write_bytes(path.read_bytes()[:len(whole) + 5])  # the adder of slot 1 died mid-write

    assert store.read(["s-1"])["s-1"].members == {0: "a"}
    assert store.add_to_set("s-1", 1, "b", size=3, workflow="wf", expires_at=ttl_from_now(store)) == SetState(size=3, members={0: "a", 1: "b"})
    assert store.add_to_set("s-1", 2, "c", size=3, workflow="wf", expires_at=ttl_from_now(store)).full
    assert store.read(["s-1"])["s-1"].members == {0: "a", 1: "b", 2: "c"}


def test_sweep_removes_files_left_incomplete_for_an_hour(tmp_path) -> None:
    store = FileStore(tmp_path / "store")
    old, fresh = tmp_path / "store" / "objects" / "c-old", tmp_path / "store" / "objects" / "c-fresh"
    old.write_bytes(b"\x00\x00")
    fresh.write_bytes(b"")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))

    assert store.sweep() == 0  # not records: not counted
    assert not old.exists() and fresh.exists()


def test_sweep_removes_a_crashed_writers_old_scratch_files(tmp_path) -> None:
    store = FileStore(tmp_path / "store")
    old, fresh = tmp_path / "store" / "tmp" / "old", tmp_path / "store" / "tmp" / "fresh"
    old.write_bytes(b"x")
    fresh.write_bytes(b"x")
    two_hours_ago = time.time() - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))

    assert store.sweep() == 0
    assert not old.exists() and fresh.exists()


def test_sweep_keeps_a_record_replaced_since_it_expired(tmp_path) -> None:
    now = int(time.time())
    store = FileStore(tmp_path / "store", clock=lambda: now + 200)
    FileStore(tmp_path / "store").create("c-1", b"old", workflow="wf", expires_at=now + 100)
    store.create("c-1", b"new", workflow="wf", expires_at=now + 1000)  # replaces the expired record

    assert store.sweep(now=now + 200) == 0
    assert store.get("c-1") == b"new"


def test_a_transaction_stores_a_large_value_by_reference(tmp_path) -> None:
    store = FileStore(tmp_path / "store")
    store.max_value_bytes = 1000
    big = os.urandom(2500)

    assert store.transact("t-1", big, [AppOp("accounts", "a", 0, write=True, value=b"1")], workflow="wf", expires_at=ttl_from_now(store)) == (big, True)
    assert store.transact("t-1", b"again", [], workflow="wf", expires_at=ttl_from_now(store)) == (big, False)
    assert store.get("t-1") == big
    assert sorted(record.kind.value for record in store.records()) == [Kind.CHUNK.value] * 3 + [Kind.STEP.value]
