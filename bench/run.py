"""unum micro-benchmarks, measured in one run and reported as counts and ratios (no asserts on time).

    python bench/run.py [--quick]       # from the repo root; writes bench/report.txt

a. Store operations per transition by kind (chain, fan-out, fan-in, map) and what they cost on
   DynamoDB on-demand next to Step Functions Standard (bench/wire.py counts the same at the wire,
   with billed units from item sizes).
b. Runtime CPU per transition without I/O: `Runtime.handle` over MemoryStore, no-op invoker.
c. Dispatching a 512-branch map with a 20 ms invoke latency: concurrent vs one-by-one.

See bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout, without installing
    sys.path.insert(0, str(REPO))

from unum_entry.envelope import Envelope
from unum_entry.local.platform import local_platform
from unum_entry.handlers import load_handler
from unum_entry.runtime import (
    InvocationContext,
    Runtime,
    RuntimeConfig,
    new_workflow,
)
from unum_entry.stores.base import Kind, Store
from unum_entry.stores.counting import CountingStore
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import FunctionSource, Workflow
from unum_entry.workflow import write_workflow as write_workflow_folder

T = TypeVar("T")

IDENTITY = "def handler(event, context):\n    return event\n"
SPLIT = "def handler(event, context):\n    return {'items': list(range(event['m']))}\n"
DOUBLE = "def handler(event, context):\n    return event * 2\n"
COUNT = "def handler(event, context):\n    return len(event)\n"
SUM = "def handler(event, context):\n    return sum(event)\n"

# What the runtime does on the common path (docs/coordination.md): conditional creates of
# checkpoints and results, set-shard upserts, batch reads. Any other kind that shows up (a delete,
# a marker, ...) gets a column of its own after these.
OP_COLUMNS = ("read", "create_checkpoint", "add_to_set", "create_result")


# ---- settings ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Settings:
    """How much to measure; `--quick` shrinks every loop."""

    quick: bool
    runs_per_pattern: int
    cpu_iterations: int
    cpu_warmup: int
    fanout_branches: int
    invoke_latency: float = 0.020
    concurrent_workers: int = 64
    concurrent_repeats: int = 3


def settings_for(quick: bool) -> Settings:
    """The full bench (~30-40 s) or the quick one (~5-10 s)."""
    if quick:
        return Settings(quick=True, runs_per_pattern=5, cpu_iterations=300, cpu_warmup=30, fanout_branches=128)
    return Settings(quick=False, runs_per_pattern=20, cpu_iterations=2000, cpu_warmup=100, fanout_branches=512)


@dataclass(frozen=True)
class Prices:
    """USD list prices assumed for the cost line (us-east-1)."""

    write_per_million: float = 1.25   # DynamoDB on-demand write request units (<= 1 KB item)
    read_per_million: float = 0.25    # DynamoDB on-demand read request units (<= 4 KB, strongly consistent)
    sfn_per_million: float = 25.0     # Step Functions Standard state transitions


# ---- workflows -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Pattern:
    """A tiny workflow of one shape, with the input that runs it and the number of transitions
    (edges of the workflow graph) one run takes."""

    name: str
    label: str
    entry: str
    functions: Mapping[str, FunctionSource]
    input: Any
    edges: int


def chain(n: int) -> Pattern:
    """F0 → F1 → … → F(n-1)."""
    functions = {f"F{i}": FunctionSource(IDENTITY, [{"op": "invoke", "function": f"F{i + 1}"}]) for i in range(n - 1)}
    functions[f"F{n - 1}"] = FunctionSource(IDENTITY)
    return Pattern("chain", f"chain ({n} functions)", "F0", functions, {"n": 1}, edges=n - 1)


def fan_out(k: int) -> Pattern:
    """Origin → k different terminal branches, no join."""
    branches = [f"B{i}" for i in range(k)]
    functions = {"Origin": FunctionSource(IDENTITY, [{"op": "fan_out", "branches": branches}])}
    functions.update({b: FunctionSource(IDENTITY) for b in branches})
    return Pattern("fan-out", f"fan-out (1 -> {k})", "Origin", functions, {"x": 1}, edges=k)


def fan_in(k: int) -> Pattern:
    """Origin → k different branches → aggregate Join."""
    branches = [f"B{i}" for i in range(k)]
    functions = {"Origin": FunctionSource(IDENTITY, [{"op": "create_set", "function": "Join"},
                                                    {"op": "fan_out", "branches": branches}])}
    functions.update({b: FunctionSource(IDENTITY, [{"op": "fan_in", "function": "Join"}]) for b in branches})
    functions["Join"] = FunctionSource(COUNT)
    return Pattern("fan-in", f"fan-in ({k} -> join)", "Origin", functions, {"x": 1}, edges=2 * k)


def map_aggregate(m: int) -> Pattern:
    """Split → map Work over m items → aggregate Sum."""
    functions = {
        "Split": FunctionSource(SPLIT, [{"op": "create_set", "function": "Sum"},
                                        {"op": "map", "function": "Work", "items": "$.items"}]),
        "Work": FunctionSource(DOUBLE, [{"op": "fan_in", "function": "Sum"}]),
        "Sum": FunctionSource(SUM),
    }
    return Pattern("map", f"map ({m} items + sum)", "Split", functions, {"m": m}, edges=2 * m)


def write_workflow(root: Path, pattern: Pattern) -> Workflow:
    """Write `pattern` as a workflow folder under root and load it."""
    return write_workflow_folder(root / pattern.name, name=pattern.name, entry=pattern.entry, functions=pattern.functions)


def make_runtime(workflow: Workflow, function: str, store: Store, invoker: Any,
                 config: RuntimeConfig | None = None) -> Runtime:
    """A Runtime for one function of `workflow`, as a container would build it."""
    spec = workflow.functions[function]
    return Runtime(spec.ir, load_handler(spec.folder, spec.ir.handler, function=function), store, invoker, config=config)


# ---- invokers ------------------------------------------------------------------------------

@dataclass
class RecordingInvoker:
    """Does nothing but keep each payload (list.append is atomic under the GIL)."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    timers: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.calls.append((function, payload))

    def invoke_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        """A timer (the entry's deadline watchdog): kept apart, it is not a transition."""
        self.timers.append((function, payload))

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        """The calls so far; starts a new list."""
        calls, self.calls = self.calls, []
        return calls


@dataclass(frozen=True)
class SleepingInvoker:
    """An invoke that takes `latency` seconds (an Invoke API round trip) and does nothing else."""

    latency: float

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        time.sleep(self.latency)

    def invoke_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        """Arming a timer is one scheduler request: the same round trip."""
        time.sleep(self.latency)


# ---- a. store operations per transition -------------------------------------------------------

@dataclass(frozen=True)
class OpsRow:
    """Store operations of `runs` fault-free runs of one pattern."""

    label: str
    transitions: int
    counts: Mapping[str, int]
    retained: int
    runs: int

    def per_transition(self, kind: str) -> float:
        return self.counts.get(kind, 0) / self.transitions

    @property
    def writes(self) -> float:
        """Billed writes per transition: every create, set add (and deleted item, if any)."""
        return sum(self.per_transition(k) for k in self.counts if k != "read")

    @property
    def reads(self) -> float:
        return self.per_transition("read")


def measure_ops(root: Path, pattern: Pattern, runs: int) -> OpsRow:
    """Run `pattern` `runs` times on the local platform over CountingStore(MemoryStore)."""
    workflow = write_workflow(root, pattern)
    store = CountingStore(MemoryStore())
    retained = 0
    with local_platform(workflow, store, workers=4) as plat:
        for _ in range(runs):
            outcome = plat.run(pattern.input, timeout=60)
            if outcome.failure is not None or not outcome.complete:
                raise RuntimeError(f"{pattern.name}: workflow failed: {outcome.failure}")
            retained += sum(1 for r in store.records(outcome.workflow_id) if r.kind is not Kind.RESULT)
    return OpsRow(pattern.label, pattern.edges * runs, dict(store.counts), retained, runs)


def ops_section(root: Path, settings: Settings, prices: Prices) -> list[str]:
    """Part a: the table and the cost lines."""
    patterns = [chain(5), fan_out(4), fan_in(4), map_aggregate(16)]
    rows = [measure_ops(root, p, settings.runs_per_pattern) for p in patterns]
    columns = [*OP_COLUMNS, *sorted({k for r in rows for k in r.counts} - set(OP_COLUMNS))]
    header = (f"{'pattern':<22}{'transitions':>12}" + "".join(f"{c:>{len(c) + 2}}" for c in columns)
              + f"{'retained/run':>14}")
    lines = [
        "a. Store operations per transition, by kind",
        f"   CountingStore over MemoryStore, LocalPlatform without faults, {settings.runs_per_pattern} runs per pattern;",
        "   transitions = edges of the workflow graph taken (chain of n: n-1; fan-out 1->k: k;",
        "   fan-in and map of k: k out + k in). Each column: operations of that kind / transitions.",
        "",
        header,
        "-" * len(header),
    ]
    for row in rows:
        lines.append(f"{row.label:<22}{row.transitions:>12}"
                     + "".join(f"{row.per_transition(c):>{len(c) + 2}.3f}" for c in columns)
                     + f"{row.retained / row.runs:>14.0f}")
    lines.append("   retained/run = checkpoints and set shards a run leaves until their expiry (nothing is deleted by the")
    lines.append("   runtime: docs/coordination.md); results are not counted.")
    lines += ["", ("   Cost per million transitions, assuming "
              f"${prices.write_per_million:.2f}/M write units, ${prices.read_per_million:.2f}/M read units"),
              "   (DynamoDB on-demand, us-east-1 list price before the Nov 2024 cut; halve both for today's),",
              "   one unit per write and per key read (every item here is under 1 KB; bench/wire.py measures the units",
              f"   from item sizes at the wire); vs Step Functions Standard ${prices.sfn_per_million:.2f}/M state transitions.",
              ""]
    header2 = f"{'pattern':<22}{'writes/t':>10}{'reads/t':>10}{'DynamoDB $/M t':>16}{'SFN $/M t':>12}{'SFN / unum':>12}"
    lines += [header2, "-" * len(header2)]
    for row in rows:
        cost = row.writes * prices.write_per_million + row.reads * prices.read_per_million
        lines.append(f"{row.label:<22}{row.writes:>10.3f}{row.reads:>10.3f}{cost:>16.2f}"
                     f"{prices.sfn_per_million:>12.2f}{prices.sfn_per_million / cost:>11.1f}x")
    return lines


# ---- b. runtime CPU per transition --------------------------------------------------------------

@dataclass(frozen=True)
class Timing:
    """Seconds spent over a loop: all threads' CPU, the calling thread's CPU, wall clock."""

    process: float
    thread: float
    wall: float

    def minus(self, other: Timing) -> Timing:
        return Timing(self.process - other.process, self.thread - other.thread, self.wall - other.wall)


def time_calls(call: Callable[[T], Any], items: Sequence[T]) -> Timing:
    """Call `call` on every item, with the cyclic GC paused (as timeit does)."""
    gc.collect()
    gc.disable()
    try:
        p0, t0, w0 = time.process_time(), time.thread_time(), time.perf_counter()
        for item in items:
            call(item)
        p1, t1, w1 = time.process_time(), time.thread_time(), time.perf_counter()
    finally:
        gc.enable()
    return Timing(p1 - p0, t1 - t0, w1 - w0)


def bare(runtime: Runtime, event: Any, n: int) -> Timing:
    """The cost of calling the handler alone `n` times (subtracted from each case)."""
    ctx = InvocationContext(workflow_id="wf", function_name=runtime.ir.function, invocation="c-x",
                            attempt=0, index=0, size=1, iteration=0)
    return time_calls(lambda e: runtime.handler(e, ctx), [event] * n)


def envelopes(calls: Sequence[tuple[str, dict[str, Any]]]) -> list[Envelope]:
    """Decode recorded payloads as the receiving platform would."""
    return [Envelope.from_wire(payload) for _, payload in calls]


@dataclass(frozen=True)
class CpuCase:
    """One measured kind of transition: the loop's timing and the bare handler's."""

    label: str
    work: str
    handled: Timing
    handler: Timing
    n: int

    def micros(self, which: str) -> float:
        net = self.handled.minus(self.handler)
        return getattr(net, which) / self.n * 1e6


def chain_hop_case(chain_wf: Workflow, n: int, tag: str) -> CpuCase:
    """F1 of a chain: no read, commit, plan, invoke F2."""
    store, inv0, inv1 = MemoryStore(), RecordingInvoker(), RecordingInvoker()
    f0, f1 = make_runtime(chain_wf, "F0", store, inv0), make_runtime(chain_wf, "F1", store, inv1)
    try:
        for i in range(n):
            f0.handle(new_workflow({"n": 1}, f"wf-{tag}-chain-{i}"))
        handled = time_calls(f1.handle, envelopes(inv0.take()))
        checkpoints = sum(1 for r in store.records() if r.kind is Kind.CHECKPOINT)
        if len(inv1.calls) != n or checkpoints != 2 * n:
            raise RuntimeError("chain hop: expected one invoke and two retained checkpoints (F0's, F1's) per workflow")
        return CpuCase("chain hop", "no read, commit, invoke next", handled, bare(f1, {"n": 1}, n), n)
    finally:
        f0.close()
        f1.close()


def map_cases(map_wf: Workflow, m: int, n: int, tag: str) -> list[CpuCase]:
    """The map pipeline, n workflows at a time: origin, first branch, last branch, join."""
    store = MemoryStore()
    invs = {name: RecordingInvoker() for name in ("Split", "Work", "Sum")}
    rts = {name: make_runtime(map_wf, name, store, invs[name]) for name in invs}
    try:
        origin = time_calls(rts["Split"].handle, [new_workflow({"m": m}, f"wf-{tag}-map-{i}") for i in range(n)])
        branches: dict[str, dict[int, Envelope]] = defaultdict(dict)
        for env in envelopes(invs["Split"].take()):
            branches[env.workflow][env.top.index] = env
        if len(branches) != n or any(len(b) != m for b in branches.values()):
            raise RuntimeError("map origin: not every branch was dispatched")
        by_wf = list(branches.values())
        first = time_calls(rts["Work"].handle, [b[0] for b in by_wf])
        for b in by_wf:  # setup, not timed: every branch but the last
            for slot in range(1, m - 1):
                rts["Work"].handle(b[slot])
        last = time_calls(rts["Work"].handle, [b[m - 1] for b in by_wf])
        joins = envelopes(invs["Work"].take())
        if len(joins) != n:
            raise RuntimeError(f"fan-in: expected {n} join invokes, got {len(joins)}")
        join = time_calls(rts["Sum"].handle, joins)
        results = sum(1 for r in store.records() if r.kind is Kind.RESULT)
        if results != n:
            raise RuntimeError(f"map pipeline: expected {n} results, found {results}")
        return [
            CpuCase(f"map origin ({m} items)", f"commit, {m} invokes", origin, bare(rts["Split"], {"m": m}, n), n),
            CpuCase("fan-in branch (first)", "no read, commit, set-shard add (not full)", first, bare(rts["Work"], 1, n), n),
            CpuCase("fan-in branch (last)", "same, the add fills the shard: invoke join", last,
                    bare(rts["Work"], 1, n), n),
            CpuCase(f"aggregate join ({m} in)", f"read checkpoint + shard, then {m} inputs; commit, result", join,
                    bare(rts["Sum"], list(range(m)), n), n),
        ]
    finally:
        for rt in rts.values():
            rt.close()


def cpu_section(root: Path, settings: Settings) -> list[str]:
    """Part b: CPU µs per transition of each case, after a warm-up pass."""
    chain_wf, map_wf = write_workflow(root, chain(5)), write_workflow(root, map_aggregate(16))
    chain_hop_case(chain_wf, settings.cpu_warmup, "warm")
    map_cases(map_wf, 16, settings.cpu_warmup, "warm")
    n = settings.cpu_iterations
    cases = [chain_hop_case(chain_wf, n, "cpu"), *map_cases(map_wf, 16, n, "cpu")]
    header = f"{'transition':<26}{'CPU us (all thr)':>18}{'CPU us (caller)':>17}{'wall us':>10}{'handler us':>12}   work"
    lines = [
        "b. Runtime CPU per transition, excluding I/O",
        f"   Runtime.handle over MemoryStore with a recording (no-op) invoker, {n} fresh workflow ids per case,",
        "   cyclic GC paused; the bare handler's cost (last numeric column) is already subtracted.",
        "   'all thr' = time.process_time (includes the dispatch pool's threads); 'caller' = time.thread_time.",
        "",
        header,
        "-" * len(header),
    ]
    for case in cases:
        lines.append(f"{case.label:<26}{case.micros('process'):>18.1f}{case.micros('thread'):>17.1f}"
                     f"{case.micros('wall'):>10.1f}{case.handler.process / case.n * 1e6:>12.2f}   {case.work}")
    origin = cases[1]
    lines.append(f"   map origin: {origin.micros('process') / 16:.1f} us CPU per dispatched branch "
                 f"({origin.micros('process') - origin.micros('thread'):.0f} us of each origin call runs on the dispatch pool)")
    return lines


# ---- c. dispatching a wide fan-out -------------------------------------------------------------

def dispatch_seconds(map_wf: Workflow, branches: int, workers: int, latency: float, repeats: int) -> list[float]:
    """Wall seconds of `Runtime.handle` for a map origin of `branches` items, each invoke
    sleeping `latency`; the pool is warmed up first (a warm container)."""
    store = MemoryStore()
    rt = make_runtime(map_wf, "Split", store, SleepingInvoker(latency), RuntimeConfig(dispatch_workers=workers))
    try:
        rt.handle(new_workflow({"m": max(2, workers)}, f"wf-warm-{workers}"))
        times = []
        for r in range(repeats):
            start = time.perf_counter()
            report = rt.handle(new_workflow({"m": branches}, f"wf-dispatch-{workers}-{r}"))
            times.append(time.perf_counter() - start)
            if report is None or report.invoked != branches:
                raise RuntimeError(f"dispatch: expected {branches} invokes, got {report}")
        return times
    finally:
        rt.close()


def dispatch_section(root: Path, settings: Settings) -> list[str]:
    """Part c: concurrent (pool of 64) vs one-by-one dispatch of a wide map."""
    map_wf = write_workflow(root, map_aggregate(settings.fanout_branches))
    k, lat, w = settings.fanout_branches, settings.invoke_latency, settings.concurrent_workers
    concurrent = statistics.median(dispatch_seconds(map_wf, k, w, lat, settings.concurrent_repeats))
    serial = statistics.median(dispatch_seconds(map_wf, k, 1, lat, 1))
    return [
        f"c. Dispatching a {k}-branch map with {lat * 1000:.0f} ms per invoke (Runtime.handle of the origin, wall clock)",
        "",
        (f"   concurrent, dispatch_workers={w:<4}{concurrent:>9.3f} s   (median of {settings.concurrent_repeats};"
        f" ideal ceil({k}/{w}) x {lat * 1000:.0f} ms = {math.ceil(k / w) * lat:.3f} s)"),
        f"   one-by-one, dispatch_workers=1   {serial:>9.3f} s   (ideal {k} x {lat * 1000:.0f} ms = {k * lat:.3f} s)",
        f"   speed-up: {serial / concurrent:.1f}x",
    ]


# ---- report --------------------------------------------------------------------------------

def header_lines(settings: Settings) -> list[str]:
    """What ran where."""
    return [
        f"unum bench ({'quick' if settings.quick else 'full'}) - {datetime.now(UTC):%Y-%m-%d %H:%M UTC}",
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "",
    ]


def run(settings: Settings, prices: Prices) -> str:
    """Measure everything once; return the report text."""
    started = time.perf_counter()
    lines = header_lines(settings)
    with tempfile.TemporaryDirectory(prefix="unum-bench-") as tmp:
        root = Path(tmp)
        lines += ops_section(root / "ops", settings, prices) + [""]
        lines += cpu_section(root / "cpu", settings) + [""]
        lines += dispatch_section(root / "dispatch", settings) + [""]
    lines.append(f"(bench took {time.perf_counter() - started:.1f} s; active threads at end: {threading.active_count()})")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="unum micro-benchmarks (see bench/README.md)")
    parser.add_argument("--quick", action="store_true", help="smaller loops and a 128-branch fan-out (~10 s)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "report.txt",
                        help="where to write the report (default: bench/report.txt)")
    args = parser.parse_args(argv)
    report = run(settings_for(args.quick), Prices())
    args.out.write_text(report)
    print(report, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
