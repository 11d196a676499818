"""unum on the Google Cloud emulators, measured as counts and ratios (no asserts on time).

    python bench/gcp.py [--quick]       # from the repo root; writes bench/report-gcp.txt

Needs `gcloud` with the Firestore and Pub/Sub emulators (localstack/setup.d/30-gcp-emulators.sh);
it starts its own emulator processes on free loopback ports and stops them at the end.

a. Firestore requests per transition on the emulator, counted at the wire (RPCs by method, the
   documents they write and read); cost next to Step Functions Standard.
b. Time per transition: the same chain in-process (MemoryStore), in-process over the Firestore
   emulator, and as the deployed shape (functions-framework servers on the host, triggered by
   Pub/Sub emulator push subscriptions, coordinating through the Firestore emulator).

docs/gcp.md ("Measured") says what each figure means.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout, without installing
    sys.path.insert(0, str(REPO))

from bench.run import Pattern, chain, fan_in, fan_out, map_aggregate, write_workflow  # noqa: E402
from bench.wire import FirestoreWire  # noqa: E402
from unum_entry.local.platform import local_platform  # noqa: E402
from unum_entry.stores.base import Store  # noqa: E402
from unum_entry.stores.memory import MemoryStore  # noqa: E402


@dataclass(frozen=True)
class Settings:
    quick: bool
    runs_per_pattern: int
    timing_runs: int
    chain_length: int = 5


def settings_for(quick: bool) -> Settings:
    if quick:
        return Settings(quick=True, runs_per_pattern=3, timing_runs=3)
    return Settings(quick=False, runs_per_pattern=10, timing_runs=10)


@dataclass(frozen=True)
class FirestorePrices:
    """USD per million document operations assumed for the cost line (Firestore Native mode,
    a regional location such as us-central1; multi-region locations cost about twice as much)."""

    reads_per_million: float = 0.30
    writes_per_million: float = 0.90
    deletes_per_million: float = 0.10
    sfn_per_million: float = 25.0


# ---- emulators -----------------------------------------------------------------------------

@contextmanager
def emulators() -> Iterator[tuple[Any, Any]]:
    """The Firestore and Pub/Sub emulators, their variables set in os.environ for the clients."""
    from builder.local_stack.gcp import FirestoreEmulator, PubSubEmulator

    saved = dict(os.environ)
    with FirestoreEmulator() as firestore, PubSubEmulator() as pubsub:
        os.environ.update({**firestore.env(), **pubsub.env()})
        try:
            yield firestore, pubsub
        finally:
            os.environ.clear()
            os.environ.update(saved)


def firestore_store(project: str) -> Store:
    from unum_entry.stores.firestore import FirestoreStore

    return FirestoreStore.from_url(f"firestore://bench-{uuid.uuid4().hex[:10]}?project={project}")


# ---- a. operations per transition --------------------------------------------------------------

@dataclass(frozen=True)
class OpsRow:
    label: str
    transitions: int
    runs: int
    wire: FirestoreWire
    retained: int
    deliveries: int
    committed: int

    def per(self, n: float) -> float:
        return n / self.transitions

    def cost(self, prices: FirestorePrices) -> float:
        """$ per million transitions for the billed document operations."""
        w = self.wire
        return (self.per(w.document_writes) * prices.writes_per_million + self.per(w.document_reads) * prices.reads_per_million
                + self.per(w.document_deletes) * prices.deletes_per_million)


def measure_ops(root: Path, pattern: Pattern, project: str, runs: int) -> OpsRow:
    """Run `pattern` `runs` times on the local platform over a fresh Firestore collection, every
    RPC of the store's client counted by bench.wire.FirestoreWire (reading outcomes not counted)."""
    from unum_entry.stores.firestore import FirestoreStore

    store = FirestoreStore.from_url(f"firestore://bench-{uuid.uuid4().hex[:10]}?project={project}")
    wire = FirestoreWire()
    wire.attach(store.client)
    workflow = write_workflow(root, pattern)
    retained = 0
    try:
        with local_platform(workflow, store, workers=4) as plat:
            for _ in range(runs):
                workflow_id = plat.start(pattern.input)
                plat.wait_idle(120)
                with wire.paused():
                    outcome = plat.outcome(workflow_id)
                    retained += sum(outcome.pending.values())
                if outcome.failure is not None or not outcome.complete:
                    raise RuntimeError(f"{pattern.name}: workflow failed: {outcome.failure}")
            stats = dict(plat.stats)
    finally:
        store.close()
    return OpsRow(pattern.label, pattern.edges * runs, runs, wire, retained, stats["deliveries"], stats["committed"])


def ops_section(root: Path, settings: Settings, project: str, prices: FirestorePrices) -> list[str]:
    patterns = [chain(5), fan_out(4), fan_in(4), map_aggregate(16)]
    rows = [measure_ops(root / "firestore", pattern, project, settings.runs_per_pattern) for pattern in patterns]
    methods = sorted({m for r in rows for m in r.wire.rpcs})
    header = (f"{'pattern':<22}{'transitions':>12}" + "".join(f"{m:>{len(m) + 2}}" for m in methods)
              + f"{'doc writes':>12}{'doc reads':>11}{'deletes':>9}{'dup':>7}{'retained/run':>14}")
    lines = ["a. Firestore requests per transition (emulator), counted at the wire",
             "   Every RPC of the store's client (a gRPC interceptor: bench/wire.py), LocalPlatform without faults,",
             f"   {settings.runs_per_pattern} runs per pattern; transitions = edges of the workflow graph taken (chain of n: n-1;",
             "   fan-out 1->k: k; fan-in and map of k: k out + k in). RPC columns and document operations per transition.",
             "", header, "-" * len(header)]
    for row in rows:
        w = row.wire
        lines.append(f"{row.label:<22}{row.transitions:>12}" + "".join(f"{row.per(w.rpcs[m]):>{len(m) + 2}.3f}" for m in methods)
                     + f"{row.per(w.document_writes):>12.3f}{row.per(w.document_reads):>11.3f}{row.per(w.document_deletes):>9.3f}"
                     + f"{row.per(row.deliveries - row.committed):>7.3f}{row.retained / row.runs:>14.0f}")
    lines += ["   doc writes: every Write of a Commit (a create, a set add: set with merge + ArrayUnion); doc reads: every",
              "   document a BatchGetDocuments asks for (a set add reads its shard after the write; a losing create reads",
              "   the winner). dup = deliveries that did not commit, per transition: on Firestore an add and its read are",
              "   two requests, so concurrent adders can each see a shard full and each invoke the join (its commit",
              "   absorbs the extras, at the cost of their reads). retained/run = checkpoints and set shards kept until",
              "   their expiry (the runtime deletes nothing: docs/coordination.md).",
              "",
              f"   Cost at ${prices.reads_per_million:.2f}/M reads, ${prices.writes_per_million:.2f}/M writes, "
              f"${prices.deletes_per_million:.2f}/M deletes (assumed regional list prices; free tier ignored)",
              f"   vs Step Functions Standard ${prices.sfn_per_million:.2f}/M state transitions. Pub/Sub adds one publish and",
              "   one push delivery per transition (billed by volume, 1 KB minimum each: about $0.07/M transitions at $40/TiB).",
              ""]
    header2 = f"{'pattern':<22}{'Firestore $/M t':>17}{'SFN / unum':>12}"
    lines += [header2, "-" * len(header2)]
    for row in rows:
        cost = row.cost(prices)
        lines.append(f"{row.label:<22}{cost:>17.2f}{prices.sfn_per_million / cost:>11.1f}x")
    return lines


# ---- b. time per transition ---------------------------------------------------------------------

def in_process_seconds(root: Path, pattern: Pattern, make_store: Callable[[], Store], runs: int) -> tuple[list[float], int]:
    """Wall seconds of each run of `pattern` on the LocalPlatform (one warm-up run first)."""
    workflow = write_workflow(root, pattern)
    store = make_store()
    seconds = []
    try:
        with local_platform(workflow, store, workers=4) as plat:
            plat.run(pattern.input, timeout=120)
            for _ in range(runs):
                started = time.perf_counter()
                outcome = plat.run(pattern.input, timeout=120)
                seconds.append(time.perf_counter() - started)
                if outcome.failure is not None:
                    raise RuntimeError(f"{pattern.name}: {outcome.failure}")
    finally:
        store.close()
    return seconds, len(workflow.functions)


def deployed_seconds(root: Path, pattern: Pattern, firestore: Any, pubsub: Any, runs: int) -> list[float]:
    """Wall seconds from the start POST to the result record, each function a functions-framework
    server on the host triggered by Pub/Sub emulator push subscriptions (one warm-up run first)."""
    from builder.local_stack.gcp import HostFunctions, start_workflow
    from unum_entry.outcome import read_outcome
    from unum_entry.stores.firestore import FirestoreStore

    workflow = write_workflow(root / "deployed", pattern)
    collection, prefix = f"bench-{uuid.uuid4().hex[:10]}", f"b{uuid.uuid4().hex[:8]}-"
    store_url = f"firestore://{collection}?project={firestore.project}"
    store = FirestoreStore.from_url(store_url)
    seconds = []
    with HostFunctions(workflow, store_url=store_url, invoker_url=f"pubsub://{pubsub.project}?prefix={prefix}",
                       emulators={**firestore.env(), **pubsub.env()}) as functions:
        pubsub.wire_push(functions.urls, prefix=prefix)
        try:
            for i in range(runs + 1):
                started = time.perf_counter()
                workflow_id = start_workflow(functions.urls[workflow.entry], pattern.input)["workflow"]
                deadline = started + 120
                while read_outcome(store, workflow_id).status != "succeeded":
                    if time.perf_counter() > deadline:
                        raise RuntimeError(f"{pattern.name}: workflow {workflow_id} did not finish:\n{functions.logs()}")
                    time.sleep(0.005)
                if i:  # the first run warms the servers' clients up
                    seconds.append(time.perf_counter() - started)
        finally:
            store.close()
    return seconds


def timing_section(root: Path, settings: Settings, firestore: Any, pubsub: Any) -> list[str]:
    pattern = chain(settings.chain_length)
    n = pattern.edges  # transitions: a chain of k functions takes k-1 edges
    memory, _ = in_process_seconds(root / "memory", pattern, MemoryStore, settings.timing_runs)
    emulated, _ = in_process_seconds(root / "firestore", pattern, lambda: firestore_store(firestore.project),
                                     settings.timing_runs)
    deployed = deployed_seconds(root, pattern, firestore, pubsub, settings.timing_runs)
    rows = [("in-process, MemoryStore", memory), ("in-process, Firestore emulator", emulated),
            ("functions-framework + Pub/Sub push + Firestore (emulators)", deployed)]
    base = statistics.median(memory) / n
    header = f"{'setup':<62}{'ms/transition':>15}{'p90 ms':>9}{'x in-process':>14}"
    lines = [f"b. Time per transition: chain of {settings.chain_length} functions ({n} transitions), median of "
             f"{settings.timing_runs} runs after one warm-up",
             "   (workflow start to result record, divided by the transitions; LocalPlatform with 4 workers in-process).",
             "", header, "-" * len(header)]
    for label, values in rows:
        per = [v / n for v in values]
        p90 = sorted(per)[max(0, int(len(per) * 0.9) - 1)]
        lines.append(f"{label:<62}{statistics.median(per) * 1000:>15.1f}{p90 * 1000:>9.1f}"
                     f"{statistics.median(per) / base:>13.0f}x")
    lines += ["   The emulators are single JVM processes on the same 2 CPUs; the deployed row includes the Pub/Sub",
              "   emulator's push loop (it pushes from a polling thread), so it is an upper bound on the",
              "   runtime's own share, not a prediction of Cloud Run latency."]
    return lines


# ---- report ---------------------------------------------------------------------------------

def run(settings: Settings) -> str:
    lines = [f"unum GCP bench{' (quick)' if settings.quick else ''} - {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
             f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
             f"load average {os.getloadavg()[0]:.1f} at start", ""]
    with tempfile.TemporaryDirectory(prefix="unum-bench-gcp-") as tmp, emulators() as (firestore, pubsub):
        root = Path(tmp)
        lines += ops_section(root / "ops", settings, firestore.project, FirestorePrices())
        lines += [""]
        lines += timing_section(root / "timing", settings, firestore, pubsub)
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (~1 min)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "report-gcp.txt")
    args = parser.parse_args(argv)
    report = run(settings_for(args.quick))
    print(report, end="")
    args.out.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
