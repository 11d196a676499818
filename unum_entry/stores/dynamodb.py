"""DynamoDB store: the five primitives over one table, through a boto3 DynamoDB *client*.

Every rule (TTL stamping, expiry on read, what "full" means) lives in `Store`; this module only
turns each primitive into one DynamoDB request (or a bounded series of batch requests).

Table layout: one item per object, partition key only.

=========  ====  ===================================================================
attribute  type  meaning
=========  ====  ===================================================================
``k``      S     the key (``c-…`` checkpoint, ``s-…`` set shard, ``r-…`` result, ``f-…``
                 failure, ``b-…`` chunk of a large value); the table's partition key
``w``      S     workflow (invocation) id the object belongs to; `records()` filters on it
``t``      S     kind: ``Kind.value`` (checkpoint / set / result / failure / chunk / …)
``v``      B     value (opaque bytes, at most `max_value_bytes`; longer values are stored by
                 reference: `unum_entry.stores.base`); every kind but sets
``n``      N     set size (number of slots); sets only
``m0``…    S     set members, one top-level attribute per filled slot (``m<slot>``); sets
                 only. Fan-ins are sharded at 16 slots, so a set stays well under 1 KB
``ttl``    N     expiry, epoch seconds; the table's TTL attribute. DynamoDB deletes expired
                 items lazily (typically within days), so every read and every conditional
                 write also treats ``ttl <= now`` as absent.
=========  ====  ===================================================================

Requests (fault-free): `create` is one conditional PutItem, also when it loses (the winner's
item comes back in the same response: ReturnValuesOnConditionCheckFailure=ALL_OLD);
`add_to_set` is one UpdateItem (an upsert, ReturnValues=ALL_NEW); `get_many` is one
BatchGetItem per 100 keys. A value stored by reference adds one PutItem per 350 KB chunk and
reading it one BatchGetItem.

Application tables (transactional steps, `unum_entry.steps`) are separate tables the user owns,
partition key ``k`` (S), holding ``v`` (B, the item's bytes) and ``ver`` (N, its version); one
`TransactWriteItems` writes the step record here and the application items there.

Open with `open_store("dynamodb://TABLE?endpoint=http://127.0.0.1:PORT&region=us-east-1&create=1")`
or build the client yourself and pass it to `DynamoDBStore(client, "TABLE")`.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# botocore.exceptions is cheap (~10 ms) and this module is itself imported lazily by
# `open_store`; boto3 (~200 ms: it pulls in ssl, hashlib and every service model loader) is
# imported only where a client is built (`_build_client`).
from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from unum_entry.errors import GuardFailed, StoreError, TransactionConflict
from unum_entry.stores.base import AppOp, ClientStore, Guard, Kind, Record, SetState, Versioned
from unum_entry.urls import parse_resource_url

# Attribute names (see the module docstring).
KEY, WORKFLOW, KIND, VALUE, SIZE, TTL = "k", "w", "t", "v", "n", "ttl"
MEMBER_PREFIX = "m"  # slot i of a set is attribute "m<i>"
VERSION = "ver"  # application items only

_CONDITION_FAILED = "ConditionalCheckFailedException"
_GET_CHUNK = 100  # BatchGetItem limit
_DELETE_CHUNK = 25  # BatchWriteItem limit
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")
_URL_OPTIONS = ("endpoint", "region", "create")
DEFAULT_REGION = "us-east-1"
_CONFLICT_ATTEMPTS = 8

# Create-if-absent, where "absent" includes expired-but-not-yet-swept by DynamoDB's TTL.
_CREATE_CONDITION = f"attribute_not_exists({KEY}) OR #ttl <= :now"
# Add to a set: upsert every attribute; a slot (and size, workflow, kind, expiry) keeps its first
# value. Refused (to be handled off the fast path) when the key holds a value or an expired item.
_ADD_UPDATE = ("SET #w = if_not_exists(#w, :w), #t = if_not_exists(#t, :set), #n = if_not_exists(#n, :n), "
               "#ttl = if_not_exists(#ttl, :ttl), #slot = if_not_exists(#slot, :member)")
_ADD_CONDITION = f"attribute_not_exists({KEY}) OR (#t = :set AND #ttl > :now)"
_ROUNDS = 3


@dataclass(frozen=True)
class BatchRetry:
    """How long to keep resubmitting `UnprocessedKeys` / `UnprocessedItems` of a batch call.

    DynamoDB hands back part of a batch when a partition is throttled or a response would
    exceed 16 MB; AWS asks callers to resubmit the rest with exponential backoff. After
    `attempts` calls for one chunk the store gives up with StoreError. (botocore's own retries
    cover whole-request throttling; these cover the partial results it does not retry.)
    """

    attempts: int = 8
    base_delay: float = 0.05
    max_delay: float = 2.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before call number `attempt + 1` (full jitter on the upper half)."""
        ceiling = min(self.max_delay, self.base_delay * (2 ** attempt))
        return ceiling * random.uniform(0.5, 1.0)


class DynamoDBStore(ClientStore):
    """Store over one DynamoDB table (layout in the module docstring).

    `client` is a boto3 DynamoDB client (thread-safe; share one per process). A client passed
    in stays the caller's: `close()` only closes clients that `from_url` built.
    """

    # An item holds at most 400 KB (names and values); this leaves room for the other attributes.
    max_value_bytes = 350_000
    ordered_sets = False  # a set's slots are attributes of one item: no apply order to read
    _client_errors = (ClientError, BotoCoreError)

    def __init__(self, client: Any, table: str, *, retry: BatchRetry = BatchRetry(), **kwargs) -> None:
        super().__init__(client, **kwargs)
        if not _TABLE_NAME.match(table):
            raise StoreError(f"DynamoDB table name {table!r} is invalid: use 3-255 of A-Z a-z 0-9 _ . -")
        self.table = table
        self.retry = retry

    def location(self) -> str:
        meta = getattr(self.client, "meta", None)
        return (f"dynamodb://{self.table}?endpoint={getattr(meta, 'endpoint_url', '')}"
                f"&region={getattr(meta, 'region_name', '')}")

    @classmethod
    def from_url(cls, url: str, *, client: Any = None, **kwargs) -> DynamoDBStore:
        """Open `dynamodb://TABLE?endpoint=URL&region=REGION&create=1`.

        - `endpoint`: e.g. `http://127.0.0.1:5000` for moto / DynamoDB Local; when given and
          no AWS credentials are in the environment, dummy credentials ("testing") are used.
        - `region`: default `$AWS_REGION`, then `$AWS_DEFAULT_REGION`, then us-east-1.
        - `create=1`: create the table (and enable TTL) if it is absent.
        Other keyword arguments go to `DynamoDBStore` / `Store` (`retry`, `ttl_seconds`, `clock`).
        """
        table, options = _parse_url(url)
        create = _flag(url, "create", options.get("create", "0"))
        region = options.get("region") or os.environ.get("AWS_REGION") \
            or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
        store = cls._open(client, lambda: _build_client(endpoint=options.get("endpoint") or None, region=region),
                          table, **kwargs)
        if create:
            store.ensure_table()
        return store

    # ---- table management ----------------------------------------------------------------

    def ensure_table(self) -> None:
        """Create the table if it is absent (on-demand billing, key `k`), wait until it is
        active, and enable TTL on `ttl`. Safe to call concurrently and repeatedly."""
        try:
            self.client.describe_table(TableName=self.table)
        except ClientError as exc:
            if _code(exc) != "ResourceNotFoundException":
                raise self._failed("DescribeTable", exc) from exc
            with self._mapped("CreateTable"):
                try:
                    self.client.create_table(
                        TableName=self.table,
                        KeySchema=[{"AttributeName": KEY, "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": KEY, "AttributeType": "S"}],
                        BillingMode="PAY_PER_REQUEST",
                    )
                except ClientError as race:
                    if _code(race) != "ResourceInUseException":  # another process created it
                        raise
        except BotoCoreError as exc:
            raise self._failed("DescribeTable", exc) from exc
        with self._mapped("DescribeTable (waiting until ACTIVE)"):
            self.client.get_waiter("table_exists").wait(
                TableName=self.table, WaiterConfig={"Delay": 2, "MaxAttempts": 90})
        self._ensure_ttl()

    def _ensure_ttl(self) -> None:
        with self._mapped("DescribeTimeToLive"):
            description = self.client.describe_time_to_live(TableName=self.table)
        current = description.get("TimeToLiveDescription", {})
        if current.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
            if current.get("AttributeName") != TTL:
                raise StoreError(
                    f"DynamoDB table {self.table!r} has TTL on attribute "
                    f"{current.get('AttributeName')!r}; unum needs it on {TTL!r}")
            return
        with self._mapped("UpdateTimeToLive"):
            try:
                self.client.update_time_to_live(
                    TableName=self.table,
                    TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL})
            except ClientError as exc:
                # Two processes enabling at once: the loser is told it is already enabled.
                if _code(exc) != "ValidationException" or "already enabled" not in _message(exc).lower():
                    raise

    # ---- primitives ----------------------------------------------------------------------

    def _create(self, record: Record) -> Record | None:
        # Why the condition (timeline of the race it prevents), for a checkpoint key K:
        #   t0  execution A of invocation I computes output X
        #   t1  execution B of I (an at-least-once redelivery) computes output Y != X
        #   t2  A: put K = X                      -> stored
        #   t3  B: put K = Y   (no condition)     -> overwrites X
        #   t4  A already sent X downstream, B sends Y: one invocation, two outputs.
        # With `attribute_not_exists(k)`, B's put at t3 fails and, thanks to
        # ReturnValuesOnConditionCheckFailure=ALL_OLD, the failure carries A's item: B continues
        # with X, without a second (possibly stale) read. `#ttl <= :now` lets a writer replace an
        # item that has expired but not yet been swept by TTL, exactly as if it were gone.
        item = _item(record)
        for _ in range(_ROUNDS):
            now = int(self._clock())
            with self._mapped("PutItem"):
                try:
                    _conflict_retrying(
                        self.client.put_item,
                        TableName=self.table,
                        Item=item,
                        ConditionExpression=_CREATE_CONDITION,
                        ExpressionAttributeNames={"#ttl": TTL},
                        ExpressionAttributeValues={":now": {"N": str(now)}},
                        ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    )
                    return None
                except ClientError as exc:
                    if _code(exc) != _CONDITION_FAILED:
                        raise
                    old = exc.response.get("Item")
            if old is None:
                # A backend without ReturnValuesOnConditionCheckFailure: read the winner.
                old = self._get_one(record.key)
            if old is not None:
                return self._record(old)
            # The winner was deleted between our put and our read: try again.
        raise StoreError(f"could not create {record.key!r} in DynamoDB table {self.table!r}: "
                         "it keeps appearing and disappearing")

    def _get_many(self, keys: list[str]) -> dict[str, Record]:
        found: dict[str, Record] = {}

        def collect(response: Mapping[str, Any]) -> None:
            for item in response.get("Responses", {}).get(self.table, []):
                record = self._record(item)
                found[record.key] = record

        for chunk in _chunks(keys, _GET_CHUNK):
            request = {self.table: {"Keys": [_key(key) for key in chunk], "ConsistentRead": True}}
            self._batch("BatchGetItem", self.client.batch_get_item, request, "UnprocessedKeys", collect)
        return found

    def _delete(self, keys: list[str]) -> None:
        for chunk in _chunks(keys, _DELETE_CHUNK):
            request = {self.table: [{"DeleteRequest": {"Key": _key(key)}} for key in chunk]}
            self._batch("BatchWriteItem", self.client.batch_write_item, request, "UnprocessedItems",
                        lambda response: None)

    def _add_to_set(self, record: Record, slot: int, member: str) -> SetState:
        # One atomic UpdateItem that upserts: it creates the item when absent and fills the slot
        # only if still empty (`if_not_exists`: a slot keeps its first member, the set its first
        # size, workflow and expiry). ALL_NEW returns the item right after this write, so the
        # adder whose write fills the last slot sees the set full. The condition refuses an item
        # that is a value or has expired; the refusal carries the old item (ALL_OLD): a value is
        # a StoreError, an expired set is deleted (conditionally) and the add is retried.
        key = record.key
        names = {"#w": WORKFLOW, "#t": KIND, "#n": SIZE, "#ttl": TTL, "#slot": f"{MEMBER_PREFIX}{slot}"}
        values = {":w": {"S": record.workflow}, ":set": {"S": Kind.SET.value}, ":n": {"N": str(record.size)},
                  ":ttl": {"N": str(record.expires_at)}, ":member": {"S": member}}
        for _ in range(_ROUNDS):
            now = int(self._clock())
            with self._mapped("UpdateItem"):
                try:
                    response = _conflict_retrying(
                        self.client.update_item,
                        TableName=self.table,
                        Key=_key(key),
                        UpdateExpression=_ADD_UPDATE,
                        ConditionExpression=_ADD_CONDITION,
                        ExpressionAttributeNames=names,
                        ExpressionAttributeValues={**values, ":now": {"N": str(now)}},
                        ReturnValues="ALL_NEW",
                        ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    )
                    state = self._record(response["Attributes"])
                    if state.size is None:  # the update sets it when absent: only a foreign item lacks it
                        raise StoreError(f"set {key!r} in DynamoDB table {self.table!r} has no size "
                                         f"attribute {SIZE!r} after an add")
                    return SetState(size=state.size, members=state.members)
                except ClientError as exc:
                    if _code(exc) != _CONDITION_FAILED:
                        raise
                    old = exc.response.get("Item")
            if old is None:
                old = self._get_one(key)  # a backend without ReturnValuesOnConditionCheckFailure
            if old is None:
                continue  # deleted meanwhile: the next round creates it
            found = self._record(old)
            if found.expires_at > now and found.kind is not Kind.SET:
                raise StoreError(f"store key {key!r} in DynamoDB table {self.table!r} holds a "
                                 f"{found.kind.value}, not a set")
            self._delete_expired(key, found.expires_at)
        raise StoreError(f"could not add to set {key!r} in DynamoDB table {self.table!r}: "
                         "it keeps expiring and reappearing")

    def _sweep(self, now: float) -> int:
        # Scan for expired items (filtered on the server), then delete each one only if it is
        # still the same expired item (a conditional DeleteItem): a record recreated meanwhile
        # survives. DynamoDB's own TTL does the same job for free, eventually.
        params: dict[str, Any] = {
            "TableName": self.table, "ConsistentRead": True, "FilterExpression": "#ttl <= :now",
            "ProjectionExpression": "#k, #ttl", "ExpressionAttributeNames": {"#k": KEY, "#ttl": TTL},
            "ExpressionAttributeValues": {":now": {"N": str(int(now))}},
        }
        return sum(self._delete_expired(item[KEY]["S"], int(item[TTL]["N"])) for item in self._scanned(params))

    def _app_read(self, table: str, keys: list[str]) -> dict[str, Versioned]:
        found: dict[str, Versioned] = {}

        def collect(response: Mapping[str, Any]) -> None:
            for item in response.get("Responses", {}).get(table, []):
                found[item[KEY]["S"]] = Versioned(item[VALUE]["B"], int(item[VERSION]["N"]))

        for chunk in _chunks(keys, _GET_CHUNK):
            request = {table: {"Keys": [_key(key) for key in chunk], "ConsistentRead": True}}
            self._batch("BatchGetItem", self.client.batch_get_item, request, "UnprocessedKeys", collect)
        return found

    def _transact(self, record: Record, ops: list[AppOp], guards: list[Guard]) -> Record | None:
        # One TransactWriteItems: item 0 creates the step record (the same condition as
        # `_create`), the others check or write application items under a version condition.
        # DynamoDB applies all or none, so "effect done" and "effect recorded" cannot diverge;
        # a concurrent execution of the same step fails item 0's condition and gets the record.
        now = int(self._clock())
        items: list[dict[str, Any]] = [{"Put": {
            "TableName": self.table, "Item": _item(record), "ConditionExpression": _CREATE_CONDITION,
            "ExpressionAttributeNames": {"#ttl": TTL}, "ExpressionAttributeValues": {":now": {"N": str(now)}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }}]
        for guard in guards:
            items.append({"ConditionCheck": {"TableName": self.table, "Key": _key(guard.key),
                                             **_guard_condition(guard, now)}})
        for op in ops:
            items.append(_app_operation(op))
        with self._mapped("TransactWriteItems"):
            try:
                self.client.transact_write_items(TransactItems=items)
                return None
            except ClientError as exc:
                if _code(exc) != "TransactionCanceledException":
                    raise
                cancelled = exc.response.get("CancellationReasons", [])
                reasons = [r.get("Code", "None") for r in cancelled]
        if reasons and reasons[0] == "ConditionalCheckFailed":
            old = cancelled[0].get("Item") or self._get_one(record.key)
            if old is not None:
                return self._record(old)
        if "ConditionalCheckFailed" in reasons[1:1 + len(guards)]:
            raise GuardFailed(f"step {record.key!r}: a guard does not hold ({', '.join(reasons)})")
        raise TransactionConflict(f"step {record.key!r}: transaction cancelled ({', '.join(reasons) or 'no reason given'})")

    def _scan(self, workflow: str | None) -> Iterator[Record]:
        params: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True}
        if workflow is not None:
            params.update(FilterExpression="#w = :w", ExpressionAttributeNames={"#w": WORKFLOW},
                          ExpressionAttributeValues={":w": {"S": workflow}})
        return map(self._record, self._scanned(params))

    def _scan_keys(self) -> Iterator[Record]:
        """A scan projecting key, workflow, kind and expiry only (Store.workflows)."""
        params: dict[str, Any] = {"TableName": self.table, "ConsistentRead": True,
                                  "ProjectionExpression": "#k, #w, #t, #ttl",
                                  "ExpressionAttributeNames": {"#k": KEY, "#w": WORKFLOW, "#t": KIND, "#ttl": TTL}}
        return map(self._record, self._scanned(params))

    # ---- helpers -------------------------------------------------------------------------

    def _scanned(self, params: dict[str, Any]) -> Iterator[Mapping[str, Any]]:
        """The items of a Scan with `params`, page by page (a page is read when reached)."""
        params = dict(params)
        while True:
            with self._mapped("Scan"):
                page = self.client.scan(**params)
            yield from page.get("Items", [])
            if not page.get("LastEvaluatedKey"):
                return
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _get_one(self, key: str) -> dict[str, Any] | None:
        with self._mapped("GetItem"):
            return self.client.get_item(TableName=self.table, Key=_key(key), ConsistentRead=True).get("Item")

    def _delete_expired(self, key: str, expires_at: int) -> int:
        """Delete `key` if it still holds the item that expires at `expires_at` (1), else
        nothing (0)."""
        with self._mapped("DeleteItem"):
            try:
                _conflict_retrying(self.client.delete_item, TableName=self.table, Key=_key(key),
                                   ConditionExpression="#ttl = :ttl", ExpressionAttributeNames={"#ttl": TTL},
                                   ExpressionAttributeValues={":ttl": {"N": str(expires_at)}})
                return 1
            except ClientError as exc:
                if _code(exc) != _CONDITION_FAILED:
                    raise
                return 0

    def _batch(self, operation: str, call: Callable[..., Mapping[str, Any]], request: dict[str, Any],
               leftover: str, on_response: Callable[[Mapping[str, Any]], None]) -> None:
        """Send one batch request, resubmitting its unprocessed part with bounded backoff."""
        for attempt in range(self.retry.attempts):
            if attempt:
                time.sleep(self.retry.delay(attempt - 1))
            with self._mapped(operation):
                response = call(RequestItems=request)
            on_response(response)
            request = {table: rest for table, rest in (response.get(leftover) or {}).items()
                       if rest and (not isinstance(rest, Mapping) or rest.get("Keys"))}
            if not request:
                return
        left = sum(len(rest["Keys"]) if isinstance(rest, Mapping) else len(rest) for rest in request.values())
        raise StoreError(f"DynamoDB {operation} on table {self.table!r}: {left} item(s) still "
                         f"unprocessed after {self.retry.attempts} attempts (throttled?)")

    def _record(self, item: Mapping[str, Any]) -> Record:
        try:
            kind = Kind(item[KIND]["S"])
            members = {int(name[1:]): entry["S"] for name, entry in item.items()
                       if name[:1] == MEMBER_PREFIX and name[1:].isdigit()} if kind is Kind.SET else {}
            return Record(
                key=item[KEY]["S"],
                kind=kind,
                workflow=item[WORKFLOW]["S"],
                expires_at=int(item[TTL]["N"]),
                value=item[VALUE]["B"] if VALUE in item else None,
                size=int(item[SIZE]["N"]) if SIZE in item else None,
                members=members,
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise StoreError(f"item {item.get(KEY, {}).get('S', '?')!r} in DynamoDB table {self.table!r} "
                             f"is not a unum record ({type(exc).__name__}: {exc}); "
                             f"found attributes {sorted(item)}") from exc

    def _failed(self, operation: str, exc: BaseException, key: str | None = None) -> StoreError:
        """The StoreError naming the operation and table (botocore errors: `_mapped`)."""
        if isinstance(exc, ClientError):
            detail = f"{_code(exc)}: {_message(exc)}"
            if _code(exc) == "ResourceNotFoundException":
                detail += " (does the table exist? open the store with create=1 or call ensure_table())"
        else:
            detail = f"{type(exc).__name__}: {exc}"
        return StoreError(f"DynamoDB {operation} on table {self.table!r} failed: {detail}")


# ---- module helpers ---------------------------------------------------------------------------

def _item(record: Record) -> dict[str, Any]:
    item: dict[str, Any] = {
        KEY: {"S": record.key},
        WORKFLOW: {"S": record.workflow},
        KIND: {"S": record.kind.value},
        TTL: {"N": str(record.expires_at)},
    }
    if record.value is not None:
        item[VALUE] = {"B": record.value}
    return item


def _conflict_retrying(call: Callable[..., Any], **params: Any) -> Any:
    """A single-item write, resubmitted while it collides with a step transaction
    (`_transact`) that checks or writes the same item: DynamoDB rejects such a write with
    TransactionConflictException, and botocore does not retry that code by itself."""
    for attempt in range(_CONFLICT_ATTEMPTS - 1):
        try:
            return call(**params)
        except ClientError as exc:
            if _code(exc) != "TransactionConflictException":
                raise
        time.sleep(min(1.0, 0.02 * 2 ** attempt) * random.uniform(0.5, 1.0))
    return call(**params)  # the last attempt: its conflict is raised


def _guard_condition(guard: Guard, now: int) -> dict[str, Any]:
    """The condition of a step transaction's guard on a unum item (an expired item is absent)."""
    names: dict[str, str] = {"#ttl": TTL}
    values: dict[str, Any] = {":now": {"N": str(now)}}
    if guard.slot is not None:
        condition = f"attribute_exists({KEY}) AND #ttl > :now AND #t = :set AND attribute_not_exists(#slot)"
        names.update({"#t": KIND, "#slot": f"{MEMBER_PREFIX}{guard.slot}"})
        values[":set"] = {"S": Kind.SET.value}
    elif guard.present:
        condition = f"attribute_exists({KEY}) AND #ttl > :now"
    else:
        condition = f"attribute_not_exists({KEY}) OR #ttl <= :now"
    return {"ConditionExpression": condition, "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}


def _app_operation(op: AppOp) -> dict[str, Any]:
    """One application item of a step transaction: a version check, put or delete."""
    if op.expected == 0:
        condition, values = f"attribute_not_exists({KEY})", {}
    else:
        condition, values = "#ver = :ver", {":ver": {"N": str(op.expected)}}
    names = {"#ver": VERSION} if values else {}
    common: dict[str, Any] = {"TableName": op.table, "ConditionExpression": condition}
    if names:
        common.update(ExpressionAttributeNames=names, ExpressionAttributeValues=values)
    if not op.write:
        return {"ConditionCheck": {**common, "Key": _key(op.key)}}
    if op.value is None:
        return {"Delete": {**common, "Key": _key(op.key)}}
    item = {KEY: {"S": op.key}, VALUE: {"B": op.value}, VERSION: {"N": str(op.expected + 1)}}
    return {"Put": {**common, "Item": item}}


def _key(key: str) -> dict[str, Any]:
    return {KEY: {"S": key}}


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


def _message(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Message", "")


def _parse_url(url: str) -> tuple[str, dict[str, str]]:
    name, options = parse_resource_url(url, scheme="dynamodb", allowed=_URL_OPTIONS, usage="dynamodb://TABLE?endpoint=URL&region=REGION&create=1",
                                       error=lambda message: StoreError(f"DynamoDB store {message}"))
    endpoint = options.get("endpoint")
    if endpoint:
        try:
            parts = urlsplit(endpoint)
            parts.port  # noqa: B018 - raises ValueError on a port that is not a number 0-65535
        except ValueError:
            raise StoreError(f"DynamoDB store URL {url!r}: endpoint {endpoint!r} has no valid port (a number "
                             "0-65535, e.g. http://127.0.0.1:5001)") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise StoreError(f"DynamoDB store URL {url!r}: endpoint {endpoint!r} is not an http(s)://HOST:PORT URL")
    return name, options


def _flag(url: str, name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("", "0", "false", "no"):
        return False
    raise StoreError(f"DynamoDB store URL {url!r}: {name}={raw!r} is not a flag (use 1 or 0)")


def _is_loopback(endpoint: str) -> bool:
    host = urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _build_client(*, endpoint: str | None, region: str) -> Any:
    import boto3  # type: ignore[import-untyped]  # lazy: heavy (see the import note at the top)
    from botocore.config import Config  # type: ignore[import-untyped]

    options: dict[str, Any] = {"region_name": region}
    config: dict[str, Any] = {
        "retries": {"mode": "standard", "max_attempts": 5},
        "max_pool_connections": 32,  # one client is shared by every thread of the process
        "connect_timeout": 5,
        "read_timeout": 30,
    }
    if endpoint:
        options["endpoint_url"] = endpoint
        if _is_loopback(endpoint):
            config["proxies"] = {}  # never route a local emulator through $HTTP_PROXY
        if not (os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")):
            # Emulators accept any credentials, and looking further (IMDS) would leave loopback.
            options.update(aws_access_key_id="testing", aws_secret_access_key="testing")
    # A private session: boto3's default session is module-level state and not thread-safe.
    return boto3.session.Session().client("dynamodb", config=Config(**config), **options)
