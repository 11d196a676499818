"""`Store.transact` / `Store.app_read` (transactional steps) on the real backends: the SQLite store
(one database transaction, across processes), the file store (fcntl lock + redo record, across
processes) and DynamoDB (moto server, TransactWriteItems
across two tables): all-or-nothing, first record wins, version conflicts, guards, and the file
store's recovery from a holder that died at each point of its commit."""

from __future__ import annotations

import multiprocessing
import uuid

import pytest

from tests.support.expiry import ttl_from_now
from unum_entry.codec import decode, encode
from unum_entry.errors import GuardFailed, TransactionConflict
from unum_entry.stores.base import AppOp, Guard
from unum_entry.stores import open_store
from unum_entry.stores.file import FileStore
from unum_entry.stores.sqlite import SQLiteStore

pytestmark = pytest.mark.integration

WF = "wf-tx"


@pytest.fixture(params=["sqlite", "file", "dynamodb"])
def store(request, tmp_path):
    if request.param == "sqlite":
        sqlite_store = SQLiteStore.open(tmp_path / "unum.db")
        yield sqlite_store
        sqlite_store.close()
        return
    if request.param == "file":
        yield FileStore(tmp_path / "store")
        return
    store = request.getfixturevalue("dynamodb_store")
    for table in ("accounts", "ledger"):
        if table not in store.client.list_tables()["TableNames"]:
            store.client.create_table(TableName=table, KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                                      AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                                      BillingMode="PAY_PER_REQUEST")
    yield store


def key() -> str:
    return f"t-{uuid.uuid4().hex}"


def balance(store, account: str):
    item = store.app_read("accounts", [account]).get(account)
    return None if item is None else (decode(item.value), item.version)


def test_record_and_writes_commit_together_across_tables(store):
    account = f"a-{uuid.uuid4().hex[:8]}"
    step = key()
    ops = [AppOp("accounts", account, 0, write=True, value=encode(100)),
           AppOp("ledger", f"{account}-1", 0, write=True, value=encode("opened"))]
    assert store.transact(step, b"rec", ops, workflow=WF, expires_at=ttl_from_now(store)) == (b"rec", True)
    assert store.get(step) == b"rec"
    assert balance(store, account) == (100, 1)
    assert decode(store.app_read("ledger", [f"{account}-1"])[f"{account}-1"].value) == "opened"


def test_an_existing_record_wins_and_nothing_is_written(store):
    account, step = f"a-{uuid.uuid4().hex[:8]}", key()
    store.transact(step, b"first", [AppOp("accounts", account, 0, write=True, value=encode(1))], workflow=WF, expires_at=ttl_from_now(store))
    again = store.transact(step, b"second", [AppOp("accounts", account, 1, write=True, value=encode(2))], workflow=WF, expires_at=ttl_from_now(store))
    assert again == (b"first", False)
    assert balance(store, account) == (1, 1)


def test_a_stale_version_conflicts_and_nothing_is_written(store):
    account, step = f"a-{uuid.uuid4().hex[:8]}", key()
    store.transact(key(), b"", [AppOp("accounts", account, 0, write=True, value=encode(5))], workflow=WF, expires_at=ttl_from_now(store))
    with pytest.raises(TransactionConflict):
        store.transact(step, b"x", [AppOp("accounts", account, 0, write=True, value=encode(6)),
                                    AppOp("ledger", f"{account}-x", 0, write=True, value=encode("x"))], workflow=WF, expires_at=ttl_from_now(store))
    assert store.get(step) is None
    assert balance(store, account) == (5, 1) and store.app_read("ledger", [f"{account}-x"]) == {}


def test_a_read_only_check_and_a_delete(store):
    account, other = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    store.transact(key(), b"", [AppOp("accounts", account, 0, write=True, value=encode(5)),
                                AppOp("accounts", other, 0, write=True, value=encode(7))], workflow=WF, expires_at=ttl_from_now(store))
    store.transact(key(), b"", [AppOp("accounts", other, 1), AppOp("accounts", account, 1, write=True)], workflow=WF, expires_at=ttl_from_now(store))
    assert balance(store, account) is None and balance(store, other) == (7, 1)


def test_guards_on_unum_keys(store):
    store.create("c-input", b"x", workflow=WF, expires_at=ttl_from_now(store))
    state = store.add_to_set("s-gc", 0, "1", size=2, workflow=WF, expires_at=ttl_from_now(store))  # an upsert: creates the 2-slot set
    assert (state.size, dict(state.members), state.full) == (2, {0: "1"}, False)
    ok = [Guard("c-input", present=True), Guard("r-none", present=False), Guard("s-gc", present=True, slot=1)]
    assert store.transact(key(), b"v", [], workflow=WF, guards=ok, expires_at=ttl_from_now(store))[1]
    for bad in (Guard("c-gone", present=True), Guard("c-input", present=False), Guard("s-gc", present=True, slot=0)):
        step = key()
        with pytest.raises(GuardFailed):
            store.transact(step, b"v", [AppOp("accounts", "guarded", 0, write=True, value=b"1")], workflow=WF,
                           guards=[ok[1], bad], expires_at=ttl_from_now(store))
        assert store.get(step) is None and store.app_read("accounts", ["guarded"]) == {}


def test_the_records_of_transactions_are_ordinary_records(store):
    step = key()
    store.transact(step, b"v", [], workflow=WF, expires_at=ttl_from_now(store))
    assert [r.key for r in store.records(WF) if r.key == step] == [step]
    store.delete([step])
    assert store.get(step) is None


def _increment(root: str, n: int, worker: int) -> None:
    store = open_store(root)  # a folder: the file store; a .db file: the SQLite store
    for i in range(n):
        while True:
            found = store.app_read("accounts", ["shared"]).get("shared")
            value, version = (decode(found.value), found.version) if found else (0, 0)
            try:
                store.transact(f"t-w{worker}-{i}", b"", [AppOp("accounts", "shared", version, write=True,
                                                               value=encode(value + 1))], workflow=WF, expires_at=ttl_from_now(store))
                break
            except TransactionConflict:
                continue


@pytest.mark.parametrize("name", ["store", "unum.db"])
def test_transactions_are_isolated_across_processes(tmp_path, name):
    root = str(tmp_path / name)
    open_store(root).close()
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_increment, args=(root, 25, w)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    assert balance(open_store(root), "shared") == (100, 100)


class Died(Exception):
    pass


@pytest.mark.parametrize("dies_in", ["_commit_record", "_apply"])
def test_file_store_recovers_from_a_holder_that_died_mid_commit(tmp_path, monkeypatch, dies_in):
    """Dying before the step record is linked leaves neither; dying after it, both (the next
    lock holder re-applies the redo record)."""
    store = FileStore(tmp_path / "store")
    store.transact(key(), b"", [AppOp("accounts", "x", 0, write=True, value=encode(1))], workflow=WF, expires_at=ttl_from_now(store))
    real = getattr(FileStore, dies_in)

    def dying(self, *args):
        if dies_in == "_apply":
            real(self, args[0][:0])  # apply nothing, then die
        raise Died()

    monkeypatch.setattr(FileStore, dies_in, dying)
    step = key()
    with pytest.raises(Died):
        store.transact(step, b"rec", [AppOp("accounts", "x", 1, write=True, value=encode(2)),
                                      AppOp("accounts", "y", 0, write=True, value=encode(9))], workflow=WF, expires_at=ttl_from_now(store))
    monkeypatch.setattr(FileStore, dies_in, real)
    after = FileStore(tmp_path / "store")  # a fresh handle, as another process would have
    if dies_in == "_commit_record":
        assert after.get(step) is None
        assert balance(after, "x") == (1, 1) and balance(after, "y") is None
    else:
        assert after.get(step) == b"rec"
        assert balance(after, "x") == (2, 2) and balance(after, "y") == (9, 1)
    assert list((tmp_path / "store" / "app" / ".redo").iterdir()) == []
