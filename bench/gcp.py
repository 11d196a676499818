"""unum on the Google Cloud emulators, measured as counts and ratios (no asserts on time).

    python bench/gcp.py [--quick]       # from the repo root; writes bench/report-gcp.txt

Needs `gcloud` with the Firestore and Pub/Sub emulators (localstack/setup.d/30-gcp-emulators.sh);
it starts its own emulator processes on free loopback ports and stops them at the end.

a. Store operations per transition on Firestore (the emulator), by kind, and the Firestore
   document operations they are billed as; cost next to Step Functions Standard.
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
from unum_entry.local.platform import local_platform  # noqa: E402
from unum_entry.stores.base import Kind, Store  # noqa: E402
from unum_entry.stores.counting import CountingStore  # noqa: E402
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
    from builder.localstack_gcp import FirestoreEmulator, PubSubEmulator

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
    counts: dict[str, int]
    leftovers: int
    deliveries: int

    def per(self, kind: str) -> float:
        return self.counts.get(kind, 0) / self.transitions

    @property
    def document_writes(self) -> float:
        """Billed writes: every create (checkpoint, result, set, marker, ...) and set add."""
        return sum(self.per(k) for k in self.counts if k.startswith("create_") or k == "add_to_set")

    @property
    def document_reads(self) -> float:
        """Billed reads: one per key read, plus the read after each set add (ArrayUnion, then get)."""
        return self.per("read") + self.per("add_to_set")

    @property
    def document_deletes(self) -> float:
        return self.per("delete")


def measure_ops(root: Path, pattern: Pattern, store: Store, runs: int) -> OpsRow:
    workflow = write_workflow(root, pattern)
    counting = CountingStore(store)
    leftovers = 0
    with local_platform(workflow, counting, workers=4) as plat:
        for _ in range(runs):
            outcome = plat.run(pattern.input, timeout=120)
            if outcome.failure is not None or not outcome.results:
                raise RuntimeError(f"{pattern.name}: workflow failed: {outcome.failure}")
            leftovers += sum(1 for r in store.records(outcome.workflow_id) if r.kind is not Kind.RESULT)
        stats = dict(plat.stats)
    return OpsRow(pattern.label, stats["committed"], dict(counting.counts), leftovers, stats["deliveries"])


def ops_section(root: Path, settings: Settings, project: str, prices: FirestorePrices) -> list[str]:
    patterns = [chain(5), fan_out(4), fan_in(4), map_aggregate(16)]
    rows, reference = [], []
    for pattern in patterns:
        store = firestore_store(project)
        try:
            rows.append(measure_ops(root / "firestore", pattern, store, settings.runs_per_pattern))
        finally:
            store.close()
        reference.append(measure_ops(root / "memory", pattern, MemoryStore(), settings.runs_per_pattern))
    columns = sorted({k for r in rows for k in r.counts})
    header = (f"{'pattern':<22}{'transitions':>12}" + "".join(f"{c:>{len(c) + 2}}" for c in columns)
              + f"{'dup':>7}{'left':>6}")
    lines = ["a. Store operations per transition on Firestore (emulator), by kind",
             f"   CountingStore over FirestoreStore, LocalPlatform without faults, {settings.runs_per_pattern} runs per pattern",
             "   (the MemoryStore rows: the same runs in memory, for comparison).",
             "", header, "-" * len(header)]
    for label, group in (("Firestore emulator", rows), ("MemoryStore", reference)):
        lines.append(f"  {label}")
        for row in group:
            lines.append(f"{row.label:<22}{row.transitions:>12}" + "".join(f"{row.per(c):>{len(c) + 2}.3f}" for c in columns)
                         + f"{(row.deliveries - row.transitions) / row.transitions:>7.3f}{row.leftovers:>6}")
    lines += ["   dup = deliveries that did not commit (duplicates absorbed by a checkpoint) per transition. On Firestore a",
              "   set add is an ArrayUnion then a read, so concurrent adders can each see a set full: each then invokes",
              "   the join (its checkpoint absorbs the extra deliveries) or collects a fan-out's garbage (deletes are",
              "   idempotent but each is billed). That is where Firestore's extra reads and deletes come from.",
              "   left = objects other than results still stored after the runs (fan-out without a join keeps its",
              "   start marker, one per run, until the TTL: a documented limit).",
              "",
              "   Billed Firestore document operations per transition (a create or a set add is one write, a set add",
              "   is followed by one read, every key read is one read, every key deleted one delete) and their cost at",
              f"   ${prices.reads_per_million:.2f}/M reads, ${prices.writes_per_million:.2f}/M writes, "
              f"${prices.deletes_per_million:.2f}/M deletes (assumed regional list prices; free tier ignored)",
              f"   vs Step Functions Standard ${prices.sfn_per_million:.2f}/M state transitions. Pub/Sub adds one publish and",
              "   one push delivery per transition (billed by volume, 1 KB minimum each: about $0.07/M transitions at $40/TiB).",
              ""]
    header2 = f"{'pattern':<22}{'writes/t':>10}{'reads/t':>10}{'deletes/t':>11}{'Firestore $/M t':>17}{'SFN / unum':>12}"
    lines += [header2, "-" * len(header2)]
    for row in rows:
        cost = (row.document_writes * prices.writes_per_million + row.document_reads * prices.reads_per_million
                + row.document_deletes * prices.deletes_per_million)
        lines.append(f"{row.label:<22}{row.document_writes:>10.3f}{row.document_reads:>10.3f}{row.document_deletes:>11.3f}"
                     f"{cost:>17.2f}{prices.sfn_per_million / cost:>11.1f}x")
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
    from builder.localstack_gcp import HostFunctions, start_workflow
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
    n = settings.chain_length
    memory, _ = in_process_seconds(root / "memory", pattern, MemoryStore, settings.timing_runs)
    emulated, _ = in_process_seconds(root / "firestore", pattern, lambda: firestore_store(firestore.project),
                                     settings.timing_runs)
    deployed = deployed_seconds(root, pattern, firestore, pubsub, settings.timing_runs)
    rows = [("in-process, MemoryStore", memory), ("in-process, Firestore emulator", emulated),
            ("functions-framework + Pub/Sub push + Firestore (emulators)", deployed)]
    base = statistics.median(memory) / n
    header = f"{'setup':<62}{'ms/transition':>15}{'p90 ms':>9}{'x in-process':>14}"
    lines = [f"b. Time per transition: chain of {n} functions, median of {settings.timing_runs} runs after one warm-up",
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
