"""Store throughput: what the embedded stores (SQLite with each durability, the file store, and
for comparison the memory store) do per second, on the operations a workflow transition costs
(docs/coordination.md).

    python bench/stores.py [--quick] [--dir PATH]     # from the repo root; prints the report

- single process: create (a first writer), a losing create, add_to_set on 16-slot shards, a
  16-key get_many, records() and sweep() per record;
- several threads of one process at once (8, as `run --workers 8`): what group commit gives the
  SQLite store (one fsync shared by the writers of a batch);
- several processes at once (default: one per CPU), each running transitions:
  chain = 1 create; map branch = 1 create + 1 add_to_set on its shard (slot i % 16 of shard
  i // 16, as unum_entry.fanin does).

Only store work is timed (no handler, no runtime CPU, no invoke). Values are 200 random bytes,
about a small checkpoint. The file store runs in `--dir` (default: a temporary directory; the
report names its file system, which matters: tmpfs is faster than a disk-backed one).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout, without installing
    sys.path.insert(0, str(REPO))

from unum_entry.stores.base import Store  # noqa: E402
from unum_entry.stores.file import FileStore  # noqa: E402
from unum_entry.stores.memory import MemoryStore  # noqa: E402
from unum_entry.stores.sqlite import SQLiteStore  # noqa: E402

VALUE = os.urandom(200)
SLOTS = 16
EXPIRES = int(time.time()) + 7 * 24 * 3600  # every write states its expiry (unum_entry.retention)


def rate(count: int, work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return count / (time.perf_counter() - start)


def single_process(store: Store, n: int, repeats: int) -> dict[str, float]:
    """Operations per second, the best of `repeats` runs (each on fresh keys)."""
    figures: dict[str, float] = {}

    def best(label: str, value: float) -> None:
        figures[label] = max(figures.get(label, 0.0), value)

    for r in range(repeats):
        keys = [f"c-{r}-{i}" for i in range(n)]
        best("create (first writer)", rate(n, lambda: [store.create(k, VALUE, workflow="wf", expires_at=EXPIRES) for k in keys]))
        best("create (loser, gets winner)", rate(n, lambda: [store.create(k, VALUE, workflow="wf", expires_at=EXPIRES) for k in keys]))
        best("add_to_set (16-slot shards)", rate(n, lambda: [
            store.add_to_set(f"s-{r}-{i // SLOTS}", i % SLOTS, keys[i], size=SLOTS, workflow="wf", expires_at=EXPIRES)
            for i in range(n)]))
        batches = [keys[i:i + SLOTS] for i in range(0, n, SLOTS)]
        best("get_many (16 keys), keys/s", rate(n, lambda: [store.get_many(batch) for batch in batches]))
    total = len(list(store.records()))
    best("records(), records/s", rate(total, lambda: list(store.records())))
    best("sweep (all expired), records/s", rate(total, lambda: store.sweep(now=time.time() + 10 * store.ttl_seconds)))
    return figures


def open_named(name: str, root: str) -> Store:
    """The store `name` ("file", "sqlite-full", "sqlite-normal", "sqlite-off") under `root`."""
    if name == "file":
        return FileStore(root)
    os.makedirs(root, exist_ok=True)
    return SQLiteStore.open(os.path.join(root, "unum.db"), durability=name.split("-", 1)[1])


def threaded(store: Store, kind: str, threads: int, n: int) -> float:
    """Transitions per second of `threads` threads of this process at once (store work only)."""
    import threading

    def work(worker: int) -> None:
        for i in range(n):
            key = f"c-t{kind}-{worker}-{i}"
            store.create(key, VALUE, workflow=f"wf-{worker}", expires_at=EXPIRES)
            if kind == "map":
                store.add_to_set(f"s-t-{worker}-{i // SLOTS}", i % SLOTS, key, size=SLOTS, workflow=f"wf-{worker}",
                                 expires_at=EXPIRES)

    workers = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
    began = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return threads * n / (time.perf_counter() - began)


def _transitions(name: str, root: str, kind: str, worker: int, n: int, start, results) -> None:
    store = open_named(name, root)
    start.wait()
    began = time.perf_counter()
    for i in range(n):
        key = f"c-{kind}-{worker}-{i}"
        store.create(key, VALUE, workflow=f"wf-{worker}", expires_at=EXPIRES)
        if kind == "map":
            store.add_to_set(f"s-{worker}-{i // SLOTS}", i % SLOTS, key, size=SLOTS, workflow=f"wf-{worker}", expires_at=EXPIRES)
    results.put(time.perf_counter() - began)


def parallel(name: str, root: str, kind: str, processes: int, n: int, repeats: int) -> float:
    """Transitions per second of `processes` workers at once, the best of `repeats` runs."""
    return max(_parallel(name, os.path.join(root, str(r)), kind, processes, n) for r in range(repeats))


def _parallel(name: str, root: str, kind: str, processes: int, n: int) -> float:
    open_named(name, root).close()
    context = multiprocessing.get_context("fork")
    start, results = context.Event(), context.Queue()
    workers = [context.Process(target=_transitions, args=(name, root, kind, w, n, start, results))
               for w in range(processes)]
    for worker in workers:
        worker.start()
    time.sleep(0.2)
    began = time.perf_counter()
    start.set()
    for _ in workers:
        results.get(timeout=600)
    elapsed = time.perf_counter() - began
    for worker in workers:
        worker.join()
    return processes * n / elapsed


def filesystem(path: str) -> str:
    try:
        out = subprocess.run(["df", "-T", path], capture_output=True, text=True, check=True).stdout.splitlines()
        return out[-1].split()[1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer operations")
    parser.add_argument("--dir", help="where the file store lives (default: a temporary directory)")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure; the best is reported")
    parser.add_argument("--threads", type=int, default=8, help="threads of the one-process concurrent figure")
    args = parser.parse_args()
    n = 2_000 if args.quick else 20_000
    base = args.dir or tempfile.mkdtemp(prefix="unum-bench-stores-")
    print(f"unum store throughput — Python {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"file and SQLite stores on {filesystem(base)} ({base}), {n} operations per run, best of {args.repeats}; "
          f"load average before: {os.getloadavg()[0]:.1f}")
    try:
        names = ("sqlite-full", "sqlite-normal", "sqlite-off", "file")
        for name in (*names, "memory"):
            store = MemoryStore() if name == "memory" else open_named(name, os.path.join(base, f"single-{name}"))
            print(f"\n{name} store, one process, one thread:")
            for label, value in single_process(store, n, args.repeats).items():
                print(f"  {label:34s} {value:>10,.0f} /s  ({1e6 / value:6.1f} µs)")
            store.close()
        labels = {"chain": "chain (1 create each)", "map": "map branch (1 create + 1 add_to_set)"}
        for name in names:
            print(f"\n{name} store, one process, {args.threads} threads at once (transitions/s, store work only):")
            for kind in ("chain", "map"):
                store = open_named(name, os.path.join(base, f"threads-{name}-{kind}"))
                value = max(threaded(store, kind, args.threads, n // args.threads) for _ in range(args.repeats))
                store.close()
                print(f"  {labels[kind]:38s} {value:>10,.0f} /s")
        for name in names:
            print(f"\n{name} store, {args.processes} processes at once (transitions/s, store work only):")
            for kind in ("chain", "map"):
                value = parallel(name, os.path.join(base, f"parallel-{name}-{kind}"), kind, args.processes,
                                 n // args.processes, args.repeats)
                print(f"  {labels[kind]:38s} {value:>10,.0f} /s")
        print(f"\nload average after: {os.getloadavg()[0]:.1f} (other work on the machine lowers every figure)")
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
