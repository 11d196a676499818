"""A bounded, randomized fault campaign over the example workflows (images/), on the file store
and on DynamoDB (a serialized moto server), for long runs outside CI:

    python -m tests.support.campaign --store file --schedules 300 --budget 1200 --first-seed 1
    python -m tests.support.campaign --store dynamodb --schedules 60 --budget 900
    python -m tests.support.campaign --only money-transfer-abort:3:1234   # replay one schedule

Schedule `i` runs example `i mod len(EXAMPLES)` under fault mix `(i div len(EXAMPLES)) mod
len(MIXES)` with seed `first_seed + i`; every line printed names (example, mix, seed), the replay
key for `--only`. (Thread timing is not replayed: a replay draws the same faults, not
necessarily at the same instants.) Every handler runs behind a `@durable` wrapper whose first
step is a transactional *sink* entry: `camp_sink[invocation] += 1`, compensated by `-= 1` and an
append to an ordered undo log (`camp_undo`). Each schedule checks:

- the outcome (results, or the failure's Error and Function) equals a fault-free run's of the
  same input and workflow id (`reference`);
- the sink holds exactly one entry per invocation of that fault-free run, each 1 (0 when the
  workflow aborted), and nothing for any other invocation an execution ran; after an abort the
  undo log is the reverse of the fault-free run's completion order (money-transfer: the refund
  leaves the source account as it opened);
- the application state the example owns (money-transfer: balances, one outbox entry);
- no key is created twice (CommitWatch); after the run a late copy of every accepted delivery
  changes nothing: outcome, records, sink, undo log.

A schedule that does not finish within its timeout fails with what is still in flight
(`FaultyPlatform.in_flight`: a lost invoke, a delivery stuck in backoff and mere load look
different there).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tests.support.expiry import ttl_from_now
from tests.support.faulty_platform import FaultyPlatform
from tests.support.faulty_store import FaultyStore, partial_batches
from tests.support.tracing import CommitWatch, store_snapshot
from unum_entry.codec import decode, encode
from unum_entry.errors import WorkflowTimeout
from unum_entry.hooks import FaultPoint, StepPoint
from unum_entry.local.faults import FaultInjector, FaultRates
from unum_entry.local.platform import LocalPlatform
from unum_entry.runtime import Handler, InvocationContext
from unum_entry.steps import durable
from unum_entry.stores.base import AppOp, Kind, Store
from unum_entry.stores.file import FileStore
from unum_entry.workflow import Workflow, load_workflow

IMAGES = Path(__file__).resolve().parents[2] / "images"
SINK, UNDO = "camp_sink", "camp_undo"
APP_TABLES = (SINK, UNDO, "accounts", "outbox")


# ---- the sink every handler writes first -----------------------------------------------------

def _sink_inc(tx: Any, invocation: str, workflow: str) -> int:
    """The transactional effect of every function: its invocation's sink entry += 1."""
    n = tx.get(SINK, invocation, 0) + 1
    tx.put(SINK, invocation, n)
    return n


def _sink_undo(tx: Any, n: int, invocation: str, workflow: str) -> None:
    """Compensation of `_sink_inc`: -= 1, and append the invocation to the workflow's undo log."""
    tx.put(SINK, invocation, tx.get(SINK, invocation) - 1)
    head = tx.get(UNDO, f"{workflow}:head", 0)
    tx.put(UNDO, f"{workflow}:{head}", invocation)
    tx.put(UNDO, f"{workflow}:head", head + 1)


def _unrecorded_inc(store: Store, invocation: str, workflow: str) -> None:
    """`_sink_inc` as an effect outside steps: one transaction per call, recorded nowhere."""
    current = store.app_read(SINK, [invocation]).get(invocation)
    n = (decode(current.value) if current else 0) + 1
    store.transact(f"camp-unrecorded-{uuid.uuid4().hex}", b"", [AppOp(SINK, invocation, current.version if current else 0,
                                                                      write=True, value=encode(n))], workflow=workflow, expires_at=ttl_from_now(store))


@dataclass
class Sink:
    """The `wrap` of a platform: every handler becomes `@durable`, its first step the sink
    entry; records which invocations ran a handler and the order in which they returned."""

    ran: set[str] = field(default_factory=set)
    finished: list[str] = field(default_factory=list)
    # The harness's own check that a double effect is caught: write the entry straight to the
    # store, outside any step, so every execution of an invocation adds one.
    outside_steps: Store | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wrap(self, function: str, handler: Handler) -> Handler:
        # A compensation must be a module-level function of the handler's module (it runs later,
        # in that function's code): the harness lends it one.
        inspect.unwrap(handler).__globals__.setdefault(_sink_undo.__qualname__, _sink_undo)

        @functools.wraps(handler)
        def sinked(event: Any, ctx: InvocationContext) -> Any:
            with self._lock:
                self.ran.add(ctx.invocation)
            if self.outside_steps is not None:
                _unrecorded_inc(self.outside_steps, ctx.invocation, ctx.workflow_id)
            else:
                ctx.transact("campaign.sink", _sink_inc, ctx.invocation, ctx.workflow_id,  # type: ignore[attr-defined]
                             compensate=_sink_undo)
            output = handler(event, ctx)
            with self._lock:
                if ctx.invocation not in self.finished:
                    self.finished.append(ctx.invocation)
            return output

        return durable(sinked)


# ---- the examples ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Example:
    """One example workflow and the input a schedule runs it with (seed → input: application
    keys are made unique per schedule, as app tables are shared on one DynamoDB endpoint)."""

    name: str
    folder: str
    make_input: Callable[[int], Any]
    check: Callable[[Store, Any, Any], None] | None = None  # (store, input, outcome) → raises
    aborts: bool = False  # the fault-free run ends in failure


def _json(folder: str) -> Any:
    return json.loads((IMAGES / folder / "input.json").read_text())


def _transfer(seed: int, to: str) -> dict[str, Any]:
    a, b = f"alice-{seed}", f"bob-{seed}"
    return {"transfer": f"T-{seed}", "from": a, "to": to.format(b=b, seed=seed), "amount": 30,
            "open": {a: 100, b: 20}}


def _check_transfer(store: Store, input_value: Any, outcome: Any) -> None:
    accounts = {k: decode(v.value)["balance"] for k, v in store.app_read("accounts", [input_value["from"], input_value["to"]]).items()}
    outbox = store.app_read("outbox", [input_value["transfer"]])
    if outcome.failure is None:
        assert accounts == {input_value["from"]: 70, input_value["to"]: 50}, accounts
        assert len(outbox) == 1, outbox
    else:
        assert accounts == {input_value["from"]: 100}, f"the debit was not compensated exactly once: {accounts}"
        assert outbox == {}, outbox


EXAMPLES: dict[str, Example] = {e.name: e for e in [
    Example("chain", "chain", lambda s: {"name": f"world-{s}"}),
    Example("parallel", "parallel", lambda s: _json("parallel")),
    Example("map-aggregate", "map-aggregate", lambda s: _json("map-aggregate")),
    Example("fold", "fold", lambda s: _json("fold")),
    Example("loop", "loop", lambda s: {"n": 7}),  # 16 iterations (27 takes 111)
    Example("branch", "branch", lambda s: _json("branch")),
    Example("neighbour", "neighbour", lambda s: _json("neighbour")),
    Example("money-transfer", "money-transfer", lambda s: _transfer(s, "{b}"), _check_transfer),
    Example("money-transfer-abort", "money-transfer", lambda s: _transfer(s, "dave-{seed}"), _check_transfer,
            aborts=True),
]}


# ---- fault mixes -------------------------------------------------------------------------------

def _with(rates: FaultRates, p: float) -> FaultRates:
    """`rates` plus crashes inside steps and every harness-driven kind at intensity `p`."""
    crash = {**rates.crash, **{point: max(rates.crash.get(point, 0.0), p) for point in StepPoint}}
    return replace(rates, crash=crash, slow_duplicate=max(rates.slow_duplicate, p), late_duplicate=1.0,
                   store_error=max(rates.store_error, p / 2), unprocessed=max(rates.unprocessed, p),
                   handler_error=max(rates.handler_error, p / 2))


MIXES: list[FaultRates] = [
    _with(FaultRates.all_kinds(0.1), 0.05),
    _with(FaultRates.all_kinds(0.2), 0.1),
    _with(FaultRates.all_kinds(0.3), 0.1),
    _with(FaultRates(crash={p: 0.3 for p in FaultPoint}), 0.2),                                 # crashes
    _with(FaultRates(duplicate=0.5, concurrent_duplicate=0.3, delay=0.5), 0.1),               # duplicates
    _with(FaultRates(slow_duplicate=0.6, max_slow_duplicates=5, concurrent_duplicate=0.3), 0.05),  # slow copies
    _with(FaultRates(store_error=0.3, store_error_modes=("after", "partial"), unprocessed=0.4,
                     crash={p: 0.1 for p in FaultPoint}), 0.05),                               # store trouble
]


# ---- one schedule ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Schedule:
    example: str
    mix: int
    seed: int

    @property
    def key(self) -> str:
        return f"{self.example}:{self.mix}:{self.seed}"

    @classmethod
    def parse(cls, key: str) -> Schedule:
        example, mix, seed = key.rsplit(":", 2)
        return cls(example, int(mix), int(seed))


def schedules(first_seed: int, n: int, examples: list[str] | None = None) -> Iterator[Schedule]:
    names = examples or list(EXAMPLES)
    for i in range(n):
        yield Schedule(names[i % len(names)], (i // len(names)) % len(MIXES), first_seed + i)


def _app_state(store: Store, sink: Sink, workflow_id: str) -> tuple:
    undo = store.app_read(UNDO, [f"{workflow_id}:{i}" for i in range(64)])
    return ({k: decode(v.value) for k, v in store.app_read(SINK, sorted(sink.ran)).items()},
            [decode(undo[k].value) for k in sorted(undo, key=lambda k: int(k.rsplit(":", 1)[1]))])


def reference(example: Example, input_value: Any, workflow_id: str, root: Path) -> tuple[Any, Sink]:
    """The fault-free outcome of `example` on `input_value` (a fresh file store), and its sink."""
    sink = Sink()
    with _platform(LocalPlatform, load_workflow(IMAGES / example.folder), FileStore(root), sink) as platform:
        outcome = platform.run(input_value, workflow_id=workflow_id, timeout=60)
    assert (outcome.failure is not None) == example.aborts and (outcome.complete or example.aborts), (
        f"the fault-free run of {example.name}: {outcome}")
    return outcome, sink


@contextmanager
def _platform(cls: type, workflow: Workflow, store: Store, sink: Sink, **kwargs: Any) -> Iterator[Any]:
    platform = cls(workflow, store, workers=4, wrap=sink.wrap, **kwargs)
    try:
        yield platform
    finally:
        platform.close()


def run_schedule(schedule: Schedule, store: Store, root: Path, *, timeout: float = 60.0,
                 effects_outside_steps: bool = False) -> dict[str, int]:
    """One schedule on `store` (fresh for it, or shared: every key it writes is its own) and
    every check of the module docstring; returns the injected fault counts. Raises
    AssertionError (or WorkflowTimeout, with `FaultyPlatform.in_flight`) naming the schedule.
    `effects_outside_steps`: the sink entry is written outside any step (Sink.outside_steps),
    which the checks must catch."""
    example = EXAMPLES[schedule.example]
    input_value = example.make_input(schedule.seed)
    workflow_id = f"wf-camp-{schedule.seed}-{uuid.uuid4().hex[:8]}"
    try:
        expected, expected_sink = reference(example, input_value, workflow_id, root / "reference")
        rates = MIXES[schedule.mix]
        watch = CommitWatch(store)
        faults = FaultInjector(rates, schedule.seed)
        served = FaultyStore(watch, faults) if rates.store_error else watch
        sink = Sink(outside_steps=served if effects_outside_steps else None)
        # A delivery may draw every injected crash and store error in a row (a small workflow
        # under mix 6 does): the platform must not give up on it before the budgets run out.
        patience = rates.max_crashes + rates.max_store_errors + 10
        # DynamoDB's partial batches hit the deliveries only: a check's read that gives up on
        # them (StoreError after BatchRetry.attempts) would be the harness failing, not unum.
        with _platform(FaultyPlatform, load_workflow(IMAGES / example.folder), served, sink,
                       faults=faults, max_redeliveries=patience) as platform:
            try:
                with partial_batches(store, faults):
                    platform.start(input_value, workflow_id)
                    platform.wait_idle(timeout)
            except WorkflowTimeout as exc:
                raise WorkflowTimeout(f"{exc}; {platform.in_flight()}") from exc
            outcome = platform.outcome(workflow_id)
            assert not platform.dead_letters, platform.dead_letters
            got = (outcome.results, None if outcome.failure is None else (outcome.failure["Error"], outcome.failure["Function"]))
            want = (expected.results, None if expected.failure is None else (expected.failure["Error"], expected.failure["Function"]))
            assert got == want, f"outcome {got!r}, the fault-free run's {want!r}"
            _check_sink(store, sink, expected_sink, workflow_id, aborted=expected.failure is not None)
            if example.check is not None:
                example.check(store, input_value, outcome)
            before = (store_snapshot(store, workflow_id), _app_state(store, sink, workflow_id))
            watch.freeze()
            try:
                with partial_batches(store, faults):
                    platform.redeliver_late()
                    platform.wait_idle(timeout)
            except WorkflowTimeout as exc:
                raise WorkflowTimeout(f"late duplicates: {exc}; {platform.in_flight()}") from exc
            assert not platform.dead_letters, platform.dead_letters
            again = platform.outcome(workflow_id)
            assert (again.results, again.failure) == (outcome.results, outcome.failure), "late duplicates changed the outcome"
            assert watch.late == [], f"late duplicates created objects: {watch.late}"
            after = (store_snapshot(store, workflow_id), _app_state(store, sink, workflow_id))
            unchunked = [{k: v for k, v in s[0].items() if v[0] is not Kind.CHUNK} for s in (before, after)]
            assert unchunked[0] == unchunked[1] and before[1] == after[1], \
                "late duplicates changed the records, the sink or the undo log"
        assert watch.recommits == [], f"keys created more than once: {watch.recommits}"
    except BaseException as exc:
        exc.add_note(f"campaign schedule {schedule.key} (replay: python -m tests.support.campaign --only {schedule.key})")
        raise
    injected = dict(faults.injected)
    injected.update(redeliveries=platform.stats.get("redeliveries", 0), held_back=len(platform.held_back),
                    deliveries=platform.stats.get("deliveries", 0))
    return injected


def _check_sink(store: Store, sink: Sink, expected: Sink, workflow_id: str, *, aborted: bool) -> None:
    """Exactly one sink entry per invocation of the fault-free run (0 after an abort: undone
    once each, in reverse completion order), none for any other invocation that ran."""
    entries, undo = _app_state(store, sink, workflow_id)
    want = {inv: 0 if aborted else 1 for inv in expected.ran}
    assert entries == want, (f"sink entries {entries}, the fault-free run's {want} (extra: "
                             f"{sorted(set(entries) - set(want))}, missing: {sorted(set(want) - set(entries))})")
    if aborted:
        completed = [inv for inv in expected.ran]  # every step of the fault-free run completed before the abort
        assert sorted(undo) == sorted(completed) and len(undo) == len(completed), f"undo log {undo}, expected each of {completed} once"
        order = [inv for inv in expected.finished if inv in undo] + [inv for inv in undo if inv not in expected.finished]
        assert undo == list(reversed(order)), f"compensations not in reverse completion order: {undo}, completion {order}"
    else:
        assert undo == [], f"compensations ran on success: {undo}"


# ---- the campaign ------------------------------------------------------------------------------

@contextmanager
def store_maker(kind: str, root: Path) -> Iterator[Callable[[], Store]]:
    """Fresh stores of `kind` under `root` (file) or on one serialized moto server (dynamodb:
    a table per schedule, the application tables shared)."""
    if kind == "file":
        yield lambda: FileStore(Path(tempfile.mkdtemp(dir=root)))
        return
    from builder.local_stack.process import MotoServer
    from unum_entry.stores import open_store

    with MotoServer(serialized=True) as moto:
        opened: list[Store] = []

        def make() -> Store:
            store = open_store(f"dynamodb://unum-{uuid.uuid4().hex[:12]}?endpoint={moto.endpoint}&create=1")
            opened.append(store)
            ensure_app_tables(store)
            return store

        try:
            yield make
        finally:
            for store in opened:
                store.close()


def ensure_app_tables(store: Any) -> None:
    """The application tables of the examples and the sink, next to unum's table (DynamoDB)."""
    existing = set(store.client.list_tables()["TableNames"])
    for table in APP_TABLES:
        if table not in existing:
            store.client.create_table(TableName=table, KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                                      AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                                      BillingMode="PAY_PER_REQUEST")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.campaign", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["file", "dynamodb"], default="file")
    parser.add_argument("--schedules", type=int, default=90)
    parser.add_argument("--budget", type=float, default=600.0, help="seconds; no new schedule starts after it")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--examples", default="", help="comma-separated names (default: all)")
    parser.add_argument("--only", action="append", default=[], help="replay one schedule EXAMPLE:MIX:SEED")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    plan = [Schedule.parse(k) for k in args.only] or list(
        schedules(args.first_seed, args.schedules, [e for e in args.examples.split(",") if e] or None))
    started = time.monotonic()
    totals: Counter[str] = Counter()
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="unum-campaign-") as tmp, store_maker(args.store, Path(tmp)) as make:
        for n, schedule in enumerate(plan):
            if time.monotonic() - started > args.budget:
                print(f"budget of {args.budget:.0f} s spent after {n} schedules", flush=True)
                break
            t = time.monotonic()
            try:
                injected = run_schedule(schedule, make(), Path(tempfile.mkdtemp(dir=tmp)), timeout=args.timeout)
            except Exception as exc:  # noqa: BLE001 - report every kind of failure and go on
                failed.append(schedule.key)
                notes = "\n".join(getattr(exc, "__notes__", []))
                print(f"FAIL {schedule.key} {time.monotonic() - t:.1f}s {type(exc).__name__}: {str(exc)[:3000]}\n{notes}",
                      flush=True)
                continue
            totals.update({k: v for k, v in injected.items() if k.count(":") < 1})
            totals["schedules"] += 1
            print(f"ok {schedule.key} {time.monotonic() - t:.1f}s deliveries={injected['deliveries']}", flush=True)
    print(f"[{args.store}] {totals['schedules']} passed, {len(failed)} failed in {time.monotonic() - started:.0f} s; "
          f"failed: {failed}; injected: {dict(sorted(totals.items()))}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
