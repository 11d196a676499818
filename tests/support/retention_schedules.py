"""Fault schedules of the retention ledger (unum_entry.retention), at the time edges of a
workflow, on the embedded local platform over any store, with one controlled clock shared by the
store and every runtime (jumping days ahead costs nothing). The deadline watchdog is off here:
every failure recorded comes from the ledger's own rules, not from the watchdog's backstop.

- `late_duplicates_past_the_margin`: a finished workflow of any shape (the examples; the same
  with `"checkpoint": false` functions; per-branch results only) gets a late copy of every
  delivery it accepted at `deadline - margin + 1 s` and again at `deadline - 1 s`: the outcome,
  the records and the set of created keys stay as they were.
- `gc_from_a_fast_clock_during_a_join`: while one branch of a join still runs, `gc` runs on a
  host whose clock is fast: with its clock-skew margin it sweeps nothing the join needs, the join
  completes and the workflow ends (its result; or, joined inside the last margin, the target's
  `Unum.RetentionExpired`); without the margin the same sweep deletes the live shard, which the
  late branch would then recreate with one member (the join never runs: the hazard).
- `repeat_without_checkpoint`: a retry (attempt 1) of a `"checkpoint": false` function of a
  finished chain runs its handler again, but invokes none of its committed successors (they
  would re-run their handlers: nothing marked them `redelivered`).
- `callback_after_the_deadline`: a `.waitForTaskToken` Task inside a Parallel branch or a Map
  iteration commits its wait an hour before the deadline (so its checkpoint outlives the
  deadline by the redelivery window) and its callback comes after the deadline: the workflow
  ends with `Unum.RetentionExpired` (it used to join a shard that had expired, recreate it with
  one member and stay "running" forever).

Each schedule is a function `(make_store, tmp_path, ...)`; `make_store(clock)` opens a fresh
store of the backend under test whose clock is `clock`.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.faulty_platform import FaultyPlatform
from tests.support.tracing import CommitWatch, store_snapshot
from unum_entry.asl import callbacks
from unum_entry.local.faults import FaultInjector, FaultRates
from unum_entry.local.platform import LocalPlatform
from unum_entry.outcome import RunResult, WorkflowStatus
from unum_entry.retention import GC_SKEW_SECONDS, Retention, store_retention, sweep_horizon
from unum_entry.runtime import RuntimeConfig
from unum_entry.stores.base import Kind, Store
from unum_entry.workflow import FunctionSource, Workflow, load_workflow, write_workflow

IMAGES = Path(__file__).resolve().parents[2] / "images"
WAIT = 60.0           # seconds: the longest a schedule waits for the platform to go idle
POLL = 0.02


class Clock:
    """A settable clock (epoch seconds), starting at the real time."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


MakeStore = Callable[[Clock], Store]
NO_WATCHDOG = RuntimeConfig(watchdog=False)


def _margin(retention: Retention) -> int:
    return min(retention.margin_seconds, retention.ttl_seconds // 2)


def _bounded_wait(what: str, done: Callable[[], bool], timeout: float = WAIT) -> None:
    stop = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < stop, f"gave up after {timeout:.0f} s waiting for {what}"
        time.sleep(POLL)


def _deadline_of(store: Store, workflow: str) -> int:
    """The workflow's deadline: the earliest expiry among its objects (start + TTL)."""
    return min(r.expires_at for r in store.records(workflow))


# ---- shapes ------------------------------------------------------------------------------------

IDENTITY = "def handler(event, ctx):\n    return event\n"


def _with_checkpoint_off(folder: Path, functions: list[str]) -> None:
    for function in functions:
        path = folder / function / "unum-ir.json"
        ir = json.loads(path.read_text())
        path.write_text(json.dumps({**ir, "checkpoint": False}))


def _example(name: str, no_checkpoint: list[str] | None = None) -> Callable[[Path], tuple[Workflow, Any]]:
    def make(tmp: Path) -> tuple[Workflow, Any]:
        folder = tmp / name
        shutil.copytree(IMAGES / name, folder)
        _with_checkpoint_off(folder, no_checkpoint or [])
        return load_workflow(folder), json.loads((IMAGES / name / "input.json").read_text())
    return make


def _transfer(aborts: bool, no_checkpoint: list[str] | None = None) -> Callable[[Path], tuple[Workflow, Any]]:
    """money-transfer (exactly-once steps on application tables, compensations on an abort),
    with account names of its own (application tables may be shared by several stores)."""
    def make(tmp: Path) -> tuple[Workflow, Any]:
        workflow, _ = _example("money-transfer", no_checkpoint)(tmp)
        tag = uuid.uuid4().hex[:8]
        a, b = f"alice-{tag}", f"bob-{tag}"
        return workflow, {"transfer": f"T-{tag}", "from": a, "to": f"dave-{tag}" if aborts else b, "amount": 30,
                          "open": {a: 100, b: 20}}
    return make


def _per_branch(no_checkpoint: bool) -> Callable[[Path], tuple[Workflow, Any]]:
    """A maps its input list to B; every B is terminal: per-branch results, no root-level one."""
    def make(tmp: Path) -> tuple[Workflow, Any]:
        fields = {"checkpoint": False} if no_checkpoint else {}
        return write_workflow(tmp / "per-branch", name="per-branch", entry="A", functions={
            "A": FunctionSource(IDENTITY, [{"op": "map", "function": "B"}]),
            "B": FunctionSource("def handler(event, ctx):\n    return event * 10\n", [
                {"op": "invoke", "function": "C"}] if no_checkpoint else [], fields),
            **({"C": FunctionSource(IDENTITY, [], fields)} if no_checkpoint else {}),
        }), [1, 2, 3]
    return make


SHAPES: dict[str, Callable[[Path], tuple[Workflow, Any]]] = {
    "chain": _example("chain"),
    "parallel": _example("parallel"),
    "map-aggregate": _example("map-aggregate"),
    "fold": _example("fold"),
    "loop": _example("loop"),
    "branch": _example("branch"),
    "neighbour": _example("neighbour"),
    "per-branch": _per_branch(no_checkpoint=False),
    "money-transfer": _transfer(aborts=False),
    "money-transfer-abort": _transfer(aborts=True),
    # `"checkpoint": false` wherever the IR allows it (no fan-out, join or condition there)
    "chain/no-checkpoint": _example("chain", ["Shout", "Sign"]),
    "parallel/no-checkpoint": _example("parallel", ["Combine"]),
    "map-aggregate/no-checkpoint": _example("map-aggregate", ["Summarize"]),
    "loop/no-checkpoint": _example("loop", ["Done"]),
    "branch/no-checkpoint": _example("branch", ["Approve", "Reject"]),
    "per-branch/no-checkpoint": _per_branch(no_checkpoint=True),
    "money-transfer/no-checkpoint": _transfer(aborts=False, no_checkpoint=["Notify"]),
}


# ---- schedule: late duplicates at the deadline's edge ---------------------------------------

def late_duplicates_past_the_margin(make_store: MakeStore, tmp: Path, shape: str) -> dict[str, int]:
    """Run `shape` fault-free; then, past `deadline - margin` and again a second before the
    deadline, deliver a late copy of every delivery it accepted. Nothing may change. Returns
    how many late copies each round delivered."""
    clock = Clock()
    store = make_store(clock)
    watch = CommitWatch(store)
    workflow, input_value = SHAPES[shape](tmp)
    faults = FaultInjector(FaultRates(late_duplicate=1.0), seed=1)
    workflow_id = f"wf-late-{uuid.uuid4().hex[:8]}"
    delivered: dict[str, int] = {}
    with _closing(FaultyPlatform(workflow, watch, faults=faults, config=NO_WATCHDOG)) as platform:
        platform.start(input_value, workflow_id)
        platform.wait_idle(WAIT)
        first = platform.outcome(workflow_id)
        expected = WorkflowStatus.FAILED if shape.endswith("-abort") else WorkflowStatus.SUCCEEDED
        assert first.status is expected, f"[{shape}] the fault-free run: {first}"
        deadline = _deadline_of(store, workflow_id)
        margin = _margin(store_retention(store))
        before = _comparable(store, workflow_id)
        apps = _applications(store, input_value)
        watch.freeze()
        for label, at in (("deadline - margin + 1 s", deadline - margin + 1), ("deadline - 1 s", deadline - 1)):
            clock.now = at
            delivered[label] = platform.redeliver_late()
            platform.wait_idle(WAIT)
            again = platform.outcome(workflow_id)
            assert (again.results, again.failure) == (first.results, first.failure), (
                f"[{shape}] late copies at {label} changed the outcome: {again.failure or again.results}")
            assert watch.late == [], f"[{shape}] late copies at {label} created objects: {watch.late}"
            assert _comparable(store, workflow_id) == before, f"[{shape}] late copies at {label} changed the records"
            assert _applications(store, input_value) == apps, f"[{shape}] late copies at {label} changed the accounts"
        assert not platform.dead_letters, platform.dead_letters
    return delivered


def _applications(store: Store, input_value: Any) -> dict[str, Any]:
    """money-transfer's application state (balances, outbox), else nothing."""
    if not (isinstance(input_value, dict) and "transfer" in input_value):
        return {}
    accounts = store.app_read("accounts", [input_value["from"], input_value["to"]])
    outbox = store.app_read("outbox", [input_value["transfer"]])
    return {"accounts": {k: v.value for k, v in accounts.items()}, "outbox": {k: v.value for k, v in outbox.items()}}


def _comparable(store: Store, workflow_id: str) -> dict[str, tuple]:
    return {k: v for k, v in store_snapshot(store, workflow_id).items() if v[0] is not Kind.CHUNK}


@contextmanager
def _closing(platform: LocalPlatform) -> Iterator[Any]:
    try:
        yield platform
    finally:
        platform.close()


# ---- schedule: gc from a host with a fast clock during a join -------------------------------

def _join_with_a_held_branch(tmp: Path, flag: Path) -> Workflow:
    """A maps [0, 1] to B, the B's join into C; B of item 1 waits for `flag` (at most WAIT s)."""
    held = (f"import os, time\n"
            f"def handler(event, ctx):\n"
            f"    stop = time.monotonic() + {WAIT}\n"
            f"    while event == 1 and not os.path.exists({str(flag)!r}) and time.monotonic() < stop:\n"
            f"        time.sleep(0.01)\n"
            f"    return event + 100\n")
    return write_workflow(tmp / "join", name="join", entry="A", functions={
        "A": FunctionSource(IDENTITY, [{"op": "create_set", "function": "C", "shape": "aggregate"},
                                       {"op": "map", "function": "B"}]),
        "B": FunctionSource(held, [{"op": "fan_in", "function": "C"}]),
        "C": FunctionSource("def handler(event, ctx):\n    return sum(event)\n"),
    })


def gc_from_a_fast_clock_during_a_join(make_store: MakeStore, tmp: Path, *, joins_before_deadline: int,
                                       fast_by: int, skew_margin: int = GC_SKEW_SECONDS) -> RunResult:
    """Branch 0 joins at once; branch 1 joins `joins_before_deadline` seconds before the
    deadline, right after `gc` swept from a host whose clock is `fast_by` seconds fast, keeping
    `skew_margin`. Asserts that the sweep deleted the join's shard exactly when the fast clock
    minus the margin reached the shard's expiry (the deadline); returns the outcome once the
    platform is idle."""
    clock = Clock()
    store = make_store(clock)
    flag = tmp / "release-branch-1"
    workflow = _join_with_a_held_branch(tmp, flag)
    workflow_id = f"wf-gc-{uuid.uuid4().hex[:8]}"
    with _closing(LocalPlatform(workflow, store, config=NO_WATCHDOG)) as platform:
        platform.start([0, 1], workflow_id)
        _bounded_wait("branch 0's join", lambda: any(
            r.kind is Kind.SET and r.members for r in store.records(workflow_id)))
        shards = [r.key for r in store.records(workflow_id) if r.kind is Kind.SET]
        deadline = _deadline_of(store, workflow_id)
        clock.now = deadline - joins_before_deadline   # branch 1 started at once: it may still join
        store.sweep(sweep_horizon(clock.now + fast_by, skew_margin))  # gc on the fast host
        left = store.read(shards)
        if clock.now + fast_by - skew_margin < deadline:
            assert set(left) == set(shards), "gc swept the shard of a running join"
        else:
            assert set(shards) - set(left), "gc without enough margin kept the shard (the check is void)"
        flag.write_text("go")
        platform.wait_idle(WAIT)
        return platform.outcome(workflow_id)


# ---- schedule: a task-token callback after the deadline in a Parallel or a Map -------------

ASK = '''import os, time
def handler(event, context):
    folder = {folder!r}
    with open(os.path.join(folder, "token-%s" % event["item"]), "w") as f:
        f.write(event["token"])
    stop = time.monotonic() + {wait}
    while not os.path.exists(os.path.join(folder, "release")) and time.monotonic() < stop:
        time.sleep(0.01)
    return {{"sent": True}}
'''


def _waiting_task(item: str) -> dict[str, Any]:
    return {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
            "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token", "item": item}},
            "End": True}


def _machine(shape: str) -> dict[str, Any]:
    if shape == "parallel":
        body = {"Type": "Parallel", "End": True, "Branches": [
            {"StartAt": "Quick", "States": {"Quick": {"Type": "Pass", "Result": "quick", "End": True}}},
            {"StartAt": "Approve", "States": {"Approve": _waiting_task("p")}}]}
    else:
        body = {"Type": "Map", "End": True, "ItemsPath": "$.items", "ItemProcessor": {
            "StartAt": "Approve", "States": {"Approve": {**_waiting_task("x"), "Parameters": {
                "FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token", "item.$": "$"}}}}}}
    return {"StartAt": "Fan", "States": {"Fan": body}}


def callback_after_the_deadline(make_store: MakeStore, tmp: Path, shape: str) -> tuple[RunResult, str]:
    """`shape` "parallel" or "map" (items "a", "b"). Returns the outcome and the callback's
    refusal (if any). Asserts that the workflow ends with Unum.RetentionExpired naming it."""
    from builder.compiler import compile_state_machine  # lazy: the ASL compiler, for this schedule only

    (tmp / "functions" / "Ask").mkdir(parents=True)
    (tmp / "functions" / "Ask" / "app.py").write_text(ASK.format(folder=str(tmp), wait=WAIT))
    (tmp / "statemachine.json").write_text(json.dumps(_machine(shape)))
    out = compile_state_machine(tmp / "statemachine.json", tmp / "wf", functions=tmp / "functions").out
    clock = Clock()
    store = make_store(clock)
    workflow_id = f"wf-cb-{uuid.uuid4().hex[:8]}"
    items = ["p"] if shape == "parallel" else ["a", "b"]
    with _closing(LocalPlatform(load_workflow(out), store, config=NO_WATCHDOG)) as platform:
        platform.start({"items": items}, workflow_id)
        _bounded_wait("the waiting Tasks' tokens", lambda: all((tmp / f"token-{i}").exists() for i in items))
        deadline = _deadline_of(store, workflow_id)
        clock.now = deadline - 3600            # the Tasks commit their waits an hour before the deadline
        (tmp / "release").write_text("go")
        platform.wait_idle(WAIT)
        waits = callbacks.waiting(store, workflow_id)
        assert len(waits) == len(items), f"expected {len(items)} waiting task(s), found {waits}"
        invoker = _Submit(platform)
        if shape == "map":  # item "a" is answered in time: its continuation joins the Map's set
            callbacks.task_success((tmp / "token-a").read_text(), {"ok": "a"}, store=store, invoker=invoker)
            platform.wait_idle(WAIT)
            assert platform.outcome(workflow_id).failure is None
        late = (tmp / f"token-{items[-1]}").read_text()
        clock.now = deadline + 600             # ten minutes after the deadline (the checkpoint still lives)
        refusal = ""
        try:
            callbacks.task_success(late, {"ok": "late"}, store=store, invoker=invoker)
        except callbacks.CallbackError as exc:
            refusal = f"{type(exc).__name__}: {exc}"
        platform.wait_idle(WAIT)
        outcome = platform.outcome(workflow_id)
    assert outcome.failure is not None and outcome.failure["Error"] == "Unum.RetentionExpired", (
        f"[{shape}] a callback after the deadline left the workflow {outcome.status}: {outcome}")
    assert workflow_id in outcome.failure["Cause"], outcome.failure
    return outcome, refusal


class _Submit:
    """An invoker that submits to a LocalPlatform (what the platform's own invoker does)."""

    def __init__(self, platform: LocalPlatform) -> None:
        self.platform = platform

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.platform.submit(function, payload)


# ---- schedule: a repeat of a function without checkpoint ------------------------------------

def repeat_without_checkpoint(make_store: MakeStore, tmp: Path) -> dict[str, int]:
    """A -> B (`"checkpoint": false`) -> C. After the run, B's delivery again as a retry
    (attempt 1). Returns how many times each handler ran; the outcome must not change."""
    from collections import Counter

    from unum_entry.codec import decode, encode
    from unum_entry.envelope import Envelope

    clock = Clock()
    store = make_store(clock)
    workflow = write_workflow(tmp / "repeat", name="repeat", entry="A", functions={
        "A": FunctionSource(IDENTITY, [{"op": "invoke", "function": "B"}]),
        "B": FunctionSource("def handler(event, ctx):\n    return event + 1\n", [{"op": "invoke", "function": "C"}],
                            {"checkpoint": False}),
        "C": FunctionSource("def handler(event, ctx):\n    return event * 2\n"),
    })
    runs: Counter[str] = Counter()
    sent: list[tuple[str, bytes]] = []

    def counting(function: str, handler: Any) -> Any:
        def counted(event: Any, ctx: Any) -> Any:
            runs[function] += 1
            return handler(event, ctx)
        return counted

    class Recording(LocalPlatform):
        def submit(self, function: str, payload: dict[str, Any], *, delay: float = 0.0) -> None:
            sent.append((function, encode(payload)))
            super().submit(function, payload, delay=delay)

    workflow_id = f"wf-rep-{uuid.uuid4().hex[:8]}"
    with _closing(Recording(workflow, store, config=NO_WATCHDOG, wrap=counting)) as platform:
        first = platform.run(1, workflow_id=workflow_id, timeout=WAIT)
        assert first.result == 4, first
        (b_payload,) = [decode(data) for function, data in sent if function == "B"]
        retry = Envelope.from_wire(b_payload)
        platform.submit("B", Envelope(workflow=retry.workflow, frames=retry.frames, inputs=retry.inputs,
                                      deadline=retry.deadline, attempt=1).to_wire())
        platform.wait_idle(WAIT)
        again = platform.outcome(workflow_id)
        assert (again.results, again.failure) == (first.results, first.failure), again
    return dict(runs)
