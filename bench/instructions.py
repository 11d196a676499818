"""The embedded engine's CPU per transition as instructions executed: a count, not a timing.

    python bench/instructions.py [--workload chain|map] [--store memory|sqlite] [--durability off|normal|full] [--quick]

Times on a shared 2-CPU VM drift by a third between runs (docs/embedded-engine.md), too much to
see a 5 % change. An instruction count does not drift: this script runs one workload on
`LocalPlatform` (one worker: no scheduling in the count) under valgrind's callgrind at two sizes
and prints the instructions per transition, (I(large) - I(small)) / (large - small) transitions,
so start-up and imports cancel out. Two runs of the same code agree within 0.2 %. With
`--store sqlite` it also counts the raw commit (one `store.create` per transaction, the
denominator of bench/engine.py's ratio) the same way, and prints the engine's count per
transition as a multiple of it. What a count leaves out: time in the kernel (fsync, futex) and
waiting. Needs `valgrind` (apt); about a minute per workload (`--quick`: smaller sizes, a few
seconds, a rougher figure). Not a test: figures only.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

#: Per workload, the small and the large size: runs of a CHAIN-function chain, map items, creates.
SIZES = {"chain": (2, 12), "map": (500, 2500), "raw": (500, 2500)}
QUICK = {"chain": (1, 3), "map": (100, 300), "raw": (100, 300)}
CHAIN = 100  # a chain's functions: fixed, so importing their handlers cancels out


def run_once(kind: str, n: int, store_kind: str, durability: str) -> None:
    """The measured process: `n` runs of a chain, a map of `n` items, or `n` raw creates
    (valgrind counts the whole process)."""
    from unum_entry.local import platform as local_platform
    from unum_entry.local.heap import freeze_loaded
    from unum_entry.local.platform import LocalPlatform
    from unum_entry.local.queue import MemoryQueue, SQLiteQueue
    from unum_entry.outcome import WorkflowStatus
    from unum_entry.stores.memory import MemoryStore
    from unum_entry.stores.sqlite import SQLiteStore
    from unum_entry.workflow import load_workflow

    import engine

    # Under valgrind every delivery takes ~50 times as long as natively; the worker must still
    # see its deliveries as quick as they are natively (it takes them in batches and commits a
    # batch of fan-in branches together only then), or the count is of another code path.
    local_platform.QUICK *= 100
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        store = SQLiteStore.open(folder / "s.db", durability=durability) if store_kind == "sqlite" else MemoryStore()
        if kind == "raw":
            value, expires = os.urandom(200), int(time.time()) + 86400
            for i in range(n):
                store.create(f"raw-{i}", value, workflow="raw", expires_at=expires)
            return
        workflow = load_workflow(engine.chain(folder / "w", CHAIN) if kind == "chain" else engine.map_sum(folder / "w"))
        queue = SQLiteQueue(store.database) if store_kind == "sqlite" else MemoryQueue()  # as `run` does
        with LocalPlatform(workflow, store, workers=1, queue=queue, helpers=0) as platform:  # valgrind counts one process
            freeze_loaded()  # as `run` does (unum_entry.local.heap)
            for _ in range(n if kind == "chain" else 1):  # (`run` would also scan the store for each outcome)
                workflow_id = platform.start(0 if kind == "chain" else n)
                platform.wait_idle(3600)
            result = platform.outcome(workflow_id)
        if result.status is not WorkflowStatus.SUCCEEDED:
            raise SystemExit(f"{kind} {n}: {result.status.value}")


def instructions(kind: str, n: int, args: argparse.Namespace) -> int:
    """Instructions the whole process executed for `n` transitions of `kind` (valgrind)."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
               __file__, "--child", kind, str(n), "--store", args.store, "--durability", args.durability]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind run of {kind} {n} failed:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_transition(kind: str, args: argparse.Namespace) -> float:
    """Instructions per transition of `kind`: the difference between two sizes, per invocation
    committed (a run of the chain commits CHAIN, a map of n items n + 2) or per raw create."""
    small, large = (QUICK if args.quick else SIZES)[kind]
    transitions = (large - small) * (CHAIN if kind == "chain" else 1)
    return (instructions(kind, large, args) - instructions(kind, small, args)) / transitions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("chain", "map"), action="append")
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--durability", choices=("full", "normal", "off"), default="full")
    parser.add_argument("--quick", action="store_true", help="smaller sizes: seconds, not minutes")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_once(args.child[0], int(args.child[1]), args.store, args.durability)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("bench/instructions.py: valgrind is not installed (apt install valgrind)")
    store = args.store + (f" (durability {args.durability})" if args.store == "sqlite" else "")
    print(f"store {store}, 1 worker, Python {sys.version.split()[0]}", flush=True)
    raw = per_transition("raw", args) if args.store == "sqlite" else None
    if raw:
        print(f"raw commit (one store.create per transaction): {raw:,.0f} instructions", flush=True)
    for kind in args.workload or ["chain", "map"]:
        count = per_transition(kind, args)
        line = f"{kind}: {count:,.0f} instructions per transition"
        if raw:
            line += f" ({count / raw:.2f} raw commits)"
        print(line, flush=True)


if __name__ == "__main__":
    main()
