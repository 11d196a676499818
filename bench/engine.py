"""The embedded engine at its store's speed: CPU per transition and memory per map branch.

    python bench/engine.py [--chain 1000] [--map 10000] [--store memory|sqlite] [--queue memory|sqlite]
    python bench/engine.py --map 1000000 --chain 0       # the million-branch map + sum
    python bench/engine.py ... --helpers 0               # the engine alone, no helper process

Runs a chain of no-op functions and a map of no-op branches + a sum (fan-in) on `LocalPlatform`
in this process, and prints per workload: transitions (invocations committed), wall time, the
process's CPU time per transition, and the peak RSS growth per map branch. `--queue sqlite` is
`run`'s durable delivery queue (unum_entry.local.queue.SQLiteQueue): in the store's own database
with `--store sqlite` (as `run` does), else in a temporary file; `--store sqlite` the SQLite store
(durability normal unless --durability). With `--store sqlite` it also prints the raw commit rate
(one thread creating records one at a time on a fresh store: store work only, same durability,
same file system) and each workload's transitions/s as a share of it. With the SQLite store and
queue, wide fan-outs also run in helper processes (unum_entry.local.helpers), as with `run`:
their share of the transitions, CPU and peak RSS are printed too. Not a test: figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from unum_entry.local.heap import freeze_loaded  # noqa: E402
from unum_entry.local.platform import LocalPlatform  # noqa: E402
from unum_entry.local.queue import MemoryQueue, SQLiteQueue  # noqa: E402
from unum_entry.stores.memory import MemoryStore  # noqa: E402
from unum_entry.workflow import load_workflow  # noqa: E402


def _function(folder: Path, name: str, code: str, instructions: list[dict[str, object]]) -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "app.py").write_text(code)
    (folder / name / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": name, "handler": "app.handler",
                                                            "instructions": instructions}))


def chain(folder: Path, length: int) -> Path:
    """S0 → … → S{length-1}, each returning its input + 1 (a loop would reuse one function; a
    chain of distinct functions is what a Step Functions machine of `length` Task states is)."""
    for i in range(length):
        _function(folder, f"S{i}", "def handler(event, context):\n    return event + 1\n",
                  [{"op": "invoke", "function": f"S{i + 1}"}] if i + 1 < length else [])
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "chain", "entry": "S0"}))
    return folder


def map_sum(folder: Path) -> Path:
    """Split (input: n) → a map of n Items → Sum."""
    _function(folder, "Split", "def handler(event, context):\n    return list(range(event))\n",
              [{"op": "create_set", "function": "Sum", "shape": "aggregate"}, {"op": "map", "function": "Item"}])
    _function(folder, "Item", "def handler(event, context):\n    return event\n", [{"op": "fan_in", "function": "Sum"}])
    _function(folder, "Sum", "def handler(event, context):\n    return sum(event)\n", [])
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "map", "entry": "Split"}))
    return folder


def rss_mib() -> float:
    """Peak RSS of this process so far (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def raw_commit_rate(args: argparse.Namespace, tmp: Path, n: int = 2000) -> float:
    """Creates per second of one thread on a fresh SQLite store (one commit each), the best of 3."""
    from unum_entry.stores.sqlite import SQLiteStore

    store = SQLiteStore.open(tmp / "raw.db", durability=args.durability)
    value, expires = os.urandom(200), int(time.time()) + 86400
    best = 0.0
    for r in range(3):
        began = time.perf_counter()
        for i in range(n):
            store.create(f"raw-{r}-{i}", value, workflow="raw", expires_at=expires)
        best = max(best, n / (time.perf_counter() - began))
    store.close()
    return best


def _children_cpu() -> float:
    """CPU seconds of this process's ended children (helper processes)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(label: str, folder: Path, value: object, args: argparse.Namespace, tmp: Path,
            raw: float | None = None) -> None:
    if args.store == "sqlite":
        from unum_entry.stores.sqlite import SQLiteStore
        store = SQLiteStore.open(tmp / f"{label}.db", durability=args.durability)
        queue = SQLiteQueue(store.database) if args.queue == "sqlite" else MemoryQueue()  # as `run` does
    else:
        store = MemoryStore()
        queue = SQLiteQueue(tmp / f"{label}-queue.db") if args.queue == "sqlite" else MemoryQueue()
    workflow = load_workflow(folder)
    rss_before = rss_mib()
    helped_cpu = _children_cpu()
    with LocalPlatform(workflow, store, workers=args.workers, queue=queue,
                       helpers=getattr(args, "helpers", None)) as platform:
        freeze_loaded()  # as `run` does once it has loaded the workflow (unum_entry.local.heap)
        # Timed from here: the platform's start (importing every handler) is not a transition's cost.
        usage, cpu, wall = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
        result = platform.run(value, timeout=args.timeout)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - usage.ru_nvcsw
        committed = platform.stats["committed"]
        helped = platform.stats["helped"]
    # Helper processes (unum_entry.local.helpers) are counted once ended, with the platform.
    helped_cpu = _children_cpu() - helped_cpu
    grown = rss_mib() - rss_before
    helpers = (f"; helper processes ran {helped / committed:.0%} of them with {helped_cpu / committed * 1e6:.0f} us "
               f"more CPU/transition, peak RSS {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f} "
               "MiB") if helped else ""
    print(f"{label}: {committed} transitions in {wall:.2f} s ({committed / wall:,.0f}/s); CPU "
          f"{cpu / committed * 1e6:.0f} us/transition; {switches / committed:.1f} voluntary context switches/transition; "
          f"peak RSS {rss_mib():.0f} MiB (+{grown:.0f}); result {str(result.result)[:40]}{helpers}", flush=True)
    if raw:
        print(f"  {committed / wall / raw:.0%} of the raw commit rate ({raw:,.0f} creates/s)", flush=True)
    if label.startswith("map"):
        print(f"  memory per map branch (peak RSS growth / branches): {grown * 2**20 / max(1, int(str(value))):.0f} B",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=1000)
    parser.add_argument("--map", type=int, default=10000)
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--durability", choices=("full", "normal", "off"), default="normal")
    parser.add_argument("--queue", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--helpers", type=int, default=None,
                        help="helper processes for wide fan-outs (default: as `run`, one per other CPU; 0: none)")
    args = parser.parse_args()
    print(f"store {args.store}, queue {args.queue}, {args.workers} workers, {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        workloads = ([(f"chain-{args.chain}", chain(Path(tmp) / "chain", args.chain), 0)] if args.chain else []) + \
                    ([(f"map-{args.map}", map_sum(Path(tmp) / "map"), args.map)] if args.map else [])
        for label, folder, value in workloads:
            # Measured again right before each workload: a shared disk's speed drifts within minutes.
            raw = raw_commit_rate(args, Path(tmp) / label) if args.store == "sqlite" else None
            if raw:
                print(f"raw commit rate, durability {args.durability}: {raw:,.0f} creates/s ({1e6 / raw:.0f} us "
                      "each)", flush=True)
            measure(label, folder, value, args, Path(tmp), raw)


if __name__ == "__main__":
    main()
