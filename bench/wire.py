"""Store requests counted at the wire, and what they are billed, per workflow transition.

    python bench/wire.py [--quick]      # from the repo root; writes bench/wire-report.txt

Needs moto's server (`pip install 'moto[server]'`) and, for part B, `gcloud` with the Firestore
emulator (localstack/setup.d/30-gcp-emulators.sh). Both are started here on free loopback ports
and stopped at the end. `--quick` (~1 min) leaves out the 4,096-item maps and the 100,000-item
map; the report says so.

A. DynamoDB over moto's server. Every HTTP request the store's botocore client sends is counted
   by its X-Amz-Target (a `before-send` hook); the request body and the parsed response give
   each request's item sizes, from which write units (1 KB) and read units (4 KB, strongly
   consistent) are computed with DynamoDB's documented size rules. After the runs the table is
   scanned (not counted) for the storage that the retained items occupy until their TTL.
B. The 100,000-item map on the in-process MemoryStore (CountingStore): wall time, operations
   per transition.
C. Firestore on its emulator. Every gRPC call of the client is counted by method through a
   channel interceptor; the documents each Commit writes and each BatchGetDocuments reads give
   the billed document writes and reads, and the writes per document (the 1 write/s per
   document sustained limit is what matters on real Firestore).

A *transition* is an edge of the workflow graph that was taken: a chain of n functions has n-1,
a fan-out 1 -> k has k, a fan-in k -> 1 has k, a map of m items joined by one aggregate has
m (origin -> item) + m (item -> aggregate). No timing is asserted; bench/README.md explains
every figure.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout, without installing
    sys.path.insert(0, str(REPO))

from bench.run import Pattern, chain, fan_in, fan_out, map_aggregate, write_workflow  # noqa: E402
from unum_entry.local.platform import local_platform  # noqa: E402
from unum_entry.stores import open_store  # noqa: E402
from unum_entry.stores.base import Store  # noqa: E402

# ---- prices and settings ---------------------------------------------------------------------

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
STORAGE_OVERHEAD_BYTES = 100     # DynamoDB bills every stored item 100 bytes of index overhead
RETENTION_DAYS = 7               # the default TTL (unum_entry.retention)
DAYS_PER_MONTH = 730 / 24        # AWS bills GB-months of 730 hours
GB = 1024 ** 3


@dataclass(frozen=True)
class Prices:
    """USD list prices assumed (us-east-1, on-demand; Firestore: a regional location)."""

    write_unit: float = 1.25 / 1e6     # DynamoDB on-demand write request unit
    read_unit: float = 0.25 / 1e6      # DynamoDB on-demand read request unit (strongly consistent, 4 KB)
    storage_gb_month: float = 0.25     # DynamoDB Standard table class
    sfn_transition: float = 25.0 / 1e6  # Step Functions Standard state transition
    fs_write: float = 0.90 / 1e6        # Firestore document write (bench/gcp.py's assumption)
    fs_read: float = 0.30 / 1e6         # Firestore document read
    fs_delete: float = 0.10 / 1e6       # Firestore document delete


@dataclass(frozen=True)
class Shape:
    """A workflow to measure: its pattern, the edges one run takes, how many runs."""

    pattern: Pattern
    edges: int
    runs: int
    width: int | None = None  # the fan-in width, for the per-branch figures

    @property
    def label(self) -> str:
        return self.pattern.label


def chain_shape(n: int, runs: int) -> Shape:
    return Shape(chain(n), n - 1, runs)


def fan_out_shape(k: int, runs: int) -> Shape:
    return Shape(fan_out(k), k, runs)


def fan_in_shape(k: int, runs: int) -> Shape:
    return Shape(fan_in(k), 2 * k, runs, width=k)


def map_shape(m: int, runs: int) -> Shape:
    return Shape(map_aggregate(m), 2 * m, runs, width=m)


@dataclass(frozen=True)
class Settings:
    quick: bool
    dynamodb: tuple[Shape, ...]
    firestore: tuple[Shape, ...]
    memory_map: int | None  # the width of the MemoryStore map, None to skip
    workers: int = 8


def settings_for(quick: bool) -> Settings:
    common = (chain_shape(10, 3), chain_shape(2, 3), fan_out_shape(16, 3), fan_in_shape(16, 3),
              map_shape(16, 3), map_shape(512, 1))
    if quick:
        return Settings(quick=True, dynamodb=common, firestore=common, memory_map=None)
    return Settings(quick=False, dynamodb=(*common, map_shape(4096, 1)),
                    firestore=(*common, map_shape(4096, 1)), memory_map=100_000)


# ---- DynamoDB item sizes (docs: "DynamoDB item sizes and formats") -----------------------------

def number_size(text: str) -> int:
    """1 byte per two significant digits, plus 1 (leading and trailing zeroes trimmed)."""
    mantissa = text.lstrip("+-").lower().split("e")[0]
    digits = mantissa.replace(".", "").lstrip("0")
    if "." in mantissa:
        digits = digits.rstrip("0")
    elif digits:
        digits = digits.rstrip("0") or digits
    return (max(1, len(digits)) + 1) // 2 + 1


def value_size(value: Mapping[str, Any], *, wire: bool) -> int:
    """Size of one typed attribute value (`{"S": ...}`, ...). `wire`: binary values are the
    base64 strings of a request body (else the raw bytes botocore parsed)."""
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return number_size(v)
    if kind == "B":
        return len(base64.b64decode(v)) if wire else len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in v)
    if kind == "NS":
        return sum(number_size(s) for s in v)
    if kind == "BS":
        return sum(len(base64.b64decode(b)) if wire else len(b) for b in v)
    if kind == "M":  # 3 bytes, plus each element's name, value and 1 byte
        return 3 + sum(len(name.encode()) + value_size(x, wire=wire) + 1 for name, x in v.items())
    if kind == "L":
        return 3 + sum(value_size(x, wire=wire) + 1 for x in v)
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def item_size(item: Mapping[str, Any], *, wire: bool = False) -> int:
    """Attribute names plus values, as DynamoDB sizes an item for capacity units."""
    return sum(len(name.encode()) + value_size(v, wire=wire) for name, v in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int) -> int:
    return max(1, math.ceil(size / READ_UNIT_BYTES))


# ---- DynamoDB: counting at the wire ----------------------------------------------------------

WRITE_OPS = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
READ_OPS = ("GetItem", "BatchGetItem", "TransactGetItems", "Query", "Scan")
OP_COLUMNS = ("PutItem", "UpdateItem", "GetItem", "BatchGetItem", "BatchWriteItem", "DeleteItem", "Query/Scan")


class _WireCounter:
    """What the wire counters share: a lock over their counts, and a pause for tooling requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paused = 0

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Tooling requests (outcome scans, storage scans) are not counted."""
        with self._lock:
            self._paused += 1
        try:
            yield
        finally:
            with self._lock:
                self._paused -= 1


class DynamoWire(_WireCounter):
    """Counts the requests a botocore DynamoDB client sends, and their billed units.

    `before-send` (once per HTTP request, retries included) counts requests by operation;
    `before-call` keeps the request body, `after-call` (once per API call, with the parsed
    response, also for error responses) sizes the items it wrote or read."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()      # error responses by "Operation:Code"
        self.write_units: Counter[str] = Counter()  # by item kind ("checkpoint", "set", ...)
        self.write_requests: Counter[str] = Counter()  # item writes by kind
        self.read_units = 0
        self.read_items = 0
        self.read_missing = 0
        self.writes_per_key: Counter[str] = Counter()
        self.checkpoint_units: Counter[str] = Counter()  # write units per checkpoint key
        self.sizes: dict[str, int] = {}  # last known size of each key (deletes are billed on it)

    def attach(self, client: Any) -> None:
        events = client.meta.events
        events.register("before-send.dynamodb", self._before_send)
        events.register("before-call.dynamodb", self._before_call)
        events.register("after-call.dynamodb", self._after_call)

    # -- hooks --

    def _before_send(self, request: Any, **_: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        op = (target.decode() if isinstance(target, bytes) else str(target)).rpartition(".")[2] or "?"
        with self._lock:
            if not self._paused:
                self.requests[op] += 1

    def _before_call(self, params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        with self._lock:
            counted = not self._paused
        if counted:
            body = params.get("body") or b"{}"
            context["unum_wire"] = json.loads(body.decode() if isinstance(body, bytes) else body)

    def _after_call(self, model: Any, parsed: Mapping[str, Any], context: Mapping[str, Any],
                    http_response: Any = None, **_: Any) -> None:
        body = context.get("unum_wire")
        if body is None:
            return
        op = model.name
        error = parsed.get("Error", {}).get("Code") if isinstance(parsed.get("Error"), Mapping) else None
        with self._lock:
            if error:
                self.failed[f"{op}:{error}"] += 1
            handler = getattr(self, f"_on_{op}", None)
            if handler is not None:
                handler(body, parsed, error)

    # -- per operation (called under the lock) --

    def _write(self, key: str, kind: str, size: int, units_factor: int = 1) -> None:
        units = write_units(size) * units_factor
        self.write_units[kind] += units
        if kind == "checkpoint":
            self.checkpoint_units[key] += units
        self.write_requests[kind] += 1
        self.writes_per_key[key] += 1

    def _on_PutItem(self, body: Mapping[str, Any], parsed: Mapping[str, Any], error: str | None) -> None:
        item = body["Item"]
        key, kind = item["k"]["S"], item.get("t", {}).get("S", "?")
        new = item_size(item, wire=True)
        old = item_size(parsed["Item"]) if error and "Item" in parsed else 0
        self._write(key, kind, max(new, old))
        if not error:
            self.sizes[key] = new

    def _on_UpdateItem(self, body: Mapping[str, Any], parsed: Mapping[str, Any], error: str | None) -> None:
        key = body["Key"]["k"]["S"]
        if not error and "Attributes" in parsed:  # ReturnValues=ALL_NEW: the item after the add
            after = parsed["Attributes"]
            size = max(item_size(after), self.sizes.get(key, 0))  # the larger of before and after
            self.sizes[key] = item_size(after)
            kind = after.get("t", {}).get("S", "?")
        elif "Item" in parsed:  # a refused update: billed on the existing item
            size, kind = item_size(parsed["Item"]), parsed["Item"].get("t", {}).get("S", "?")
        else:  # no item in the response: the last size seen (an estimate)
            size, kind = self.sizes.get(key, 0), "?"
        self._write(key, kind, size)

    def _on_DeleteItem(self, body: Mapping[str, Any], parsed: Mapping[str, Any], error: str | None) -> None:
        key = body["Key"]["k"]["S"]
        old = parsed.get("Attributes")
        self._write(key, "delete", item_size(old) if old else self.sizes.pop(key, 0))

    def _on_BatchWriteItem(self, body: Mapping[str, Any], parsed: Mapping[str, Any], error: str | None) -> None:
        for requests in body.get("RequestItems", {}).values():
            for request in requests:
                if "PutRequest" in request:
                    item = request["PutRequest"]["Item"]
                    self._write(item["k"]["S"], item.get("t", {}).get("S", "?"), item_size(item, wire=True))
                else:
                    key = request["DeleteRequest"]["Key"]["k"]["S"]
                    self._write(key, "delete", self.sizes.pop(key, 0))

    def _on_TransactWriteItems(self, body: Mapping[str, Any], parsed: Mapping[str, Any], error: str | None) -> None:
        for entry in body.get("TransactItems", []):  # transactional writes cost twice the units
            ((action, spec),) = entry.items()
            item = spec.get("Item") or spec.get("Key") or {}
            key = item.get("k", {}).get("S", "?")
            size = item_size(item, wire=True) if "Item" in spec else self.sizes.get(key, 0)
            self._write(key, f"transact:{action}", size, units_factor=2)

    def _read(self, items: Sequence[Mapping[str, Any]], missing: int, factor: int = 1) -> None:
        self.read_items += len(items)
        self.read_missing += missing
        # Each item is rounded up to 4 KB on its own; a key that does not exist still costs 1 unit.
        self.read_units += factor * (sum(read_units(item_size(item)) for item in items) + missing)

    def _on_GetItem(self, body: Mapping[str, Any], parsed: Mapping[str, Any], error: str | None) -> None:
        item = parsed.get("Item")
        self._read([item] if item else [], 0 if item else 1)

    def _on_BatchGetItem(self, body: Mapping[str, Any], parsed: Mapping[str, Any], error: str | None) -> None:
        asked = sum(len(spec["Keys"]) for spec in body.get("RequestItems", {}).values())
        found = [item for items in parsed.get("Responses", {}).values() for item in items]
        unprocessed = sum(len(spec.get("Keys", [])) for spec in parsed.get("UnprocessedKeys", {}).values())
        self._read(found, max(0, asked - len(found) - unprocessed))


# ---- Firestore: counting at the wire -----------------------------------------------------------

def _write_target(write: Any) -> tuple[str, str]:
    """(document name, "write" or "delete") of one Write of a Commit request."""
    pb = write if hasattr(write, "WhichOneof") else type(write).pb(write)
    op = pb.WhichOneof("operation")
    if op == "update":
        return pb.update.name, "write"
    if op == "delete":
        return pb.delete, "delete"
    return pb.transform.document, "write"


class FirestoreWire(_WireCounter):
    """A gRPC client interceptor counting the Firestore RPCs a client sends, the documents each
    Commit writes (per document, too) and the documents each BatchGetDocuments asks for."""

    def __init__(self) -> None:
        import grpc

        super().__init__()
        self._grpc = grpc
        self.rpcs: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.document_writes = 0
        self.document_deletes = 0
        self.document_reads = 0
        self.writes_per_document: Counter[str] = Counter()
        self.writes_by_kind: Counter[str] = Counter()  # by key prefix: c, s, r, b, ...

    def interceptor(self) -> Any:
        grpc, wire = self._grpc, self

        class Interceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
            def intercept_unary_unary(self, continuation, details, request):
                counted = wire._count(details.method, request)
                outcome = continuation(details, request)
                if counted:
                    code = outcome.code()
                    if code is not None and code != grpc.StatusCode.OK:
                        with wire._lock:
                            wire.failed[f"{details.method.rpartition('/')[2]}:{code.name}"] += 1
                return outcome

            def intercept_unary_stream(self, continuation, details, request):
                wire._count(details.method, request)
                return continuation(details, request)

        return Interceptor()

    def attach(self, client: Any) -> None:
        """Route `client` (a google.cloud.firestore.Client on the emulator, not used yet)
        through the interceptor."""
        if getattr(client, "_emulator_host", None) is None:
            raise RuntimeError("FirestoreWire counts an emulator client only (FIRESTORE_EMULATOR_HOST)")
        if getattr(client, "_firestore_api_internal", None) is not None:
            raise RuntimeError("attach the counter before the Firestore client sends its first request")
        make_channel = client._emulator_channel
        interceptor = self.interceptor()
        client._emulator_channel = lambda transport: self._grpc.intercept_channel(make_channel(transport), interceptor)

    def _count(self, method: str, request: Any) -> bool:
        name = method.rpartition("/")[2]
        with self._lock:
            if self._paused:
                return False
            self.rpcs[name] += 1
            if name in ("Commit", "BatchWrite"):
                for write in request.writes:
                    document, what = _write_target(write)
                    if what == "delete":
                        self.document_deletes += 1
                    else:
                        self.document_writes += 1
                        self.writes_per_document[document] += 1
                        self.writes_by_kind[document.rpartition("/")[2].partition("-")[0]] += 1
            elif name == "BatchGetDocuments":
                self.document_reads += len(request.documents)
            elif name == "GetDocument":
                self.document_reads += 1
            return True


# ---- running shapes --------------------------------------------------------------------------

@dataclass
class Runs:
    """What `runs` executions of one shape did on one store."""

    shape: Shape
    stats: Counter[str]
    seconds: float

    @property
    def edges(self) -> int:
        return self.shape.edges * self.shape.runs

    @property
    def duplicates(self) -> int:
        return self.stats["deliveries"] - self.stats["committed"]


def run_shape(root: Path, shape: Shape, store: Store, workers: int, paused: Callable[[], Any],
              timeout: float = 900) -> Runs:
    """Run `shape` its number of times on the local platform; check every run succeeded.
    Reading each outcome happens inside `paused()` (tooling, not runtime)."""
    workflow = write_workflow(root, shape.pattern)
    started = time.perf_counter()
    with local_platform(workflow, store, workers=workers) as plat:
        for _ in range(shape.runs):
            workflow_id = plat.start(shape.pattern.input)
            plat.wait_idle(timeout)
            with paused():
                outcome = plat.outcome(workflow_id)
            if outcome.failure is not None or not outcome.complete:
                raise RuntimeError(f"{shape.label}: workflow {workflow_id} did not succeed: "
                                   f"failure={outcome.failure} pending={outcome.pending} dead={plat.dead_letters[:3]}")
        stats = Counter(plat.stats)
    return Runs(shape, stats, time.perf_counter() - started)


@dataclass
class DynamoRow:
    runs: Runs
    wire: DynamoWire
    retained: dict[str, tuple[int, int]]  # kind -> (items, total item bytes) after the runs

    def per_run(self, op: str) -> float:
        if op == "Query/Scan":
            return (self.wire.requests["Query"] + self.wire.requests["Scan"]) / self.runs.shape.runs
        return self.wire.requests[op] / self.runs.shape.runs

    @property
    def other_ops(self) -> dict[str, int]:
        return {op: n for op, n in self.wire.requests.items() if op not in OP_COLUMNS and op not in ("Query", "Scan")}

    @property
    def write_requests(self) -> int:
        return sum(self.wire.requests[op] for op in WRITE_OPS)

    @property
    def read_requests(self) -> int:
        return sum(self.wire.requests[op] for op in READ_OPS)

    @property
    def wu(self) -> int:
        return sum(self.wire.write_units.values())

    def cost_per_million(self, prices: Prices) -> float:
        edges = self.runs.edges
        return 1e6 * (self.wu * prices.write_unit + self.wire.read_units * prices.read_unit) / edges

    @property
    def storage_bytes(self) -> int:
        return sum(n * STORAGE_OVERHEAD_BYTES + size for n, size in self.retained.values())


def dynamodb_table_items(store: Any) -> list[dict[str, Any]]:
    """Every item of the store's table (a paginated Scan)."""
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"TableName": store.table}
    while True:
        page = store.client.scan(**params)
        items.extend(page.get("Items", []))
        if not page.get("LastEvaluatedKey"):
            return items
        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@contextmanager
def counted_dynamodb(table: str, endpoint: str) -> Iterator[tuple[Any, DynamoWire]]:
    """A new DynamoDB table `table` on `endpoint` and its store, with a DynamoWire counting the
    store's requests; at the end the table is deleted (not counted) and the store closed."""
    store = open_store(f"dynamodb://{table}?endpoint={endpoint}&create=1")
    wire = DynamoWire()
    wire.attach(store.client)  # after the table exists: table management is not counted
    try:
        yield store, wire
    finally:
        with wire.paused():
            try:
                store.client.delete_table(TableName=table)
            finally:
                store.close()


def measure_dynamodb(root: Path, endpoint: str, shape: Shape, workers: int) -> DynamoRow:
    with counted_dynamodb(f"unum-wire-{uuid.uuid4().hex[:12]}", endpoint) as (store, wire):
        runs = run_shape(root, shape, store, workers, wire.paused)
        with wire.paused():
            items = dynamodb_table_items(store)
        retained: dict[str, tuple[int, int]] = {}
        for item in items:
            kind = item.get("t", {}).get("S", "?")
            n, size = retained.get(kind, (0, 0))
            retained[kind] = (n + 1, size + item_size(item))
        return DynamoRow(runs, wire, retained)


@dataclass
class FirestoreRow:
    runs: Runs
    wire: FirestoreWire

    def per_t(self, n: float) -> float:
        return n / self.runs.edges

    def cost_per_million(self, prices: Prices) -> float:
        w = self.wire
        return 1e6 * (w.document_writes * prices.fs_write + w.document_reads * prices.fs_read
                      + w.document_deletes * prices.fs_delete) / self.runs.edges

    def max_writes(self, prefix: str = "") -> tuple[int, str]:
        """The most writes any one document took (per run: every run writes its own documents)."""
        best = [(n, doc) for doc, n in self.wire.writes_per_document.items()
                if doc.rpartition("/")[2].startswith(prefix)]
        return max(best, default=(0, "-"))


def measure_firestore(root: Path, project: str, shape: Shape, workers: int) -> FirestoreRow:
    from unum_entry.stores.firestore import FirestoreStore

    store = FirestoreStore.from_url(f"firestore://wire-{uuid.uuid4().hex[:10]}?project={project}")
    wire = FirestoreWire()
    wire.attach(store.client)
    try:
        return FirestoreRow(run_shape(root, shape, store, workers, wire.paused), wire)
    finally:
        store.close()


_SERIAL_MOTO = """
import os, sys
from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple
host, port = sys.argv[1], int(sys.argv[2])
os.environ.setdefault("MOTO_PORT", str(port))
run_simple(host, port, DomainDispatcherApplication(create_backend_app), threaded=False)
"""


@contextmanager
def moto_server(*, threaded: bool = False) -> Iterator[str]:
    """moto's server on a free loopback port; yields its endpoint.

    By default it serves one request at a time: moto's UpdateItem is not atomic (it stores a
    key-only item before applying the update), so on its threaded server a concurrent upsert can
    see that half-made item, which real DynamoDB never shows. `threaded`: `python -m moto.server`
    (builder.local_stack.process.MotoServer, as the tests use it)."""
    from builder.local_stack.process import LOOPBACK, MotoServer, free_port

    if threaded:
        with MotoServer() as server:
            yield server.endpoint
        return
    port = free_port()
    log = tempfile.TemporaryFile()
    process = subprocess.Popen([sys.executable, "-c", _SERIAL_MOTO, LOOPBACK, str(port)], stdin=subprocess.DEVNULL,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"moto server exited with {process.returncode}: {log.read()[-2000:].decode(errors='replace')}")
            try:
                with socket.create_connection((LOOPBACK, port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not listen on {LOOPBACK}:{port} within 30 s") from None
                time.sleep(0.1)
        yield f"http://{LOOPBACK}:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


@contextmanager
def firestore_emulator() -> Iterator[Any]:
    from builder.local_stack.gcp import FirestoreEmulator

    saved = dict(os.environ)
    with FirestoreEmulator() as emulator:
        os.environ.update(emulator.env())
        try:
            yield emulator
        finally:
            os.environ.clear()
            os.environ.update(saved)


# ---- report ---------------------------------------------------------------------------------

def _fmt(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.2f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], first: int = 24) -> list[str]:
    widths = [first] + [max(len(h), *(len(str(r[i])) for r in rows)) + 2 for i, h in enumerate(header) if i]
    line = lambda cells: f"{str(cells[0]):<{widths[0]}}" + "".join(  # noqa: E731
        f"{str(c):>{w}}" for c, w in zip(cells[1:], widths[1:], strict=True))
    out = [line(header), "-" * sum(widths)]
    out += [line(r) for r in rows]
    return out


def storage_cost_per_million(bytes_per_edge: float, prices: Prices) -> float:
    """$ for keeping what a million transitions leave for RETENTION_DAYS."""
    return bytes_per_edge * 1e6 / GB * prices.storage_gb_month * RETENTION_DAYS / DAYS_PER_MONTH


def dynamodb_section(rows: Sequence[DynamoRow], prices: Prices) -> list[str]:
    lines = ["A. DynamoDB (moto server), requests counted at the wire",
             "",
             "A1. Requests per workflow run, by operation (X-Amz-Target of every HTTP request the store's client sent;",
             "    tooling requests - reading the outcome, scanning for storage - are not counted).",
             ""]
    header = ["shape", "edges", *OP_COLUMNS, "other", "lost creates", "dup deliveries"]
    body = []
    for r in rows:
        lost = r.wire.failed["PutItem:ConditionalCheckFailedException"]
        other = ", ".join(f"{k} {v}" for k, v in sorted(r.other_ops.items())) or "0"
        body.append([r.runs.shape.label, r.runs.shape.edges, *(_fmt(r.per_run(op)) for op in OP_COLUMNS), other,
                     _fmt(lost / r.runs.shape.runs), _fmt(r.runs.duplicates / r.runs.shape.runs)])
    lines += _table(header, body)
    lines += ["    lost creates: conditional PutItems refused because the item existed (a duplicate delivery's commit; still",
              "    one billed request). dup deliveries: deliveries that did not commit (several adders saw a shard full and",
              "    each invoked the target, or a redelivery). Per run = total / runs (3 runs of the narrow shapes, 1 of the",
              "    wide ones).",
              "",
              "A2. Per transition (edge taken): requests, billed units, dollars",
              f"    WU = write units (item size rounded up to 1 KB per write; UpdateItem: the item after the add, which is",
              f"    the larger), RU = read units (4 KB per item, strongly consistent; a key not found costs 1).",
              f"    $ = WU x ${prices.write_unit * 1e6:.2f}/M + RU x ${prices.read_unit * 1e6:.2f}/M (DynamoDB on-demand),"
              f" next to Step Functions Standard at ${prices.sfn_transition * 1e6:.2f}/M transitions.",
              ""]
    header = ["shape", "writes/t", "reads/t", "WU/t", "RU/t", "$/M t", "SFN $/M t", "SFN/unum", "max writes/item"]
    body = []
    for r in rows:
        t = r.runs.edges
        cost = r.cost_per_million(prices)
        body.append([r.runs.shape.label, f"{r.write_requests / t:.3f}", f"{r.read_requests / t:.3f}",
                     f"{r.wu / t:.3f}", f"{r.wire.read_units / t:.3f}", f"{cost:.3f}",
                     f"{prices.sfn_transition * 1e6:.2f}", f"{prices.sfn_transition * 1e6 / cost:.0f}x",
                     max(r.wire.writes_per_key.values(), default=0)])
    lines += _table(header, body)
    lines += ["    Step Functions bills every state entered (a chain of n states: n transitions, not n-1), so counting",
              "    edges makes unum's per-transition figures higher, not lower, than a like-for-like comparison.",
              "",
              "A3. Writes by what they write, per run (requests / write units)",
              ""]
    kinds = sorted({k for r in rows for k in r.wire.write_requests})
    header = ["shape", *kinds]
    body = [[r.runs.shape.label, *(f"{_fmt(r.wire.write_requests[k] / r.runs.shape.runs)} / "
                                   f"{_fmt(r.wire.write_units[k] / r.runs.shape.runs)}" for k in kinds)] for r in rows]
    lines += _table(header, body)
    widths = [r for r in rows if r.runs.shape.pattern.name == "map"]
    if widths:
        lines += ["",
                  "A4. Fan-in cost per branch, by width (map of m items + sum): the branch's checkpoint plus its set adds",
                  "    (leaf shard, and the parent shards it completes); the sum's reads per branch.",
                  ""]
        header = ["shape", "ckpt WU/branch", "set adds/branch", "set WU/branch", "WU/branch", "RU/branch",
                  "max shard bytes", "WU/t"]
        body = []
        for r in widths:
            m = r.runs.shape.width * r.runs.shape.runs
            ckpt = branch_checkpoint_units(r) / m
            adds = r.wire.write_requests["set"] / m
            set_wu = r.wire.write_units["set"] / m
            body.append([r.runs.shape.label, f"{ckpt:.3f}", f"{adds:.4f}", f"{set_wu:.4f}", f"{ckpt + set_wu:.3f}",
                         f"{r.wire.read_units / m:.3f}", _max_shard_bytes(r), f"{r.wu / r.runs.edges:.3f}"])
        lines += _table(header, body)
        lines += ["    ckpt WU/branch: write units of the branch checkpoints (all checkpoints but each run's Split, the",
                  "    largest, and Sum) per branch; max shard bytes: the largest set shard item written."]
    lines += ["",
              "A5. Storage retained until the TTL (what a run leaves; scanned after the runs)",
              f"    bytes = item size + {STORAGE_OVERHEAD_BYTES} B per item (DynamoDB's storage overhead); $ = keeping them"
              f" {RETENTION_DAYS} days at ${prices.storage_gb_month:.2f}/GB-month",
              f"    ({RETENTION_DAYS} d = {RETENTION_DAYS / DAYS_PER_MONTH:.3f} month of 730 h; GB = 2^30 B). "
              "Objects expire at max(start + TTL, write + 6 h 15 min),",
              "    then DynamoDB's TTL sweep removes them (typically within days, not billed; storage until then is).",
              ""]
    kinds = sorted({k for r in rows for k in r.retained})
    header = ["shape", *(f"{k} (n x B)" for k in kinds), "B/t", "$/M t storage", "$/M t requests"]
    body = []
    for r in rows:
        cells = []
        for k in kinds:
            n, size = r.retained.get(k, (0, 0))
            cells.append(f"{_fmt(n / r.runs.shape.runs)} x {size / n + STORAGE_OVERHEAD_BYTES:.0f}" if n else "-")
        per_edge = r.storage_bytes / r.runs.edges
        body.append([r.runs.shape.label, *cells, f"{per_edge:.0f}", f"{storage_cost_per_million(per_edge, prices):.4f}",
                     f"{r.cost_per_million(prices):.3f}"])
    lines += _table(header, body)
    return lines


def branch_checkpoint_units(row: DynamoRow) -> int:
    """Write units of a map's branch checkpoints: every checkpoint write but each run's Split
    (its list of items: the largest) and Sum (one small number: 1 unit)."""
    units = sorted(row.wire.checkpoint_units.values(), reverse=True)
    runs = row.runs.shape.runs
    return sum(units[runs:]) - runs


def _max_shard_bytes(row: DynamoRow) -> int:
    return max((size for key, size in row.wire.sizes.items() if key.startswith("s-")), default=0)


def memory_section(width: int, runs: Runs, counts: Counter[str]) -> list[str]:
    t = runs.edges
    ops = sorted(counts)
    lines = [f"B. Map of {width:,} items + sum on MemoryStore (CountingStore; in-process, {runs.shape.runs} run)",
             "",
             f"   wall time {runs.seconds:.1f} s, {t:,} transitions, {t / runs.seconds:,.0f} transitions/s; "
             f"deliveries {runs.stats['deliveries']:,}, committed {runs.stats['committed']:,}, "
             f"replayed {runs.stats.get('replayed', 0):,}",
             "   store operations (CountingStore: a read per key read, a create per create, an add per set add):"]
    lines += [f"     {op:<20}{counts[op]:>12,}{counts[op] / t:>10.4f} /t" for op in ops]
    writes = sum(n for op, n in counts.items() if op.startswith("create_") or op == "add_to_set")
    lines.append(f"     {'writes':<20}{writes:>12,}{writes / t:>10.4f} /t")
    return lines


def firestore_section(rows: Sequence[FirestoreRow], prices: Prices) -> list[str]:
    lines = ["C. Firestore (emulator), RPCs counted at the wire (a gRPC interceptor on the client's channel)",
             "",
             "C1. RPCs per workflow run, by method",
             ""]
    methods = sorted({m for r in rows for m in r.wire.rpcs})
    header = ["shape", "edges", *methods, "errors", "dup deliveries"]
    body = []
    for r in rows:
        errors = ", ".join(f"{k} {_fmt(v / r.runs.shape.runs)}" for k, v in sorted(r.wire.failed.items())) or "0"
        body.append([r.runs.shape.label, r.runs.shape.edges,
                     *(_fmt(r.wire.rpcs[m] / r.runs.shape.runs) for m in methods), errors,
                     _fmt(r.runs.duplicates / r.runs.shape.runs)])
    lines += _table(header, body)
    lines += ["    errors: RPCs answered with an error code (Commit:ALREADY_EXISTS: a create that lost to an earlier",
              "    execution). A set add is a Commit (set with merge, ArrayUnion) and a BatchGetDocuments (the read after).",
              "",
              "C2. Per transition: document writes and reads (each Write of a Commit is one billed document write; each",
              "    document a BatchGetDocuments asks for is counted as one read), writes per document",
              f"    $ = writes x ${prices.fs_write * 1e6:.2f}/M + reads x ${prices.fs_read * 1e6:.2f}/M + deletes x "
              f"${prices.fs_delete * 1e6:.2f}/M (regional list prices, free tier ignored).",
              ""]
    header = ["shape", "RPCs/t", "doc writes/t", "doc reads/t", "deletes/t", "$/M t", "SFN/unum",
              "max writes/doc", "max writes/set doc"]
    body = []
    for r in rows:
        w = r.wire
        cost = r.cost_per_million(prices)
        body.append([r.runs.shape.label, f"{r.per_t(sum(w.rpcs.values())):.3f}", f"{r.per_t(w.document_writes):.3f}",
                     f"{r.per_t(w.document_reads):.3f}", f"{r.per_t(w.document_deletes):.3f}", f"{cost:.3f}",
                     f"{prices.sfn_transition * 1e6 / cost:.0f}x", r.max_writes()[0], r.max_writes("s-")[0]])
    lines += _table(header, body)
    return lines


@dataclass
class Target:
    what: str
    target: str
    measured: str
    met: bool | None  # None: informational


def acceptance(dyn: Sequence[DynamoRow], fs: Sequence[FirestoreRow], memory: tuple[int, Runs, Counter[str]] | None,
               settings: Settings) -> list[Target]:
    by_label = {r.runs.shape.label: r for r in dyn}
    targets: list[Target] = []
    c10, c2 = by_label.get(chain(10).label), by_label.get(chain(2).label)
    if c10 is not None:
        w, rd = c10.write_requests / c10.runs.shape.runs, c10.read_requests / c10.runs.shape.runs
        # the figure is 10 checkpoints + 1 result record; the last function's commit is its
        # result record (docs/coordination.md), so 10 beats it
        targets.append(Target("chain of 10: write requests per run (10 checkpoints + 1 result)", "<= 11",
                              _fmt(w), w <= 11))
        targets.append(Target("chain of 10: read requests per run", "0", _fmt(rd), rd == 0))
        if c2 is not None:
            dw = (w - c2.write_requests / c2.runs.shape.runs) / 8
            dr = (rd - c2.read_requests / c2.runs.shape.runs) / 8
            targets.append(Target("middle chain transition: writes ((chain 10 - chain 2) / 8)", "1", _fmt(dw), dw == 1))
            targets.append(Target("middle chain transition: reads", "0", _fmt(dr), dr == 0))
            conditional = c10.wire.requests["PutItem"] - c2.wire.requests["PutItem"]
            targets.append(Target("middle chain transition: the write is a conditional PutItem", "8 more PutItems / 8",
                                  f"{conditional / c10.runs.shape.runs / 8:.2f}", conditional / c10.runs.shape.runs == 8))
    for r in dyn:
        name = r.runs.shape.pattern.name
        if name in ("fan-out", "fan-in", "map"):
            per = r.write_requests / r.runs.edges
            parts = " + ".join(f"{kind} {n / r.runs.edges:.3f}" for kind, n in sorted(r.wire.write_requests.items()))
            targets.append(Target(f"{r.runs.shape.label}: write requests per transition", "<= 2",
                                  f"{per:.3f} = {parts}", per <= 2))
    maps = [r for r in dyn if r.runs.shape.pattern.name == "map"]
    for r in maps:
        wu = r.wu / r.runs.edges
        if r.runs.shape.width == 4096:
            targets.append(Target("map 4,096: write units per transition", "<= 2", f"{wu:.3f}", wu <= 2))
    if maps:
        per_branch = []
        for r in maps:
            m = r.runs.shape.width * r.runs.shape.runs
            per_branch.append(((branch_checkpoint_units(r) + r.wire.write_units["set"]) / m,
                               r.runs.shape.width))
        values = ", ".join(f"{v:.3f} @{w}" for v, w in per_branch)
        spread = max(v for v, _ in per_branch) - min(v for v, _ in per_branch)
        # 1 checkpoint + 1 leaf add + the parent adds (1/16 + 1/256 + ... < 1/15) + on DynamoDB one
        # claim per shard (the same < 1/15, plus the root's: 1/width), each item <= 1 KB
        targets.append(Target("write units per fan-in branch, by width (bounded: 1 + 1 + 2/15 + 1/width)",
                              "<= 2.133 + 1/width",
                              f"{values} (spread {spread:.3f})",
                              all(v <= 2 + 2 / 15 + 1 / w + 1e-9 for v, w in per_branch)))
    if memory is not None:
        width, runs, counts = memory
        targets.append(Target(f"map of {width:,} on MemoryStore completes", "completes",
                              f"yes, {runs.seconds:.1f} s, "
                              f"{sum(counts.values()) / runs.edges:.3f} ops/t", True))
    elif settings.quick:
        targets.append(Target("map of 100,000 on MemoryStore; maps of 4,096", "(full run only)", "not run (--quick)", None))
    for r in fs:
        if r.runs.shape.pattern.name == "map" and r.runs.shape.width in (512, 4096):
            n, _doc = r.max_writes()
            targets.append(Target(f"Firestore {r.runs.shape.label}: most writes to one document", "<= 16", str(n), n <= 16))
        if r.runs.shape.pattern.name in ("fan-out", "fan-in", "map"):
            per = r.wire.document_writes / r.runs.edges
            names = {"c": "checkpoint", "s": "set", "r": "result", "b": "chunk"}
            parts = " + ".join(f"{names.get(prefix, prefix)} {n / r.runs.edges:.3f}"
                               for prefix, n in sorted(r.wire.writes_by_kind.items()))
            targets.append(Target(f"Firestore {r.runs.shape.label}: document writes per transition", "<= 2",
                                  f"{per:.3f} = {parts}", per <= 2))
    return targets


def acceptance_section(targets: Sequence[Target]) -> list[str]:
    rows = [[t.what, t.target, t.measured, "-" if t.met is None else ("met" if t.met else "NOT MET")] for t in targets]
    lines = ["D. Acceptance figures of the issue: target vs measured", ""]
    lines += _table(["figure", "target", "measured", ""], rows, first=max(len(r[0]) for r in rows) + 2)
    lines += ["   Per transition = all requests of the runs / edges taken. The entry's own checkpoint is written before any",
              "   edge is taken, so it adds 1/edges to every shape: a fan-out to k terminal branches costs per edge exactly",
              "   the branch's checkpoint + its result record (2), plus 1/k for the entry. The per-branch bound is",
              "   1 checkpoint + 1 leaf-shard add + 1/16 + 1/256 + ... parent adds (< 1/15) + on DynamoDB one claim per",
              "   shard (< 1/15 + 1/width for the root; docs/coordination.md), each item under 1 KB: it does not grow",
              "   with the width."]
    return lines


def git_commit() -> str:
    """HEAD, and a fingerprint of uncommitted runtime sources (unum_entry/) if any."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout

    try:
        head = git("rev-parse", "--short", "HEAD").strip()
        changed = sorted(line[3:] for line in git("status", "--porcelain", "--untracked-files=all", "--",
                                                   "unum_entry").splitlines())
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    if not changed:
        return head
    digest = hashlib.sha256()
    for path in changed:
        digest.update(path.encode() + b"\0")
        file = REPO / path
        digest.update(file.read_bytes() if file.is_file() else b"(deleted)")
    return f"{head} + uncommitted changes to {len(changed)} files in unum_entry/ (content sha256 {digest.hexdigest()[:12]})"


def run(settings: Settings, prices: Prices, *, skip_firestore: bool = False, threaded_moto: bool = False) -> str:
    started = time.perf_counter()
    lines = [f"unum wire bench ({'quick' if settings.quick else 'full'}) - {datetime.now(UTC):%Y-%m-%d %H:%M UTC}, "
             f"git {git_commit()}",
             f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs; "
             f"LocalPlatform with {settings.workers} workers, no faults",
             "Transition = an edge of the workflow graph that was taken: chain of n = n-1; fan-out 1->k = k;",
             "fan-in (origin -> k branches -> join) = k + k; map of m items + sum = m + m.",
             "Quick mode: no 4,096-item maps, no 100,000-item map." if settings.quick else
             "Full mode: every shape, including the 4,096-item maps and the 100,000-item map on MemoryStore.",
             ""]
    with tempfile.TemporaryDirectory(prefix="unum-wire-") as tmp:
        root = Path(tmp)
        with moto_server(threaded=threaded_moto) as endpoint:
            dyn = [measure_dynamodb(root / "dynamodb" / str(i), endpoint, shape, settings.workers)
                   for i, shape in enumerate(settings.dynamodb)]
        lines += dynamodb_section(dyn, prices) + [""]
        memory = None
        if settings.memory_map is not None:
            from unum_entry.stores.counting import CountingStore
            from unum_entry.stores.memory import MemoryStore

            counting = CountingStore(MemoryStore())
            runs = run_shape(root / "memory", map_shape(settings.memory_map, 1), counting, settings.workers,
                             _nothing, timeout=3600)
            memory = (settings.memory_map, runs, Counter(counting.counts))
            lines += memory_section(settings.memory_map, runs, memory[2]) + [""]
        fs: list[FirestoreRow] = []
        if not skip_firestore:
            with firestore_emulator() as emulator:
                fs = [measure_firestore(root / "firestore" / str(i), emulator.project, shape, settings.workers)
                      for i, shape in enumerate(settings.firestore)]
            lines += firestore_section(fs, prices) + [""]
    lines += acceptance_section(acceptance(dyn, fs, memory, settings)) + [""]
    lines.append(f"(bench took {time.perf_counter() - started:.0f} s)")
    return "\n".join(lines) + "\n"


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="no 4,096-item maps, no 100,000-item map (~1 min)")
    parser.add_argument("--no-firestore", action="store_true", help="skip part C (no gcloud emulator)")
    parser.add_argument("--threaded-moto", action="store_true",
                        help="moto's own threaded server (its UpdateItem is not atomic: see moto_server)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "wire-report.txt")
    args = parser.parse_args(argv)
    report = run(settings_for(args.quick), Prices(), skip_firestore=args.no_firestore,
                 threaded_moto=args.threaded_moto)
    print(report, end="")
    args.out.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
