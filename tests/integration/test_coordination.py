"""The coordination rules (docs/coordination.md) on the embedded platform with real stores:
each test is one schedule that broke an older design, run through the real runtime."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from unum_entry import naming
from unum_entry.envelope import Envelope, Frame
from unum_entry.hooks import FaultPoint
from unum_entry.local.faults import FaultInjector, FaultRates, InjectedCrash
from unum_entry.local.platform import LocalPlatform, local_platform
from unum_entry.runtime import new_workflow
from unum_entry.stores.file import FileStore
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import FunctionSource, Workflow, write_workflow

pytestmark = pytest.mark.integration

RANDOM = "import random\ndef handler(event, context):\n    return {'v': random.random(), 'from': event}\n"
IDENTITY = "def handler(event, context):\n    return event\n"


def chain(tmp_path: Path, n: int = 4, **entry_ir: Any) -> Workflow:
    functions = {f"F{i}": FunctionSource(RANDOM, [{"op": "invoke", "function": f"F{i + 1}"}]) for i in range(n - 1)}
    functions[f"F{n - 1}"] = FunctionSource(RANDOM)
    if entry_ir:
        functions["F0"] = FunctionSource(RANDOM, functions["F0"].instructions, entry_ir)
    return write_workflow(tmp_path / "chain", name="chain", entry="F0", functions=functions)


class Recorder:
    """Counts handler runs per function and keeps every envelope the platform was asked to deliver."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.sent: list[tuple[str, dict]] = []
        self._lock = threading.Lock()

    def wrap(self, function: str, handler: Any) -> Any:
        def counted(event: Any, context: Any) -> Any:
            with self._lock:
                self.runs[function] += 1
            return handler(event, context)
        return counted

    def watch(self, platform: LocalPlatform) -> None:
        submit = platform.submit

        def recorded(function: str, payload: dict, **kwargs: Any) -> None:
            with self._lock:
                self.sent.append((function, payload))
            submit(function, payload, **kwargs)
        platform.submit = recorded  # type: ignore[method-assign]


def test_late_duplicates_of_every_invocation_change_nothing_and_send_no_wave(tmp_path: Path) -> None:
    """After the workflow finished, every envelope it ever sent is delivered again (the entry's
    included): each duplicate re-runs only its own handler, finds its winner, and invokes nobody."""
    workflow, recorder = chain(tmp_path), Recorder()
    store = FileStore(tmp_path / "store")
    with local_platform(workflow, store, workers=4, wrap=recorder.wrap) as platform:
        recorder.watch(platform)
        first = platform.run({"seed": 1}, workflow_id="wf-late")
        assert recorder.runs == Counter({"F0": 1, "F1": 1, "F2": 1, "F3": 1})
        keys = {r.key: r.value for r in store.records("wf-late")}
        sent = list(recorder.sent)
        for function, payload in sent:
            platform.submit(function, payload)
        platform.wait_idle(30)
        # The duplicates invoked nobody but F3, whose commit is the result record itself (it
        # has no instructions), which F2's duplicate cannot see by F3's checkpoint name: one
        # redelivered call, answered by F3's ingress read, not a wave.
        assert len(recorder.sent) == 2 * len(sent) + 1
        again = platform.outcome("wf-late")
    assert again.results == first.results and again.status == "succeeded"
    assert recorder.runs == Counter({"F0": 2, "F1": 2, "F2": 2, "F3": 2})  # each once more, no wave
    assert {r.key: r.value for r in store.records("wf-late")} == keys  # nothing new, nothing changed


def test_ingress_check_skips_the_handler_of_a_duplicate(tmp_path: Path) -> None:
    workflow, recorder = chain(tmp_path, ingress_check=True), Recorder()
    with local_platform(workflow, MemoryStore(), workers=2, wrap=recorder.wrap) as platform:
        platform.run({"seed": 2}, workflow_id="wf-check")
        platform.submit("F0", new_workflow({"seed": 2}, "wf-check").to_wire())
        platform.wait_idle(30)
    assert recorder.runs["F0"] == 1


def test_a_slow_duplicate_that_finishes_after_the_workflow_moved_on_uses_the_winner(tmp_path: Path) -> None:
    """Two executions of F1 pass ingress; the first commits and the workflow finishes; the
    second then returns a different output. Its commit finds the retained winner, so nothing
    downstream sees its output and nothing is re-run."""
    workflow, recorder = chain(tmp_path), Recorder()
    release, entered = threading.Event(), threading.Event()
    slow_once = {"armed": True}

    def wrap(function: str, handler: Any) -> Any:
        counted = recorder.wrap(function, handler)

        def maybe_slow(event: Any, context: Any) -> Any:
            if function == "F1" and slow_once.pop("armed", False):
                entered.set()
                assert release.wait(30)
            return counted(event, context)
        return maybe_slow

    store = FileStore(tmp_path / "store")
    with local_platform(workflow, store, workers=4, wrap=wrap) as platform:
        recorder.watch(platform)
        platform.start({"seed": 3}, workflow_id="wf-slow")
        assert entered.wait(30)  # the first delivery of F1 is now stuck in its handler
        (f1,) = [payload for function, payload in recorder.sent if function == "F1"]
        platform.submit("F1", f1)  # its duplicate runs through, and so does the workflow
        deadline = 300
        while platform.outcome("wf-slow").status != "succeeded" and deadline:
            threading.Event().wait(0.05)
            deadline -= 1
        finished = platform.outcome("wf-slow")
        assert finished.status == "succeeded"
        release.set()
        platform.wait_idle(30)
        final = platform.outcome("wf-slow")
    assert final.results == finished.results
    assert recorder.runs == Counter({"F0": 1, "F1": 2, "F2": 1, "F3": 1})


def test_an_output_nested_too_deep_for_the_wire_travels_by_reference(tmp_path: Path) -> None:
    deep = "def handler(event, context):\n    v = 0\n    for _ in range(505):\n        v = [v]\n    return v\n"
    depth = "def handler(event, context):\n    n = 0\n    while isinstance(event, list):\n        event, n = event[0], n + 1\n    return n\n"
    workflow = write_workflow(tmp_path / "deep", name="deep", entry="Deep", functions={
        "Deep": FunctionSource(deep, [{"op": "invoke", "function": "Depth"}]), "Depth": FunctionSource(depth)})
    with local_platform(workflow, FileStore(tmp_path / "store"), workers=2) as platform:
        outcome = platform.run(None)
    assert outcome.failure is None and outcome.result == 505


def test_a_workflow_that_outlives_its_retention_fails_clearly(tmp_path: Path) -> None:
    """F0 runs past the workflow's deadline (a clock moved 8 days on; the TTL is 7): F1 must
    not start on expiring objects; the workflow ends with Unum.RetentionExpired."""
    now = [1_800_000_000.0]
    late = "def handler(event, context):\n    CLOCK[0] += 8 * 24 * 3600\n    return event\n"
    workflow = write_workflow(tmp_path / "late", name="late", entry="F0", functions={
        "F0": FunctionSource(late, [{"op": "invoke", "function": "F1"}]), "F1": FunctionSource(IDENTITY)})

    def wrap(function: str, handler: Any) -> Any:
        getattr(handler, "__wrapped__", handler).__globals__["CLOCK"] = now  # the user's module, not a wrapper's
        return handler

    store = FileStore(tmp_path / "store", clock=lambda: now[0])
    with local_platform(workflow, store, workers=1, wrap=wrap) as platform:
        outcome = platform.run(1, workflow_id="wf-old")
    assert outcome.status == "failed"
    assert outcome.failure["Error"] == "Unum.RetentionExpired" and outcome.failure["Function"] == "F1"


def test_a_crash_after_commit_redelivered_inside_the_margin_fails_the_workflow_not_stalls(tmp_path: Path) -> None:
    """F1 commits and dies before invoking F2; the platform redelivers it one minute before the
    workflow's deadline (inside the margin: no handler may start). It used to be dropped as a
    stale duplicate — F2 never invoked, no failure record: a silent stall. It must carry its
    committed output on, so F2 (not committed, past the margin) ends the workflow with
    Unum.RetentionExpired."""
    t0 = 1_800_000_000.0
    now = [t0]
    functions = {f"F{i}": FunctionSource(IDENTITY, [{"op": "invoke", "function": f"F{i + 1}"}]) for i in range(2)}
    functions["F2"] = FunctionSource(IDENTITY)
    workflow = write_workflow(tmp_path / "margin", name="margin", entry="F0", functions=functions)

    class CrashAfterF1Commits(FaultInjector):
        crashed = False

        def at(self, point: Any, invocation: str) -> None:
            if point is FaultPoint.AFTER_CHECKPOINT and invocation == naming.checkpoint_key("wf-margin", "F1", (Frame(),)) \
                    and not self.crashed:
                self.crashed = True
                now[0] = t0 + 3600 - 60  # the redelivery comes one minute before the deadline
                raise InjectedCrash(point, invocation)

    store = FileStore(tmp_path / "store", ttl_seconds=3600, clock=lambda: now[0])
    faults = CrashAfterF1Commits(FaultRates(), seed=1)
    with local_platform(workflow, store, workers=2, faults=faults) as platform:
        outcome = platform.run(1, workflow_id="wf-margin", timeout=30)
    assert faults.crashed
    assert outcome.status == "failed", f"the workflow stalled silently: {outcome}"
    assert outcome.failure["Error"] == "Unum.RetentionExpired" and outcome.failure["Function"] == "F2"


def test_a_100000_branch_map_completes_on_the_memory_store(tmp_path: Path) -> None:
    width = 100_000
    split = f"def handler(event, context):\n    return list(range({width}))\n"
    workflow = write_workflow(tmp_path / "wide", name="wide", entry="Split", functions={
        "Split": FunctionSource(split, [{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "Work"}]),
        "Work": FunctionSource("def handler(event, context):\n    return event * 2\n", [{"op": "fan_in", "function": "Sum"}]),
        "Sum": FunctionSource("def handler(event, context):\n    return [len(event), sum(event)]\n")})
    store = MemoryStore()
    with local_platform(workflow, store, workers=8) as platform:
        outcome = platform.run(None, timeout=600)
    assert outcome.result == [width, width * (width - 1)]
    shards = [r for r in store.records() if r.size is not None]
    assert max(len(r.members) for r in shards) <= 16  # no growing item: a tree of small shards


def test_a_random_order_of_joins_reaches_the_same_aggregate(tmp_path: Path) -> None:
    """Deliveries picked in random order (the local platform's fault mode without faults) over a
    40-way map: two shard levels, one aggregate, the same on every seed."""
    from unum_entry.local.faults import FaultInjector, FaultRates

    split = "def handler(event, context):\n    return list(range(40))\n"
    workflow = write_workflow(tmp_path / "order", name="order", entry="Split", functions={
        "Split": FunctionSource(split, [{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "Work"}]),
        "Work": FunctionSource(IDENTITY, [{"op": "fan_in", "function": "Sum"}]),
        "Sum": FunctionSource(IDENTITY)})
    for seed in range(3):
        faults = FaultInjector(FaultRates(), random.Random(seed).randrange(2**32))
        with local_platform(workflow, FileStore(tmp_path / f"store{seed}"), workers=4, faults=faults) as platform:
            assert platform.run(None).result == list(range(40))


def test_envelopes_of_a_map_item_name_the_deadline(tmp_path: Path) -> None:
    recorder = Recorder()
    workflow = write_workflow(tmp_path / "m", name="m", entry="Split", functions={
        "Split": FunctionSource("def handler(event, context):\n    return [1, 2]\n", [{"op": "map", "function": "W"}]),
        "W": FunctionSource(IDENTITY)})
    with local_platform(workflow, MemoryStore(), workers=2) as platform:
        recorder.watch(platform)
        platform.run(None)
    deadlines = {Envelope.from_wire(p).deadline for f, p in recorder.sent if f == "W"}
    assert len(deadlines) == 1 and deadlines.pop() > 0
