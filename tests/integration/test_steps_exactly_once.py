"""Exactly-once side effects under faults: steps, transactional effects and compensations, on the
file store and on DynamoDB (moto server over HTTP).

The workflow `ledger`: A → map W over 3 items → fan-in Sum → End. Every function is `@durable`:
- a transactional step adds 1 to a counter in a separate application table (`counters`) and
  registers a compensation that subtracts it again and appends itself to an ordered
  compensation log (`undo`, also transactional);
- a plain step appends to an *external* append-only sink (a folder outside the store) with
  `ctx.step_id` as idempotency key (the sink keeps the first entry per key, and counts every
  call so the test can see that duplicates did reach it); its compensation appends `<key>:undo`;
- `ctx.now()`, `ctx.uuid4()` and `ctx.random()` go into the sink entry and the output.

Faults: crashes at every step boundary (runtime and step points), duplicate and concurrent
duplicate deliveries, delayed/reordered deliveries. Checks: the counter is exactly the number of
step executions of one fault-free run; the sink holds exactly one entry per step, whose recorded
non-determinism equals what the workflow output carries; on abort (ctx.abort or a handler that
keeps failing) the counter is back to 0, every sink entry has one undo, and the undo order is the
reverse completion order; nothing but the results (or the documented failure leftovers) stays.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.tracing import RecommitWatch
from unum_entry import naming
from unum_entry.codec import decode
from unum_entry.envelope import Envelope, Frame
from unum_entry.hooks import FaultPoint, StepPoint
from unum_entry.local.faults import FaultInjector, FaultRates
from unum_entry.local.platform import LocalPlatform
from unum_entry.runtime import Runtime, load_handler
from unum_entry.stores import open_store
from unum_entry.stores.base import Kind
from unum_entry.stores.file import FileStore
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.integration

PRELUDE = '''
import json, os, threading
from unum_entry.steps import durable

_lock = threading.Lock()


def inc(tx, run, who):
    """The transactional effect: counter += 1 (returns the new value)."""
    n = tx.get("counters", run, 0) + 1
    tx.put("counters", run, n)
    return n


def dec(tx, after, run, who):
    """Compensation of inc: counter -= 1 and append `who` to the ordered undo log."""
    tx.put("counters", run, tx.get("counters", run) - 1)
    head = tx.get("undo", run + ":head", 0)
    tx.put("undo", f"{run}:{head}", who + "/inc")
    tx.put("undo", run + ":head", head + 1)


def sink_append(sink, key, entry):
    """An outside service that deduplicates by idempotency key (first entry per key wins)."""
    with _lock, open(os.path.join(sink, "calls"), "a") as calls:
        calls.write(key + "\\n")
    try:
        fd = os.open(os.path.join(sink, "entries", key.replace("/", "_")), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return key
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(entry))
    return key


def sink_undo(key, sink, who):
    """Compensation of the sink append: an undo entry under its own key."""
    sink_append(sink, key + ":undo", {"undo": who})


def effects(event, ctx, who):
    run, sink = event["run"], event["sink"]
    ctx.transact("inc", inc, run, who, compensate=dec)
    seen = {"t": ctx.now(), "u": ctx.uuid4(), "r": ctx.random()}
    ctx.step("log", lambda sink, who: sink_append(sink, ctx.step_id, {"who": who, **seen}),
             compensate=sink_undo, sink=sink, who=who)
    return seen
'''

FUNCTIONS = {
    "A": ("return {**event, 'items': [0, 1, 2], 'seen': {'A': effects(event, ctx, 'A')}}",
          [{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "W", "items": "$.items"}]),
    "W": ("return {'i': event, 'seen': effects(CTX_EVENT, ctx, f'W{ctx.index}')}",
          [{"op": "fan_in", "function": "Sum"}]),
    "Sum": ("return {'ws': event, 'seen': effects(CTX_EVENT, ctx, 'Sum')}",
            [{"op": "invoke", "function": "End"}]),
    "End": ("seen = effects(CTX_EVENT, ctx, 'End')\n"
            "    if CTX_EVENT.get('abort') == 'abort':\n"
            "        ctx.abort('Declined', 'the test said so')\n"
            "    if CTX_EVENT.get('abort') == 'raise':\n"
            "        raise RuntimeError('End keeps failing')\n"
            "    return {'ws': event['ws'], 'sum': event['seen'], 'end': seen}", []),
}
STEP_FUNCTIONS = ["A", "W0", "W1", "W2", "Sum", "End"]


def write_ledger(root: Path, run_config: dict) -> object:
    """The ledger workflow; `run_config` (run id, sink, abort mode) is baked into the code as
    CTX_EVENT for the functions whose input is another function's output."""
    sources = {}
    for name, (body, instructions) in FUNCTIONS.items():
        code = (PRELUDE + f"\nCTX_EVENT = {run_config!r}\n\n@durable\ndef handler(event, ctx):\n    {body}\n")
        sources[name] = FunctionSource(code, instructions, {"max_attempts": 2} if name == "End" else {})
    return write_workflow(root, name="ledger", entry="A", functions=sources)


def make_sink(root: Path) -> Path:
    (root / "entries").mkdir(parents=True)
    (root / "calls").write_text("")
    return root


def sink_entries(sink: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in (sink / "entries").iterdir()}


STEP_RATES = {**{p: 0.15 for p in FaultPoint}, **{p: 0.2 for p in StepPoint}}
SCHEDULES = [
    FaultRates(crash=STEP_RATES, duplicate=0.2, concurrent_duplicate=0.15, delay=0.2, max_crashes=25),
    FaultRates(crash={p: 0.35 for p in StepPoint}, concurrent_duplicate=0.3, max_crashes=25),
    FaultRates(duplicate=0.5, concurrent_duplicate=0.4, delay=0.5),
]


def run_ledger(tmp: Path, store, seed: int, rates: FaultRates, abort: str | None) -> dict:
    """One faulty run of the ledger workflow and every check; returns fault counts."""
    run = f"run-{seed}-{uuid.uuid4().hex[:6]}"
    sink = make_sink(tmp / f"sink-{run}")
    workflow = write_ledger(tmp / f"wf-{run}", {"run": run, "sink": str(sink), "abort": abort})
    watch = RecommitWatch(store)
    faults = FaultInjector(rates, seed)
    platform = LocalPlatform(workflow, watch, workers=4, faults=faults)
    try:
        outcome = platform.run({"run": run, "sink": str(sink)}, timeout=90)
        assert not platform.dead_letters, platform.dead_letters
    finally:
        platform.close()
    counter = store.app_read("counters", [run]).get(run)
    entries = sink_entries(sink)
    calls = (sink / "calls").read_text().split()
    late = watch.recommits > 0
    injected = {**faults.injected, "sink_calls": len(calls), "late_rerun": int(late)}
    if abort is None:
        assert outcome.failure is None, outcome.failure
        result = outcome.result
        assert decode(counter.value) == len(STEP_FUNCTIONS)
        assert len(entries) == len(STEP_FUNCTIONS), sorted(entries)
        # What the workflow returned is what the sink recorded: recorded non-determinism.
        by_who = {e["who"]: e for e in entries.values()}
        seen = {"End": result["end"], "Sum": result["sum"],
                **{f"W{w['i']}": w["seen"] for w in result["ws"]}}
        for who, values in seen.items():
            assert {k: by_who[who][k] for k in ("t", "u", "r")} == values, who
        left = [f"{r.kind.value} {r.key}" for r in store.records(outcome.workflow_id) if r.kind is not Kind.RESULT]
        assert left == [] or late, left
        return injected
    assert outcome.failure is not None and outcome.results == []
    assert outcome.failure["Error"] == ("Declined" if abort == "abort" else "RuntimeError")
    assert decode(counter.value) == 0, decode(counter.value)
    undone = {k for k in entries if k.endswith(":undo")}
    assert len(entries) == 2 * len(STEP_FUNCTIONS), sorted(entries)
    assert {k + ":undo" for k in entries if not k.endswith(":undo")} == undone
    order = [decode(v.value) for _, v in sorted(
        ((int(k.rsplit(":", 1)[1]), v) for k, v in store.app_read("undo", [f"{run}:{i}" for i in range(12)]).items()))]
    assert len(order) == len(STEP_FUNCTIONS)
    rank = {"A": 0, "W0": 1, "W1": 1, "W2": 1, "Sum": 2, "End": 3}
    ranks = [rank[who.split("/")[0]] for who in order]
    assert ranks == sorted(ranks, reverse=True), f"compensations not in reverse completion order: {order}"
    # Left until the TTL: the failure record, the compensation log (12 entries),
    # two records per compensation run (see steps.advance), and the aborting invocation's own step records (inc,
    # now, uuid4, random, log: it never committed, so nobody collects them).
    end = naming.checkpoint_key(outcome.workflow_id, "End", (Frame(),))
    allowed_steps = {naming.step_key(end, seq) for seq in range(5)}
    allowed_steps |= {naming.step_key(naming.compensation_invocation(outcome.workflow_id, i), seq)
                      for i in range(12) for seq in (0, 1)}  # the compensation, its "passed on" marker
    records = list(store.records(outcome.workflow_id))
    kinds = sorted(r.kind.value for r in records)
    assert kinds.count("failure") == 1
    assert kinds.count("compensation") == 12 or late, kinds
    assert not {"checkpoint", "set", "result"} & set(kinds) or late, kinds
    assert {r.key for r in records if r.kind is Kind.STEP} <= allowed_steps or late
    return injected


@pytest.fixture(scope="module")
def serial_moto() -> Iterator[str]:
    """A moto server that handles one request at a time. moto's TransactWriteItems applies its
    items one by one and, when one fails, rolls back by restoring a snapshot of every table it
    touched; on the usual threaded server, requests running meanwhile see the half-applied
    transaction and have their own writes undone by the restore — behaviour real DynamoDB
    never shows (each request is atomic, transactions are serializable). Serving requests
    one at a time restores exactly that model; concurrency stays on the client side."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = ("from moto.server import DomainDispatcherApplication, create_backend_app\n"
            "from werkzeug.serving import run_simple\n"
            f"run_simple('127.0.0.1', {port}, DomainDispatcherApplication(create_backend_app), threaded=False)\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "MOTO_PORT": str(port)})
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError("moto server exited") from None
                time.sleep(0.05)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(params=["file", "dynamodb"])
def ledger_store(request, tmp_path):
    if request.param == "file":
        yield FileStore(tmp_path / "store")
        return
    endpoint = request.getfixturevalue("serial_moto")
    store = open_store(f"dynamodb://unum-{uuid.uuid4().hex[:10]}?endpoint={endpoint}&create=1")
    for table in ("counters", "undo"):  # the application's own tables, next to unum's
        if table not in store.client.list_tables()["TableNames"]:
            store.client.create_table(TableName=table, KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                                      AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                                      BillingMode="PAY_PER_REQUEST")
    yield store
    store.close()


CI_SCHEDULES = {"file": 5, "dynamodb": 3}  # per abort mode; `--schedules N` for more


@pytest.mark.parametrize("abort", [None, "abort", "raise"])
def test_ledger_under_fault_schedules(ledger_store, abort, tmp_path, schedules):
    n = schedules or CI_SCHEDULES["file" if isinstance(ledger_store, FileStore) else "dynamodb"]
    totals: dict[str, int] = {}
    for seed in range(n):
        injected = run_ledger(tmp_path, ledger_store, seed, SCHEDULES[seed % len(SCHEDULES)], abort)
        for key, count in injected.items():
            totals[key] = totals.get(key, 0) + count
    print(f"\n[{type(ledger_store).__name__} abort={abort}] {totals}")
    assert totals.get("crash", 0) > 0
    assert any(k.startswith("crash:step_") for k in totals), totals


@pytest.mark.parametrize("point", list(StepPoint), ids=lambda p: p.value)
def test_crash_at_every_step_point(point, tmp_path):
    """Deterministic: the first three times each step point is reached, the execution dies."""
    store = FileStore(tmp_path / "store")
    abort = "abort" if point is StepPoint.BEFORE_COMPENSATE else None
    injected = run_ledger(tmp_path, store, 5, FaultRates(crash={point: 1.0}, max_crashes=3), abort)
    assert injected.get(f"crash:{point.value}", 0) >= 1, injected


def test_concurrent_executions_of_one_step_run_it_once(tmp_path):
    """Many threads run the same invocation's handler at once (no platform): one effect."""

    run = "race"
    sink = make_sink(tmp_path / "sink")
    workflow = write_ledger(tmp_path / "wf", {"run": run, "sink": str(sink), "abort": None})
    store = FileStore(tmp_path / "store")
    spec = workflow.functions["A"]
    calls: list = []

    class Invoker:
        def invoke(self, function, payload):
            calls.append(function)

    runtime = Runtime(spec.ir, load_handler(spec.folder, spec.ir.handler, function="A"), store, Invoker())
    env = Envelope.from_wire({"unum": 1, "workflow": "wf-race", "frames": [[0, 1, 0]],
                              "inputs": [{"value": {"run": run, "sink": str(sink)}}], "start": True})
    barrier = threading.Barrier(8)

    def go(_):
        barrier.wait(timeout=30)
        return runtime.handle(env)

    try:
        with ThreadPoolExecutor(8) as pool:
            reports = list(pool.map(go, range(8)))
    finally:
        runtime.close()
    assert decode(store.app_read("counters", [run])[run].value) == 1
    assert len(sink_entries(sink)) == 1
    assert len({json.dumps(r.value, sort_keys=True) for r in reports if r is not None}) == 1
    assert os.path.getsize(sink / "calls") > 0
