"""What a step costs (unum_entry.steps), as store operations and time, against an unprotected call.

    python bench/steps.py [--quick]      # from the repo root; prints, and writes bench/steps-report.txt

a. Store operations per step, by kind: a two-function chain `A -> B` where both are
   `@durable` and the entry A runs N steps of one kind (plain `ctx.step`, transactional `ctx.transact`
   touching one application item, or a plain step registering a compensation), over
   CountingStore(MemoryStore); (ops(N) - ops(0)) / N is the cost per step, ops(0) - plain chain
   the fixed cost of a durable function that ran no step (zero by design).
b. Time per step: `Journal.step` / `Journal.transact` called directly over MemoryStore (CPU of
   the step machinery) and FileStore (plus the file system), fresh and replayed, next to calling
   the same function bare.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from unum_entry.hooks import NoHooks
from unum_entry.local.platform import local_platform
from unum_entry.steps import Journal, StepEnv, durable
from unum_entry.stores.counting import CountingStore
from unum_entry.stores.file import FileStore
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import FunctionSource, write_workflow

KINDS = {
    "none (plain handler)": None,
    "step": "ctx.step('s{i}', lambda: {i})",
    "transact (1 item)": "ctx.transact('s{i}', lambda tx: tx.put('t', 'k{i}', {i}))",
    "step + compensation": "ctx.step('s{i}', lambda: {i}, compensate=undo)",
}
PRELUDE = "from unum_entry.steps import durable\n\ndef undo(result):\n    return None\n\n"


def chain_ops(root: Path, kind: str, body: str | None, steps: int, runs: int) -> Counter[str]:
    """Store operations of `runs` runs of A(steps x body) -> B, summed."""
    if body is None:
        code_a = "def handler(event, ctx):\n    return event\n"
    else:
        lines = "".join(f"    {body.format(i=i)}\n" for i in range(steps))
        code_a = PRELUDE + "@durable\ndef handler(event, ctx):\n" + lines + "    return event\n"
    name = f"{len(list(root.iterdir()))}"
    workflow = write_workflow(root / name, name=name, entry="A", functions={
        "A": FunctionSource(code_a, [{"op": "invoke", "function": "B"}]),
        # B ends the workflow: @durable (when A is) so it drops the compensation log at the end.
        "B": FunctionSource(("" if body is None else PRELUDE + "@durable\n") + "def handler(event, ctx):\n    return event\n")})
    store = CountingStore(MemoryStore())
    with local_platform(workflow, store, workers=1) as platform:
        for _ in range(runs):
            outcome = platform.run(1, timeout=60)
            # Checkpoints and step records are retained until their TTL (docs/coordination.md:
            # retention), so only the outcome is checked here, not what the store still holds.
            if outcome.failure or not outcome.complete:
                raise RuntimeError(f"{kind} x{steps}: {outcome.failure or 'did not complete'}")
    return store.counts


def ops_section(runs: int) -> list[str]:
    n = 5
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base = chain_ops(root, "none", None, 0, runs)
        rows = []
        for kind, body in KINDS.items():
            if body is None:
                continue
            zero = chain_ops(root, kind, body, 0, runs)
            many = chain_ops(root, kind, body, n, runs)
            keys = sorted(set(many) | set(zero) | set(base))
            per_step = {k: (many[k] - zero[k]) / (n * runs) for k in keys}
            fixed = {k: (zero[k] - base[k]) / runs for k in keys}
            rows.append((kind, per_step, fixed))
    columns = sorted({k for _, per, _ in rows for k, v in per.items() if v})
    header = f"{'step kind':<22}" + "".join(f"{c:>{max(len(c), 6) + 2}}" for c in columns)
    lines = [
        "a. Store operations per step (CountingStore over MemoryStore; a chain A -> B, both @durable)",
        f"   {runs} runs each of A with 0 and {n} steps; per step = (ops(5) - ops(0)) / 5 per run.",
        "   read = keys read; transact = one multi-item transaction; transact_item = items it writes or checks",
        "   (DynamoDB bills each transactional item as 2 writes); create_step = the manifest before the commit;",
        "   delete = keys collected with the checkpoint.",
        "",
        header,
        "-" * len(header),
    ]
    for kind, per, _ in rows:
        lines.append(f"{kind:<22}" + "".join(f"{per.get(c, 0):>{max(len(c), 6) + 2}.2f}" for c in columns))
    fixed_any = {k: v for _, _, fixed in rows for k, v in fixed.items() if v}
    lines.append(f"   A and B @durable but running no step cost {fixed_any or 'nothing'} per workflow more than plain ones")
    lines.append("   (the root terminal B probes the compensation log to drop it).")
    per = dict(rows[0][1])
    lines.append(f"   Plain step on DynamoDB on-demand: {per.get('read', 0):.0f} strongly consistent reads + "
                 f"{per.get('transact_item', 0):.0f} transactional items (= {2 * per.get('transact_item', 0):.0f} write units)"
                 f" + {per.get('create_step', 0) + per.get('delete', 0):.1f} manifest/GC writes per step, amortised.")
    return lines


def time_steps(store_factory, kind: str, n: int) -> tuple[float, float]:
    """Microseconds per fresh step and per replayed step."""
    @durable
    def handler(event, ctx):
        return event

    store = store_factory()
    env = StepEnv(store=store, invoker=None, hooks=NoHooks(), function="F", handler=handler)
    names = [f"c-bench-{i}" for i in range(n)]

    def run_all() -> float:
        start = time.perf_counter()
        for name in names:
            journal = Journal(env, "wf-bench", name)
            if kind == "step":
                journal.step("s", _work, (1,), {}, None)
            else:
                journal.transact("s", _tx_work, (name,), {}, None)
        return (time.perf_counter() - start) / n * 1e6

    fresh = run_all()
    replay = run_all()
    store.close()
    return fresh, replay


def _work(x: int) -> int:
    return x + 1


def _tx_work(tx: Any, name: str) -> int:
    tx.put("t", name, 1)
    return 1


def bare_micros(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        _work(1)
    return (time.perf_counter() - start) / n * 1e6


def time_section(n: int) -> list[str]:
    lines = ["", "b. Time per step, Journal called directly (median of 3 rounds, µs)",
             f"   {n} fresh invocations per round; 'replayed' = the same steps again (found recorded).", "",
             f"{'store':<12}{'kind':<11}{'fresh':>10}{'replayed':>10}{'bare call':>11}"]
    with tempfile.TemporaryDirectory() as tmp:
        factories = {"memory": MemoryStore, "file": lambda: FileStore(Path(tempfile.mkdtemp(dir=tmp)))}
        bare = bare_micros(n * 10)
        for store_name, factory in factories.items():
            for kind in ("step", "transact"):
                rounds = [time_steps(factory, kind, n) for _ in range(3)]
                fresh = statistics.median(r[0] for r in rounds)
                replay = statistics.median(r[1] for r in rounds)
                lines.append(f"{store_name:<12}{kind:<11}{fresh:>10.1f}{replay:>10.1f}{bare:>11.2f}")
    lines.append("   (No guards here: in a handler a fresh step also re-reads the invocation's witnesses.)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(REPO / "bench" / "steps-report.txt"))
    args = parser.parse_args(argv)
    runs, n = (3, 200) if args.quick else (10, 2000)
    lines = [f"unum steps bench ({'quick' if args.quick else 'full'}), Python {sys.version.split()[0]}", ""]
    lines += ops_section(runs)
    lines += time_section(n)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
