"""Firestore store: the five primitives over one collection, through a `google.cloud.firestore.Client`.

Every rule (TTL stamping, expiry on read, what "full" means) lives in `Store`; this module only
turns each primitive into Firestore single-document writes. Coordination uses no transactions:
Firestore (and, much sooner, its emulator) aborts transactions that contend on one document,
while `create`, `delete` and `update` with `ArrayUnion` are single atomic writes that never abort
each other. Only a step transaction (`Store.transact`: exactly-once steps and task tokens,
unum_entry.steps) is a Firestore transaction, retried with backoff a bounded number of times
when it is aborted (`_TX_ATTEMPTS`; then a StoreError: transient, the delivery comes again).

Collection layout: one document per object; the document id is the key.

=============  =========  ==============================================================
field          type       meaning
=============  =========  ==============================================================
(document id)  string     the key (``c-…`` checkpoint, ``s-…`` set shard, ``r-…`` result,
                          ``f-…`` failure, ``b-…`` chunk of a large value)
``w``          string     workflow (invocation) id; `records(workflow)` filters on it
``t``          string     kind: ``Kind.value``; values only (a document without ``t`` that
                          has ``m`` is a set: see below)
``v``          bytes      value, at most `max_value_bytes` (longer values are stored by
                          reference: `unum_entry.stores.base`)
``n``          array      set sizes as ``"SIZE:EXPIRY"`` strings in the order they were first
                          written (sets only); the first live entry is the set's size
``m``          array      set members as ``"SLOT:EXPIRY:MEMBER"`` strings in the order they
                          were first written (sets only); a slot's first live entry wins
``expire_at``  timestamp  expiry; the collection's TTL policy field. Firestore deletes
                          expired documents lazily (typically within a day), so every read
                          and every create also treats ``expire_at <= now`` as absent.
=============  =========  ==============================================================

Sets are upserted without a transaction (Firestore, and much sooner its emulator, aborts
transactions that contend on one document): one `set(..., merge=True)` whose `n` and `m` are
`ArrayUnion`s, then one read. ArrayUnion appends a string only when it is absent and never
reorders, so the first writer of a slot (or of the size) stays first. Each entry carries its
writer's expiry, so entries of an expired set that Firestore has not deleted yet are ignored and
the set starts afresh; `expire_at` is the last adder's expiry. A set document never gets a
``t`` field, so an add that hits a value's key (a programming error) cannot turn the value into
a set: it is refused with StoreError after the write (the value keeps its bytes and kind; its ``w`` and
``expire_at`` are overwritten by the set's).

Requests (fault-free): `create` is one commit (a losing create adds one read); `add_to_set`
one commit and one read; `get_many` one BatchGetDocuments per 300 keys. A value stored by
reference adds one commit per 900 KB chunk and reading it one BatchGetDocuments.

Application tables (transactional steps) are other collections of the same database, one per
table, that the user owns: one document per item, id the item's key, fields ``v`` (bytes) and
``ver`` (its version, an integer >= 1). A step transaction reads the step record, its guards and
its items, then writes the step record and the items, all in one Firestore transaction.

Deploy the TTL policy with
`gcloud firestore fields ttls update expire_at --collection-group=COLLECTION --enable-ttl`
(`python -m builder deploy --target gcp` emits it).

Open with `open_store("firestore://COLLECTION?project=PROJECT&database=(default)")`; the client
honours `FIRESTORE_EMULATOR_HOST` (the emulator) and Application Default Credentials (Cloud Run).
Or build the client yourself and pass it to `FirestoreStore(client, "COLLECTION")`.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Iterator
from typing import Any

from unum_entry.errors import GuardFailed, StoreError, TransactionConflict
from unum_entry.stores.base import AppOp, ClientStore, Guard, Kind, Record, SetState, Versioned
from unum_entry.urls import parse_resource_url

# Field names (see the module docstring).
WORKFLOW, KIND, VALUE, SIZE, MEMBERS, EXPIRE_AT = "w", "t", "v", "n", "m", "expire_at"
VERSION = "ver"  # an application item's version

DEFAULT_COLLECTION = "unum"
_BATCH_LIMIT = 500  # writes per WriteBatch commit
_GET_CHUNK = 300  # documents per BatchGetDocuments call
_CREATE_ROUNDS = 5
_TX_ATTEMPTS = 12       # a step transaction aborted by contention is run again at most this often,
_TX_BACKOFF = 0.02      # after base * 2**attempt seconds (jittered, at most _TX_BACKOFF_CAP)
_TX_BACKOFF_CAP = 1.0
_URL_OPTIONS = ("project", "database")
# Firestore ids: no '/', not '.' or '..', not __reserved__, at most 1500 bytes.
_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9_.~+%-]{1,1500}$")


class FirestoreStore(ClientStore):
    """Store over one Firestore collection (layout in the module docstring).

    `client` is a `google.cloud.firestore.Client` (thread-safe; share one per process). A client
    passed in stays the caller's: `close()` only closes clients that `from_url` built.
    """

    # A document holds at most 1 MiB (field names and values); this leaves room for the rest.
    max_value_bytes = 900_000

    def __init__(self, client: Any, collection: str = DEFAULT_COLLECTION, **kwargs) -> None:
        super().__init__(client, **kwargs)
        if not _COLLECTION_NAME.match(collection) or collection in (".", "..") or _reserved(collection):
            raise StoreError(f"Firestore collection name {collection!r} is invalid: use letters, digits and _ . ~ + % -")
        self.collection = collection
        # google.api_core.exceptions is light (no grpc channel); the client module is not.
        from google.api_core import exceptions

        self._errors = exceptions
        self._client_errors = (exceptions.GoogleAPIError,)

    def location(self) -> str:
        database = getattr(self.client, "_database_string", None) or getattr(self.client, "project", "")
        emulator = getattr(self.client, "_emulator_host", None) or os.environ.get("FIRESTORE_EMULATOR_HOST", "")
        return f"firestore://{self.collection}?database={database}&emulator={emulator}"

    @classmethod
    def from_url(cls, url: str, *, client: Any = None, **kwargs) -> FirestoreStore:
        """Open `firestore://COLLECTION?project=PROJECT&database=DATABASE`.

        - `project`: default `$GOOGLE_CLOUD_PROJECT`, then the credentials' project (Cloud
          Run's metadata server); with `$FIRESTORE_EMULATOR_HOST` set, `demo-test`.
        - `database`: default `(default)`.
        Other keyword arguments go to `FirestoreStore` / `Store` (`ttl_seconds`, `clock`).
        """
        collection, options = _parse_url(url)
        return cls._open(client, lambda: _build_client(project=options.get("project"), database=options.get("database")),
                         collection, **kwargs)

    # ---- primitives ----------------------------------------------------------------------

    def _create(self, record: Record) -> Record | None:
        # `create` is Firestore's create-if-absent: of two executions writing the same
        # checkpoint, exactly one create succeeds and the other gets AlreadyExists, then reads
        # the winner's document (the existing document answers the conflict). An expired
        # document counts as absent: it is deleted with a precondition on its update time (so
        # a concurrent replacer's fresh document is never deleted) and the create is retried.
        ref = self._ref(record.key)
        data = _document(record)
        for _ in range(_CREATE_ROUNDS):
            with self._mapped("create", record.key):
                try:
                    ref.create(data)
                    return None
                except self._errors.AlreadyExists:
                    pass
                snapshot = ref.get()
            if not snapshot.exists:
                continue  # deleted between our create and our read: try again
            existing = self._record(snapshot)
            if existing.expires_at > self._clock():
                return existing
            with self._mapped("delete (expired)", record.key):
                try:
                    ref.delete(option=self.client.write_option(last_update_time=snapshot.update_time))
                except (self._errors.FailedPrecondition, self._errors.NotFound):
                    pass  # someone else replaced or removed it first
        raise StoreError(f"could not create {record.key!r} in Firestore collection {self.collection!r}: "
                         "it keeps appearing and disappearing")

    def _get_many(self, keys: list[str]) -> dict[str, Record]:
        found: dict[str, Record] = {}
        for start in range(0, len(keys), _GET_CHUNK):
            refs = [self._ref(key) for key in keys[start:start + _GET_CHUNK]]
            with self._mapped("get_all", refs[0].id):
                snapshots = list(self.client.get_all(refs))
            for snapshot in snapshots:
                if snapshot.exists:
                    found[snapshot.id] = self._record(snapshot)
        return found

    def _delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), _BATCH_LIMIT):
            batch = self.client.batch()
            for key in keys[start:start + _BATCH_LIMIT]:
                batch.delete(self._ref(key))
            with self._mapped("delete", keys[start]):
                batch.commit()

    def _add_to_set(self, record: Record, slot: int, member: str) -> SetState:
        # One atomic upsert, then a strongly consistent read (module docstring). The read sees
        # our add and maybe later ones: every adder that sees the set full acts, which is safe
        # because what it does (add to the parent shard, invoke the target) is idempotent.
        from google.cloud.firestore import ArrayUnion  # lazy: the client package is heavy

        key = record.key
        ref = self._ref(key)
        with self._mapped("set (merge, ArrayUnion)", key):
            ref.set({
                WORKFLOW: record.workflow,
                EXPIRE_AT: _timestamp(record.expires_at),
                SIZE: ArrayUnion([f"{record.size}:{record.expires_at}"]),
                MEMBERS: ArrayUnion([f"{slot}:{record.expires_at}:{member}"]),
            }, merge=True)
            snapshot = ref.get()
        if not snapshot.exists:
            raise StoreError(f"set {key!r} in Firestore collection {self.collection!r} vanished right after "
                             "an add (deleted behind the store's back?)")
        found = self._record(snapshot)
        if found.kind is not Kind.SET:
            raise StoreError(f"store key {key!r} holds a {found.kind.value}, not a set")
        if found.size is None:
            raise StoreError(f"set {key!r} in Firestore collection {self.collection!r} has expired: the add's "
                             f"expiry {record.expires_at} is already past")
        return SetState(size=found.size, members=found.members)

    def _app_read(self, table: str, keys: list[str]) -> dict[str, Versioned]:
        found: dict[str, Versioned] = {}
        for start in range(0, len(keys), _GET_CHUNK):
            refs = [self._app_ref(table, key) for key in keys[start:start + _GET_CHUNK]]
            with self._mapped(f"get_all ({table})", refs[0].id):
                snapshots = list(self.client.get_all(refs))
            for snapshot in snapshots:
                if snapshot.exists:
                    found[snapshot.id] = _versioned(table, snapshot)
        return found

    def _transact(self, record: Record, ops: list[AppOp], guards: list[Guard]) -> Record | None:
        # One Firestore transaction: read the step record, the guarded keys and the items, decide,
        # then write the step record and the items; Firestore commits all or nothing and aborts
        # it if any document read changed meanwhile. A concurrent execution of the same step
        # reads the record the first one committed (created=False). Contention aborts (the
        # emulator's lock timeouts come much sooner than Firestore's) are run again, bounded.
        import random
        import time

        from google.cloud.firestore import transactional  # lazy: the client package is heavy

        @transactional
        def attempt(transaction: Any) -> Record | None:
            return self._decide(transaction, record, ops, guards)

        aborted: BaseException | None = None
        for round_ in range(_TX_ATTEMPTS):
            with self._mapped("transaction", record.key):
                try:
                    return attempt(self.client.transaction(max_attempts=1))
                except self._errors.Aborted as exc:  # a read inside the transaction lost its lock
                    aborted = exc
                except ValueError as exc:  # the commit was aborted (the client's "failed to commit")
                    if not isinstance(exc.__cause__, self._errors.Aborted):
                        raise
                    aborted = exc.__cause__
            time.sleep(min(_TX_BACKOFF_CAP, _TX_BACKOFF * 2 ** round_) * random.uniform(0.5, 1.0))
        raise StoreError(f"Firestore transaction of step {record.key!r} in collection {self.collection!r} was "
                         f"aborted {_TX_ATTEMPTS} times by contention: {aborted}")

    def _decide(self, transaction: Any, record: Record, ops: list[AppOp], guards: list[Guard]) -> Record | None:
        """The body of a step transaction (`_transact`): reads, checks, writes."""
        ref = self._ref(record.key)
        guard_refs = [self._ref(guard.key) for guard in guards]
        op_refs = [self._app_ref(op.table, op.key) for op in ops]
        wanted = list({r.path: r for r in (ref, *guard_refs, *op_refs)}.values())  # each document once
        snapshots = {snapshot.reference.path: snapshot
                     for snapshot in self.client.get_all(wanted, transaction=transaction)}
        now = self._clock()
        existing = snapshots.get(ref.path)
        if existing is not None and existing.exists:
            found = self._record(existing)
            if found.expires_at > now:
                return found
        for guard, guard_ref in zip(guards, guard_refs, strict=True):
            snapshot = snapshots.get(guard_ref.path)
            held = self._record(snapshot) if snapshot is not None and snapshot.exists else None
            if not _guard_holds(guard, held, now):
                raise GuardFailed(f"step {record.key!r}: guard on {guard.key!r} does not hold")
        for op, op_ref in zip(ops, op_refs, strict=True):
            snapshot = snapshots.get(op_ref.path)
            version = _versioned(op.table, snapshot).version if snapshot is not None and snapshot.exists else 0
            if version != op.expected:
                raise TransactionConflict(f"application item {op.table}/{op.key} changed since it was read "
                                          f"(version {version}, expected {op.expected})")
        transaction.set(ref, _document(record))
        for op, op_ref in zip(ops, op_refs, strict=True):
            if not op.write:
                continue
            if op.value is None:
                transaction.delete(op_ref)
            else:
                transaction.set(op_ref, {VALUE: op.value, VERSION: op.expected + 1})
        return None

    def _sweep(self, now: float) -> int:
        # Query the expired documents, then delete each only if it is unchanged since the query
        # (a precondition on its update time): a document recreated or added to meanwhile
        # survives. Firestore's TTL policy does the same job for free, eventually.
        from google.cloud.firestore_v1.base_query import FieldFilter

        query = self.client.collection(self.collection).where(filter=FieldFilter(EXPIRE_AT, "<=", _timestamp(now)))
        with self._mapped("query (expired)", "*"):
            snapshots = list(query.stream())
        deleted = 0
        for snapshot in snapshots:
            with self._mapped("delete (expired)", snapshot.id):
                try:
                    snapshot.reference.delete(option=self.client.write_option(last_update_time=snapshot.update_time))
                    deleted += 1
                except (self._errors.FailedPrecondition, self._errors.NotFound):
                    pass  # changed or removed since the query
        return deleted

    def _scan(self, workflow: str | None) -> Iterator[Record]:
        query = self.client.collection(self.collection)
        if workflow is not None:
            from google.cloud.firestore_v1.base_query import FieldFilter

            query = query.where(filter=FieldFilter(WORKFLOW, "==", workflow))
        return self._streamed(query, workflow or "*")

    def _scan_keys(self) -> Iterator[Record]:
        """A query projecting every field but the value (Store.workflows); a set keeps its
        size and member entries, which carry the expiries its own expiry is read from."""
        query = self.client.collection(self.collection).select([WORKFLOW, KIND, SIZE, MEMBERS, EXPIRE_AT])
        return self._streamed(query, "*")

    def _streamed(self, query: Any, label: str) -> Iterator[Record]:
        with self._mapped("query", label):
            snapshots = list(query.stream())
        return map(self._record, snapshots)

    # ---- helpers -------------------------------------------------------------------------

    def _ref(self, key: str) -> Any:
        if not key or "/" in key or key in (".", "..") or _reserved(key) or len(key.encode()) > 1500:
            raise StoreError(f"store key {key!r} cannot be a Firestore document id "
                             "(no '/', not '.' or '..', not __name__, at most 1500 bytes)")
        return self.client.collection(self.collection).document(key)

    def _app_ref(self, table: str, key: str) -> Any:
        if not _COLLECTION_NAME.match(table) or table in (".", "..") or _reserved(table):
            raise StoreError(f"application table {table!r} cannot be a Firestore collection name: use letters, "
                             "digits and _ . ~ + % -")
        if not key or "/" in key or key in (".", "..") or _reserved(key) or len(key.encode()) > 1500:
            raise StoreError(f"application item key {key!r} cannot be a Firestore document id "
                             "(no '/', not '.' or '..', not __name__, at most 1500 bytes)")
        return self.client.collection(table).document(key)

    def _record(self, snapshot: Any) -> Record:
        doc = snapshot.to_dict() or {}
        try:
            if KIND in doc or MEMBERS not in doc:
                return Record(key=snapshot.id, kind=Kind(doc[KIND]), workflow=doc[WORKFLOW],
                              expires_at=int(doc[EXPIRE_AT].timestamp()),
                              value=bytes(doc[VALUE]) if VALUE in doc else None)
            return _set_record(snapshot.id, doc, self._clock())
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise StoreError(f"document {snapshot.id!r} in Firestore collection {self.collection!r} is not a "
                             f"unum record ({type(exc).__name__}: {exc}); found fields {sorted(doc)}") from exc

    def _failed(self, operation: str, exc: BaseException, key: str | None = None) -> StoreError:
        """The StoreError naming the call (google.api_core errors: `_mapped`)."""
        return StoreError(f"Firestore {operation} of {key!r} in collection {self.collection!r} failed: "
                          f"{type(exc).__name__}: {exc}")


# ---- module helpers ---------------------------------------------------------------------------

def _document(record: Record) -> dict[str, Any]:
    doc: dict[str, Any] = {
        WORKFLOW: record.workflow,
        KIND: record.kind.value,
        EXPIRE_AT: _timestamp(record.expires_at),
    }
    if record.value is not None:
        doc[VALUE] = record.value
    return doc


def _versioned(table: str, snapshot: Any) -> Versioned:
    doc = snapshot.to_dict() or {}
    try:
        return Versioned(bytes(doc[VALUE]), int(doc[VERSION]))
    except (KeyError, ValueError, TypeError) as exc:
        raise StoreError(f"document {snapshot.id!r} in application table {table!r} is not an application item "
                         f"(fields {sorted(doc)}; expected {VALUE!r} bytes and {VERSION!r} a version)") from exc


def _guard_holds(guard: Guard, found: Record | None, now: float) -> bool:
    """Whether a step transaction's guard holds, given the guarded key's record (None: absent)."""
    if found is not None and found.expires_at <= now:
        found = None
    if guard.slot is not None:
        return found is not None and found.kind is Kind.SET and found.size is not None and guard.slot not in found.members
    return (found is not None) == guard.present


def _timestamp(epoch: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)


def _set_record(key: str, doc: dict[str, Any], now: float) -> Record:
    """A set document as a Record: entries whose expiry has passed are ignored (they belong to
    an expired earlier set of the same key); the first live size and the first live entry of
    each slot win. A set without a live size entry has expired as a whole."""
    sizes: list[int] = []
    first_expiry: int | None = None
    latest = 0
    for entry in doc.get(SIZE, []):
        size, sep, expiry = str(entry).partition(":")
        if not sep:
            raise ValueError(f"set size entry {entry!r} is not SIZE:EXPIRY")
        latest = max(latest, int(expiry))
        if int(expiry) > now:
            sizes.append(int(size))
            if first_expiry is None:
                first_expiry = int(expiry)
    members: dict[int, str] = {}
    for entry in doc.get(MEMBERS, []):
        slot, member_expiry, member = _split_member(str(entry))
        if member_expiry > now:
            members.setdefault(slot, member)
    # The set's expiry is its creator's (the first live size entry, in apply order), as the
    # store contract says. The document's `expire_at` (what Firestore's TTL policy deletes by)
    # is the latest adder's, since a merge-write cannot keep a field's first value: callers must
    # give every add of one set the same expiry (the runtime uses the workflow's deadline).
    expires_at = first_expiry if first_expiry is not None else min(latest, int(now))
    return Record(key=key, kind=Kind.SET, workflow=doc[WORKFLOW], expires_at=expires_at,
                  size=sizes[0] if sizes else None, members=members)


def _split_member(entry: str) -> tuple[int, int, str]:
    """`"3:1700000000:c-ab"` -> (3, 1700000000, "c-ab")."""
    parts = entry.split(":", 2)
    if len(parts) != 3:
        raise ValueError(f"set member entry {entry!r} is not SLOT:EXPIRY:MEMBER")
    return int(parts[0]), int(parts[1]), parts[2]


def _reserved(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _parse_url(url: str) -> tuple[str, dict[str, str]]:
    name, options = parse_resource_url(url, scheme="firestore", allowed=_URL_OPTIONS, usage="firestore://COLLECTION?project=PROJECT&database=DATABASE",
                                       error=lambda message: StoreError(f"Firestore store {message}"))
    return name, {k: v for k, v in options.items() if v}


def _build_client(*, project: str | None, database: str | None) -> Any:
    # Lazy: google.cloud.firestore pulls in grpc and protobuf (~300 ms of a cold start).
    from google.cloud import firestore

    if project is None:
        project = os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GCLOUD_PROJECT")
        if project is None and os.environ.get("FIRESTORE_EMULATOR_HOST"):
            project = "demo-test"
    try:
        return firestore.Client(project=project, database=database)
    except Exception as exc:  # google.auth.exceptions.DefaultCredentialsError and friends
        raise StoreError(f"cannot create a Firestore client (project {project!r}, database {database!r}): "
                         f"{type(exc).__name__}: {exc}; set GOOGLE_CLOUD_PROJECT and credentials, or "
                         "FIRESTORE_EMULATOR_HOST for the emulator") from exc

