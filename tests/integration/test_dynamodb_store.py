"""DynamoDBStore against moto's server over loopback HTTP: what the backend itself promises
beyond the shared contract (tests/integration/test_store_contract.py) — table layout, the
exact requests it sends, batching and retries, URL options, error mapping — and the
`MotoServer` helper that serves it."""

from __future__ import annotations

import copy
import os
import socket
import time
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.expiry import ttl_from_now
from builder.local_stack.process import LocalStackError, MotoServer
from unum_entry.errors import StoreError
from unum_entry.stores import open_store
from unum_entry.stores.dynamodb import BatchRetry, DynamoDBStore

pytestmark = pytest.mark.integration

THREADS = 16
NO_WAIT = BatchRetry(attempts=3, base_delay=0.0, max_delay=0.0)


@pytest.fixture
def calls(dynamodb_store: DynamoDBStore):
    """Every API call the store's client makes: (operation name, parameters)."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        seen.append((model.name, copy.deepcopy(params)))

    events = dynamodb_store.client.meta.events
    events.register("provide-client-params.dynamodb", record, unique_id="unum-test-calls")
    yield seen
    events.unregister("provide-client-params.dynamodb", unique_id="unum-test-calls")


@pytest.fixture
def requests(dynamodb_store: DynamoDBStore):
    """Every HTTP request the store's client sends (retries included), by operation name."""
    sent: list[str] = []

    def count(request: Any, **_: Any) -> None:
        sent.append(request.headers["X-Amz-Target"].decode().split(".")[-1])

    events = dynamodb_store.client.meta.events
    events.register("before-send.dynamodb", count, unique_id="unum-test-requests")
    yield sent
    events.unregister("before-send.dynamodb", unique_id="unum-test-requests")


def fresh_table_name() -> str:
    return f"unum-test-{uuid.uuid4().hex[:12]}"


class PartialBatches:
    """A client wrapper whose batch calls process only the first `take` items of each request
    and hand the rest back as unprocessed (what DynamoDB does under throttling); `scan` pages
    by `page` items. Everything else goes to the real client."""

    def __init__(self, inner: Any, *, take: int, page: int = 2) -> None:
        self.inner = inner
        self.take = take
        self.page = page
        self.sizes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 (boto3's name)
        ((table, request),) = RequestItems.items()
        keys = request["Keys"]
        self.sizes.append(len(keys))
        done, rest = keys[:self.take], keys[self.take:]
        response = (self.inner.batch_get_item(RequestItems={table: {**request, "Keys": done}})
                    if done else {"Responses": {table: []}})
        response["UnprocessedKeys"] = {table: {**request, "Keys": rest}} if rest else {}
        return response

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        ((table, requests),) = RequestItems.items()
        self.sizes.append(len(requests))
        done, rest = requests[:self.take], requests[self.take:]
        response = self.inner.batch_write_item(RequestItems={table: done}) if done else {}
        response["UnprocessedItems"] = {table: rest} if rest else {}
        return response

    def scan(self, **params: Any) -> dict[str, Any]:
        return self.inner.scan(Limit=self.page, **params)


# ---- table layout and management -------------------------------------------------------------

def test_items_follow_the_documented_layout(dynamodb_store: DynamoDBStore) -> None:
    before = int(time.time())
    dynamodb_store.create("c-1", b"\x01\x02", workflow="wf-1", expires_at=ttl_from_now(dynamodb_store))
    first_add = ttl_from_now(dynamodb_store)
    dynamodb_store.add_to_set("s-1", 2, "member-2", size=3, workflow="wf-1", expires_at=first_add)
    # A later add names a later expiry; the shard keeps the one its first add wrote.
    dynamodb_store.add_to_set("s-1", 0, "member-0", size=3, workflow="wf-1", expires_at=first_add + 60)

    def raw(key: str) -> dict[str, Any]:
        return dynamodb_store.client.get_item(
            TableName=dynamodb_store.table, Key={"k": {"S": key}}, ConsistentRead=True)["Item"]

    checkpoint, a_set = raw("c-1"), raw("s-1")
    ttl = int(checkpoint.pop("ttl")["N"])
    assert checkpoint == {"k": {"S": "c-1"}, "w": {"S": "wf-1"}, "t": {"S": "checkpoint"},
                          "v": {"B": b"\x01\x02"}}
    assert before + dynamodb_store.ttl_seconds <= ttl <= int(time.time()) + dynamodb_store.ttl_seconds
    assert int(a_set.pop("ttl")["N"]) == first_add
    assert a_set == {"k": {"S": "s-1"}, "w": {"S": "wf-1"}, "t": {"S": "set"}, "n": {"N": "3"},
                     "m2": {"S": "member-2"}, "m0": {"S": "member-0"}}


def test_ensure_table_creates_an_on_demand_table_with_ttl_and_is_idempotent(
        dynamodb_store: DynamoDBStore) -> None:
    dynamodb_store.ensure_table()  # again, on the table the fixture created
    client, table = dynamodb_store.client, dynamodb_store.table

    description = client.describe_table(TableName=table)["Table"]
    assert description["KeySchema"] == [{"AttributeName": "k", "KeyType": "HASH"}]
    assert description["TableStatus"] == "ACTIVE"
    assert description["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    ttl = client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "ttl"}


def test_ensure_table_enables_ttl_on_an_existing_table(dynamodb_store: DynamoDBStore) -> None:
    client, name = dynamodb_store.client, fresh_table_name()
    client.create_table(TableName=name, KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                        BillingMode="PAY_PER_REQUEST")
    try:
        DynamoDBStore(client, name).ensure_table()
        ttl = client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "ttl"}
    finally:
        client.delete_table(TableName=name)


def test_ensure_table_refuses_ttl_on_another_attribute(dynamodb_store: DynamoDBStore) -> None:
    client, table = dynamodb_store.client, dynamodb_store.table
    client.update_time_to_live(TableName=table,
                               TimeToLiveSpecification={"Enabled": False, "AttributeName": "ttl"})
    client.update_time_to_live(TableName=table,
                               TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"})
    with pytest.raises(StoreError, match="TTL on attribute 'expires'; unum needs it on 'ttl'"):
        dynamodb_store.ensure_table()


# ---- the requests each primitive sends -------------------------------------------------------

def test_a_losing_create_gets_the_winner_from_its_one_put(dynamodb_store: DynamoDBStore, calls) -> None:
    dynamodb_store.create("c-1", b"winner", workflow="wf", expires_at=ttl_from_now(dynamodb_store))
    calls.clear()

    assert dynamodb_store.create("c-1", b"loser", workflow="wf", expires_at=ttl_from_now(dynamodb_store)) == (b"winner", False)

    assert [name for name, _ in calls] == ["PutItem"]  # no second read
    params = calls[0][1]
    assert params["ConditionExpression"] == "attribute_not_exists(k) OR #ttl <= :now"
    assert params["ExpressionAttributeNames"] == {"#ttl": "ttl"}
    assert params["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"


def test_get_many_reads_consistently_in_batches_of_100(dynamodb_store: DynamoDBStore, calls) -> None:
    dynamodb_store.get_many([f"c-{i}" for i in range(250)])

    batches = [params["RequestItems"][dynamodb_store.table] for name, params in calls]
    assert [len(batch["Keys"]) for batch in batches] == [100, 100, 50]
    assert all(batch["ConsistentRead"] is True for batch in batches)


def test_delete_writes_in_batches_of_25(dynamodb_store: DynamoDBStore, calls) -> None:
    dynamodb_store.delete([f"c-{i}" for i in range(60)])

    assert [(name, len(params["RequestItems"][dynamodb_store.table])) for name, params in calls] == [
        ("BatchWriteItem", 25), ("BatchWriteItem", 25), ("BatchWriteItem", 10)]


def test_records_scan_consistently_and_filter_on_the_server(dynamodb_store: DynamoDBStore, calls) -> None:
    dynamodb_store.create("c-1", b"x", workflow="wf-a", expires_at=ttl_from_now(dynamodb_store))
    calls.clear()

    assert [record.key for record in dynamodb_store.records("wf-a")] == ["c-1"]

    ((name, params),) = calls
    assert name == "Scan" and params["ConsistentRead"] is True
    assert params["FilterExpression"] == "#w = :w"
    assert params["ExpressionAttributeValues"] == {":w": {"S": "wf-a"}}


def test_add_to_set_is_one_upsert_that_fills_the_slot_only_if_empty(dynamodb_store: DynamoDBStore, calls) -> None:
    dynamodb_store.add_to_set("s-1", 1, "b", size=2, workflow="wf", expires_at=2_000_000_000)

    ((name, params),) = calls
    assert name == "UpdateItem"
    assert params["UpdateExpression"] == (
        "SET #w = if_not_exists(#w, :w), #t = if_not_exists(#t, :set), #n = if_not_exists(#n, :n), "
        "#ttl = if_not_exists(#ttl, :ttl), #slot = if_not_exists(#slot, :member)")
    assert params["ConditionExpression"] == "attribute_not_exists(k) OR (#t = :set AND #ttl > :now)"
    assert params["ExpressionAttributeNames"] == {"#w": "w", "#t": "t", "#n": "n", "#ttl": "ttl", "#slot": "m1"}
    values = params["ExpressionAttributeValues"]
    assert (values[":n"], values[":ttl"], values[":member"]) == ({"N": "2"}, {"N": "2000000000"}, {"S": "b"})
    assert params["ReturnValues"] == "ALL_NEW"
    assert params["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"


def test_one_request_per_create_and_per_add(dynamodb_store: DynamoDBStore, requests) -> None:
    """What a transition costs on the wire (docs/coordination.md): counted at the HTTP layer."""
    dynamodb_store.create("c-1", b"winner", workflow="wf", expires_at=ttl_from_now(dynamodb_store))
    assert requests == ["PutItem"]
    requests.clear()
    assert dynamodb_store.create("c-1", b"loser", workflow="wf", expires_at=ttl_from_now(dynamodb_store)) == (b"winner", False)
    assert requests == ["PutItem"]  # the winner's bytes come back in the failed put's response
    requests.clear()

    for slot in range(16):  # the first add creates the set, the last one fills it
        state = dynamodb_store.add_to_set("s-1", slot, f"c-{slot}", size=16, workflow="wf", expires_at=ttl_from_now(dynamodb_store))
    assert state.full and requests == ["UpdateItem"] * 16
    requests.clear()
    dynamodb_store.add_to_set("s-1", 3, "c-again", size=16, workflow="wf", expires_at=ttl_from_now(dynamodb_store))  # a duplicate add
    assert requests == ["UpdateItem"]
    requests.clear()

    assert dynamodb_store.get_many(["c-1", "s-1"]) == {"c-1": b"winner"}
    assert requests == ["BatchGetItem"]


def test_a_one_megabyte_value_round_trips_by_reference(dynamodb_store: DynamoDBStore, requests) -> None:
    big = os.urandom(1024 * 1024)

    assert dynamodb_store.create("c-big", big, workflow="wf", expires_at=ttl_from_now(dynamodb_store)) == (big, True)
    assert requests == ["PutItem"] * 4  # three 350 KB chunks, then the checkpoint's manifest
    requests.clear()
    assert dynamodb_store.get("c-big") == big
    assert requests == ["BatchGetItem"] * 2  # the record, then all its chunks
    assert dynamodb_store.create("c-big", os.urandom(1024 * 1024), workflow="wf", expires_at=ttl_from_now(dynamodb_store)) == (big, False)
    assert dynamodb_store.create("c-big", b"small", workflow="wf", expires_at=ttl_from_now(dynamodb_store)) == (big, False)

    item = dynamodb_store.client.get_item(TableName=dynamodb_store.table, Key={"k": {"S": "c-big"}})["Item"]
    assert item["v"]["B"][:1] == b"\xc1" and len(item["v"]["B"]) < 200  # a manifest, not the bytes


def test_moto_enforces_the_item_size_limit(dynamodb_store: DynamoDBStore) -> None:
    """Without storing by reference a 400 KB+ value fails (what the test above relies on)."""
    with pytest.raises(ClientError, match="Item size has exceeded the maximum allowed size"):
        dynamodb_store.client.put_item(TableName=dynamodb_store.table,
                                       Item={"k": {"S": "c-raw"}, "v": {"B": b"x" * 410_000}})


def test_sweep_deletes_only_what_is_still_expired(dynamodb_store: DynamoDBStore, calls) -> None:
    now = int(time.time())
    dynamodb_store.create("c-old", b"x", workflow="wf", expires_at=now - 10)
    dynamodb_store.create("c-live", b"y", workflow="wf", expires_at=ttl_from_now(dynamodb_store))
    calls.clear()

    assert dynamodb_store.sweep() == 1
    assert [name for name, _ in calls] == ["Scan", "DeleteItem"]
    scan, delete = calls[0][1], calls[1][1]
    assert scan["FilterExpression"] == "#ttl <= :now" and scan["ConsistentRead"] is True
    assert delete["ConditionExpression"] == "#ttl = :ttl"
    assert delete["ExpressionAttributeValues"] == {":ttl": {"N": str(now - 10)}}

    # A record recreated after the scan saw the expired one survives the delete.
    dynamodb_store.create("c-gone", b"old", workflow="wf", expires_at=now - 10)
    dynamodb_store.create("c-gone", b"new", workflow="wf", expires_at=ttl_from_now(dynamodb_store))  # replaces the expired record
    assert dynamodb_store._delete_expired("c-gone", now - 10) == 0
    assert dynamodb_store.get("c-gone") == b"new"


def test_an_add_to_an_expired_set_replaces_it(dynamodb_store: DynamoDBStore, requests) -> None:
    now = int(time.time())
    dynamodb_store.add_to_set("s-1", 0, "old", size=2, workflow="wf", expires_at=now - 10)
    requests.clear()

    assert dynamodb_store.add_to_set("s-1", 1, "new", size=3, workflow="wf", expires_at=ttl_from_now(dynamodb_store)).members == {1: "new"}
    assert requests == ["UpdateItem", "DeleteItem", "UpdateItem"]  # refused, expired one removed, again


def test_concurrent_adds_each_see_a_distinct_count_and_exactly_one_sees_full(
        dynamodb_store: DynamoDBStore, race) -> None:
    states = race(THREADS, lambda i: dynamodb_store.add_to_set("s-fan", i, f"m-{i}", size=THREADS, workflow="wf", expires_at=ttl_from_now(dynamodb_store)))

    # UpdateItem with ALL_NEW is atomic (the first one creates the item): the k-th sees k members.
    assert sorted(len(state.members) for state in states) == list(range(1, THREADS + 1))
    assert sum(state.full for state in states) == 1


# ---- batches: unprocessed parts --------------------------------------------------------------

def test_unprocessed_keys_are_resubmitted(dynamodb_store: DynamoDBStore) -> None:
    keys = [f"c-{i:02d}" for i in range(30)]
    for key in keys:
        dynamodb_store.create(key, key.encode(), workflow="wf", expires_at=ttl_from_now(dynamodb_store))
    partial = PartialBatches(dynamodb_store.client, take=7)
    store = DynamoDBStore(partial, dynamodb_store.table, retry=BatchRetry(attempts=10, base_delay=0.0))

    assert store.get_many(keys) == {key: key.encode() for key in keys}
    assert partial.sizes == [30, 23, 16, 9, 2]


def test_unprocessed_deletes_are_resubmitted(dynamodb_store: DynamoDBStore) -> None:
    keys = [f"c-{i:02d}" for i in range(20)]
    for key in keys:
        dynamodb_store.create(key, b"x", workflow="wf", expires_at=ttl_from_now(dynamodb_store))
    partial = PartialBatches(dynamodb_store.client, take=8)
    store = DynamoDBStore(partial, dynamodb_store.table, retry=NO_WAIT)

    store.delete(keys)

    assert dynamodb_store.get_many(keys) == {}
    assert partial.sizes == [20, 12, 4]


def test_a_batch_that_never_completes_raises_store_error(dynamodb_store: DynamoDBStore) -> None:
    stuck = PartialBatches(dynamodb_store.client, take=0)
    store = DynamoDBStore(stuck, dynamodb_store.table, retry=NO_WAIT)

    with pytest.raises(StoreError, match=r"BatchGetItem on table .*: 5 item\(s\) still unprocessed after 3"):
        store.get_many([f"c-{i}" for i in range(5)])
    with pytest.raises(StoreError, match=r"BatchWriteItem on table .*: 4 item\(s\) still unprocessed after 3"):
        store.delete([f"c-{i}" for i in range(4)])
    assert stuck.sizes == [5, 5, 5, 4, 4, 4]


def test_scan_follows_pages(dynamodb_store: DynamoDBStore) -> None:
    for i in range(7):
        dynamodb_store.create(f"c-{i}", b"x", workflow="wf-a" if i % 2 else "wf-b", expires_at=ttl_from_now(dynamodb_store))
    store = DynamoDBStore(PartialBatches(dynamodb_store.client, take=100, page=2), dynamodb_store.table)

    assert sorted(record.key for record in store.records()) == [f"c-{i}" for i in range(7)]
    assert sorted(record.key for record in store.records("wf-a")) == ["c-1", "c-3", "c-5"]


# ---- errors ----------------------------------------------------------------------------------

def test_a_missing_table_is_a_store_error_naming_operation_and_table(dynamodb_store: DynamoDBStore) -> None:
    store = DynamoDBStore(dynamodb_store.client, "unum-no-such-table")

    with pytest.raises(StoreError, match=r"BatchGetItem on table 'unum-no-such-table' failed: "
                                         r"ResourceNotFoundException.*create=1"):
        store.get("c-1")
    with pytest.raises(StoreError, match=r"PutItem on table 'unum-no-such-table'"):
        store.create("c-1", b"x", workflow="wf", expires_at=ttl_from_now(store))
    with pytest.raises(StoreError, match=r"UpdateItem on table 'unum-no-such-table'"):
        store.add_to_set("s-1", 0, "x", size=1, workflow="wf", expires_at=ttl_from_now(store))


def test_add_to_set_on_a_value_key_is_a_store_error(dynamodb_store: DynamoDBStore) -> None:
    dynamodb_store.create("c-1", b"x", workflow="wf", expires_at=ttl_from_now(dynamodb_store))
    with pytest.raises(StoreError, match=r"'c-1' .* holds a checkpoint, not a set"):
        dynamodb_store.add_to_set("c-1", 0, "x", size=1, workflow="wf", expires_at=ttl_from_now(dynamodb_store))


def test_a_foreign_item_is_a_store_error_naming_what_was_found(dynamodb_store: DynamoDBStore) -> None:
    dynamodb_store.client.put_item(TableName=dynamodb_store.table,
                                   Item={"k": {"S": "c-alien"}, "color": {"S": "red"}})
    with pytest.raises(StoreError, match=r"'c-alien' .* is not a unum record .*\['color', 'k'\]"):
        dynamodb_store.get("c-alien")


def test_an_unreachable_endpoint_is_a_store_error() -> None:
    import boto3
    from botocore.config import Config

    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = boto3.session.Session().client(
        "dynamodb", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 1}, proxies={}))  # fail fast: no botocore retries
    store = DynamoDBStore(client, "unum-test-down")

    with pytest.raises(StoreError, match=r"BatchGetItem on table 'unum-test-down' failed: EndpointConnectionError"):
        store.get("c-1")
    client.close()


# ---- opening by URL --------------------------------------------------------------------------

def test_open_store_builds_a_client_from_the_url(moto_server: MotoServer, monkeypatch, tmp_path) -> None:
    # No credentials anywhere: the store must fall back to dummy ones for a local endpoint
    # (and never ask the EC2 metadata service, which is not on loopback).
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    name = fresh_table_name()

    store = open_store(f"dynamodb://{name}?endpoint={moto_server.endpoint}&region=eu-west-1&create=1",
                       ttl_seconds=60)
    try:
        assert isinstance(store, DynamoDBStore) and store.table == name and store.ttl_seconds == 60
        assert store.client.meta.region_name == "eu-west-1"
        assert store.client.meta.endpoint_url == moto_server.endpoint
        assert store.create("c-1", b"x", workflow="wf", expires_at=ttl_from_now(store)) == (b"x", True)
    finally:
        store.client.delete_table(TableName=name)
        store.close()
        store.close()  # idempotent


def test_region_falls_back_to_the_environment_then_us_east_1(moto_server: MotoServer, monkeypatch) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    url = f"dynamodb://unum-test-region?endpoint={moto_server.endpoint}"
    with_env = open_store(url)
    monkeypatch.delenv("AWS_REGION")
    without = open_store(url)
    try:
        assert with_env.client.meta.region_name == "ap-south-1"
        assert without.client.meta.region_name == "us-east-1"
    finally:
        with_env.close()
        without.close()


@pytest.mark.parametrize(("url", "problem"), [
    ("dynamodb://", "malformed"),
    ("dynamodb://t1?endpoint=http://127.0.0.1:1", "table name 't1' is invalid"),
    ("dynamodb://table/extra", "malformed"),
    ("dynamodb://table?endpoint=http://127.0.0.1:1&colour=red", "unknown option.*colour"),
    ("dynamodb://table?region=a&region=b", "region given more than once"),
    ("dynamodb://table?endpoint=http://127.0.0.1:1&create=maybe", "create='maybe' is not a flag"),
])
def test_bad_urls_say_what_is_wrong(url: str, problem: str) -> None:
    with pytest.raises(StoreError, match=problem):
        open_store(url)


def test_close_leaves_a_passed_in_client_open(dynamodb_store: DynamoDBStore) -> None:
    DynamoDBStore(dynamodb_store.client, dynamodb_store.table).close()
    assert dynamodb_store.create("c-1", b"x", workflow="wf", expires_at=ttl_from_now(dynamodb_store)) == (b"x", True)


# ---- the MotoServer helper -------------------------------------------------------------------

def test_moto_server_starts_resets_and_stops() -> None:
    server = MotoServer()
    with pytest.raises(LocalStackError, match="not running"):
        server.endpoint  # noqa: B018 (the property raises)
    with server:
        assert server.running and server.endpoint.startswith("http://127.0.0.1:")
        store = open_store(f"dynamodb://unum-test-reset?endpoint={server.endpoint}&create=1")
        try:
            store.create("c-1", b"x", workflow="wf", expires_at=ttl_from_now(store))
            server.reset()
            with pytest.raises(StoreError, match="ResourceNotFoundException"):
                store.get("c-1")
        finally:
            store.close()
    assert not server.running


def test_moto_server_reports_a_failed_start_with_its_log(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = MotoServer(port=taken.getsockname()[1], log_path=tmp_path / "moto.log")
        with pytest.raises(LocalStackError, match=r"(?s)exited with code .* before answering.*moto\.log"):
            server.start()
    assert not server.running
