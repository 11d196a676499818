"""Each engine trick against the same code without it, side by side in one run (issue 46).

    python bench/tricks.py --off DIR [--off-env K=V ...] [--on DIR] [--workload NAME ...] [--pairs 5]
    python bench/tricks.py --off DIR --instructions [--instruction-store memory]   # valgrind counts instead

`--on` is the checkout with the trick (default: this one), `--off` a checkout without it (a
scratch worktree: `git worktree add /tmp/wt-TRICK HEAD`, the trick reverted there; or the same
checkout with `--off-env`, e.g. `UNUM_HELPERS=0`). Every workload runs as its own process on
each side in turn, on then off, `--pairs` times (the machine's speed drifts: a ratio taken pair
by pair holds where absolute times do not), and the script prints per workload the median and
the min-max of on, off and the ratio on/off of CPU seconds (the process and every child it
reaped: helper processes) and wall seconds. A ratio below 1 is what the trick buys.

The workloads are what users run locally, each through the real command line unless said:
- `asl-order`: `python -m builder run images/asl-order/statemachine.json` (10 states, a Map, a Parallel);
- `sfn-40`: a generated Step Functions machine of 40 Task states, each its own Lambda function;
- `map-10k`: `run` of a map of 10,000 no-op items + a sum (SQLite, durable, helper processes as `run` has them);
- `durable-order`: `run` of images/durable-order (a durable-functions handler: steps, a wait);
- `runs-200`: one process that runs 200 short workflows (a 5-function chain) one after another
  on one `LocalPlatform` over the memory store, as a test suite does;
- `runs-200-sqlite`: the same over a SQLite store;
- `engine`: README's `bench/engine.py --chain 20000 --map 20000` (memory store), its own µs per
  transition of the chain and the map + sum printed as well.
Not a test: figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
#: Bound on one measured process (seconds).
TIMEOUT = 900


def _write_sfn(folder: Path, states: int) -> Path:
    """A Step Functions machine of `states` Task states in a row, each its own Lambda function
    adding 1, with its functions/ folder."""
    table: dict[str, object] = {}
    for i in range(states):
        name = f"Step{i}"
        state: dict[str, object] = {"Type": "Task", "Resource": f"arn:aws:lambda:us-east-1:123456789012:function:{name}"}
        state.update({"Next": f"T{i + 1}"} if i + 1 < states else {"End": True})
        table[f"T{i}"] = state
        (folder / "functions" / name).mkdir(parents=True)
        (folder / "functions" / name / "app.py").write_text("def handler(event, context):\n    return event + 1\n")
    (folder / "statemachine.json").write_text(json.dumps({"StartAt": "T0", "States": table}))
    return folder / "statemachine.json"


def _write_map(folder: Path) -> Path:
    """bench/engine.py's map + sum as a workflow folder."""
    sys.path.insert(0, str(REPO / "bench"))
    import engine  # bench/engine.py (writes files only)

    return engine.map_sum(folder)


def _write_chain(folder: Path, length: int) -> Path:
    sys.path.insert(0, str(REPO / "bench"))
    import engine

    return engine.chain(folder, length)


MANY = """
import sys, tempfile
from pathlib import Path
from unum_entry.local.platform import LocalPlatform
from unum_entry.outcome import WorkflowStatus
from unum_entry.workflow import load_workflow
folder, store_kind, runs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
with tempfile.TemporaryDirectory() as tmp:
    if store_kind == "sqlite":
        from unum_entry.local.queue import SQLiteQueue
        from unum_entry.stores.sqlite import SQLiteStore
        store = SQLiteStore.open(Path(tmp) / "s.db")
        queue = SQLiteQueue(store.database)
    else:
        from unum_entry.local.queue import MemoryQueue
        from unum_entry.stores.memory import MemoryStore
        store, queue = MemoryStore(), MemoryQueue()
    with LocalPlatform(load_workflow(folder), store, queue=queue) as platform:
        for i in range(runs):
            if platform.run(i, timeout=60).status is not WorkflowStatus.SUCCEEDED:
                raise SystemExit("a run failed")
"""


def workloads(tmp: Path) -> dict[str, Callable[[Path, Path], list[str]]]:
    """Name -> (checkout, scratch folder of this measurement) -> the command to run there."""
    images = REPO / "images"
    sfn = _write_sfn(tmp / "sfn-40", 40)
    mapped = _write_map(tmp / "map")
    chain5 = _write_chain(tmp / "chain5", 5)
    run = [PYTHON, "-m", "builder", "run"]
    return {
        "asl-order": lambda tree, scratch: run + [str(images / "asl-order/statemachine.json"), "--input",
                                                  f"@{images / 'asl-order/input.json'}", "--store", str(scratch / "s.db")],
        "sfn-40": lambda tree, scratch: run + [str(sfn), "--input", "0", "--store", str(scratch / "s.db")],
        "map-10k": lambda tree, scratch: run + [str(mapped), "--input", "10000", "--store", str(scratch / "s.db")],
        "durable-order": lambda tree, scratch: run + [str(images / "durable-order"), "--input",
                                                      f"@{images / 'durable-order/input.json'}",
                                                      "--store", str(scratch / "s.db")],
        "runs-200": lambda tree, scratch: [PYTHON, "-c", MANY, str(chain5), "memory", "200"],
        "runs-200-sqlite": lambda tree, scratch: [PYTHON, "-c", MANY, str(chain5), "sqlite", "200"],
        "engine": lambda tree, scratch: [PYTHON, str(tree / "bench/engine.py"), "--chain", "20000", "--map", "20000"],
    }


def measure(command: list[str], tree: Path, env: dict[str, str], scratch: Path) -> tuple[float, float, str]:
    """(CPU seconds of the process and its reaped children, wall seconds, its stdout) of one run
    of `command` in checkout `tree` (its modules first on the path)."""
    scratch.mkdir(parents=True)
    environment = {**os.environ, **env, "PYTHONPATH": str(tree)}
    began = time.perf_counter()
    process = subprocess.Popen(command, cwd=tree, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        out, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        raise SystemExit(f"bench/tricks.py: {command[2:4]} took over {TIMEOUT} s in {tree}") from None
    wall = time.perf_counter() - began
    if process.returncode != 0:
        raise SystemExit(f"bench/tricks.py: {' '.join(command[:4])}... failed in {tree}:\n{err[-1500:]}")
    return _cpu(process), wall, out


def _cpu(process: subprocess.Popen[str]) -> float:
    """CPU seconds of the reaped `process` and its descendants: the growth of this process's
    RUSAGE_CHILDREN since the previous call (one process is measured at a time)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    spent = total - _cpu.seen  # type: ignore[attr-defined]
    _cpu.seen = total  # type: ignore[attr-defined]
    return spent


_cpu.seen = 0.0  # type: ignore[attr-defined]

ENGINE_LINE = re.compile(r"^(chain|map)-\d+: .*?CPU (\d+) us/transition", re.M)


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"


def compare(name: str, make: Callable[[Path, Path], list[str]], args: argparse.Namespace, tmp: Path) -> None:
    """`args.pairs` alternating pairs of workload `name`, on then off; prints the figures."""
    sides = {"on": (args.on, {}), "off": (args.off, dict(v.split("=", 1) for v in args.off_env))}
    figures: dict[str, dict[str, list[float]]] = {"on": {}, "off": {}}
    for pair in range(args.pairs + 1):  # the first pair warms the caches and is not counted
        for side, (tree, env) in sides.items():
            cpu, wall, out = measure(make(tree, tmp), tree, env, tmp / f"{name}-{side}-{pair}")
            if pair == 0:
                continue
            row = figures[side]
            row.setdefault("cpu s", []).append(cpu)
            row.setdefault("wall s", []).append(wall)
            for kind, us in ENGINE_LINE.findall(out):
                row.setdefault(f"{kind} us/transition", []).append(float(us))
    print(f"{name} ({args.pairs} pairs): {' '.join(make(args.on, tmp / 'x'))[:160]}", flush=True)
    for figure in figures["on"]:
        on, off = figures["on"][figure], figures["off"][figure]
        ratios = [a / b for a, b in zip(on, off)]
        print(f"  {figure:>18}: on {summary(on)}; off {summary(off)}; on/off {summary(ratios)}", flush=True)


INSTRUCTION_LINE = re.compile(r"^(raw commit|chain|map)\D*?([\d,]+) instructions", re.M)


def compare_instructions(args: argparse.Namespace) -> None:
    """bench/instructions.py --quick in each checkout, alternating, on the memory and the SQLite
    store: instructions per transition, one worker (a count: two runs agree within ~0.2 %)."""
    sides = {"on": (args.on, {}), "off": (args.off, dict(v.split("=", 1) for v in args.off_env))}
    for store in args.instruction_store or ["memory", "sqlite"]:
        counts: dict[str, dict[str, float]] = {}
        for side, (tree, env) in sides.items():
            done = subprocess.run([PYTHON, str(tree / "bench/instructions.py"), "--quick", "--store", store],
                                  cwd=tree, env={**os.environ, **env, "PYTHONPATH": str(tree)},
                                  capture_output=True, text=True, timeout=TIMEOUT)
            if done.returncode != 0:
                raise SystemExit(f"bench/tricks.py: bench/instructions.py failed in {tree}:\n{done.stderr[-1500:]}")
            counts[side] = {kind: float(n.replace(",", "")) for kind, n in INSTRUCTION_LINE.findall(done.stdout)}
        for kind in ("chain", "map"):
            on, off = counts["on"][kind], counts["off"][kind]
            print(f"instructions, {store} store, {kind}: on {on:,.0f}; off {off:,.0f}; on/off {on / off:.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--on", type=Path, default=REPO, help="the checkout with the trick (default: this one)")
    parser.add_argument("--off", type=Path, required=True, help="a checkout without it (may be the same, with --off-env)")
    parser.add_argument("--off-env", action="append", default=[], metavar="K=V", help="environment of the off side")
    parser.add_argument("--workload", action="append", choices=("asl-order", "sfn-40", "map-10k", "durable-order",
                                                                "runs-200", "runs-200-sqlite", "engine"))
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="valgrind instruction counts instead of times")
    parser.add_argument("--instruction-store", action="append", choices=("memory", "sqlite"),
                        help="with --instructions: the store counted (default: both; ~10 min each on 2 busy CPUs)")
    args = parser.parse_args()
    args.on, args.off = args.on.resolve(), args.off.resolve()
    for tree in (args.on, args.off):
        if not (tree / "unum_entry").is_dir():
            parser.error(f"{tree} is not a checkout of unum (no unum_entry/)")
    if any("=" not in v for v in args.off_env):
        parser.error("--off-env takes K=V")
    print(f"on {args.on}, off {args.off} {' '.join(args.off_env)}; {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    if args.instructions:
        compare_instructions(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        table = workloads(Path(tmp))
        for name in args.workload or ["asl-order", "sfn-40", "map-10k", "durable-order", "runs-200", "runs-200-sqlite"]:
            compare(name, table[name], args, Path(tmp) / "runs")


if __name__ == "__main__":
    main()
