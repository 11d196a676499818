"""The models of bench/paper: the paper's price model, a Lambda billing model, Step Functions
transition counting and latency, and the paper's own numbers (quoted, never measured here).

Everything in this file is either a constant taken from the paper (NSDI'23, §5; quoted with the
sentence it comes from), a documented AWS figure, or an assumption stated as one. The report
prints every constant it uses from here, so a reader can redo each dollar figure by hand.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# ---- the paper's numbers (quoted) ---------------------------------------------------------------

# Table 2: latency (s) and $ per 1 million executions; us-west-1 for AWS.
PAPER_TABLE2: dict[str, dict[str, float]] = {
    "IoT Pipeline": {"unum_aws_s": 0.12, "unum_gcloud_s": 0.81, "sfn_s": 0.23,
                     "unum_aws_usd": 12.38, "unum_gcloud_usd": 6.3, "sfn_usd": 112.02},
    "Text Processing": {"unum_aws_s": 0.52, "unum_gcloud_s": 3.56, "sfn_s": 0.55,
                        "unum_aws_usd": 60.42, "unum_gcloud_usd": 31.7, "sfn_usd": 225.29},
    "Wordcount": {"unum_aws_s": 408.88, "unum_gcloud_s": 484.12, "sfn_s": 898.56,
                  "unum_aws_usd": 13433.67, "unum_gcloud_usd": 11727.3, "sfn_usd": 18141.19},
    "ExCamera": {"unum_aws_s": 84.52, "unum_gcloud_s": 122.63, "sfn_s": 98.42,
                 "unum_aws_usd": 62684.29, "unum_gcloud_usd": 51617.2, "sfn_usd": 114633.13},
}
# Figure 6's caption: share of Step Functions' cost that is state transitions, and of unum's
# cost that is "Unum runtime cost" (the rest: the user functions' Lambda time).
PAPER_FIG6_SFN_TRANSITION_SHARE = {"IoT Pipeline": 0.995, "Text Processing": 0.994, "Wordcount": 0.800,
                                   "ExCamera": 0.722}
PAPER_FIG6_UNUM_RUNTIME_SHARE = {"IoT Pipeline": 0.957, "Text Processing": 0.978, "Wordcount": 0.725,
                                 "ExCamera": 0.610}
# §5.3: "Step Functions charges $27.9 per 1 million such transitions. On the other hand, Unum
# costs, for 1 million transitions, (1) $0.42 for ~200ms extra Lambda runtime to execute
# orchestration library code, (2) $2.79 for 1 DynamoDB write to checkpoint, (3) $0.279 for 1
# DynamoDB read to check checkpoint existence, and (4) $2.79 for 1 DynamoDB write to garbage
# collect the checkpoint. In total, a basic transition in Unum is about 4.4x cheaper".
PAPER_CHAIN_TRANSITION = {"lambda_runtime_usd": 0.42, "lambda_runtime_ms": 200, "writes": 2, "reads": 1,
                          "write_usd": 2.79, "read_usd": 0.279, "gc_write_usd": 2.79, "total_usd": 6.279,
                          "sfn_usd": 27.9, "ratio": 4.4}
# §5.2.2 / Figure 5 (the figure's values are an image; only what the text says is quoted).
PAPER_FIG5_TEXT = ("At low branching degree, Unum incurs a modest overhead (up to 200ms) relative to Step "
                   "Functions ... at higher branching degrees (as low as 20 branches), Step Functions limits the "
                   "number of outstanding fan-out branches ... resulting in over 4x lower latency with 512 branches.")
PAPER_FIG4_TEXT = ("storage operations are slower when checkpointed results are larger, but the total overhead from "
                   "the Unum runtime operations is consistently lower than an equivalent Step Function transition.")
# §5.4 / Table 3: ExCamera on AWS, seconds.
PAPER_EXCAMERA = {"original_s": 76, "unum_aws_s": 84, "gg_s": 90, "sfn_s": 98, "unum_faster_than_sfn": 0.167}


# ---- prices -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PaperPrices:
    """The paper's price model (§5.1, §5.3: us-west-1, DynamoDB on demand, Lambda at 128 MB).

    DynamoDB: the paper prices "1 DynamoDB write" at $2.79 and "1 DynamoDB read" at $0.279 per
    million; we apply these per write unit / read unit (equal to per request for items of at most
    1 KB / 4 KB, which is every item the small apps write). Step Functions Standard: $27.9 per
    million state transitions. Lambda: $0.20 per million requests and $0.0000166667 per GB-s
    (the paper's "$0.42 for ~200ms" at 128 MB is 0.2 s x 0.125 GB x $0.0000166667 x 10^6)."""

    write: float = 2.79e-6
    read: float = 0.279e-6
    sfn_transition: float = 27.9e-6
    lambda_request: float = 0.20e-6
    lambda_gb_s: float = 0.0000166667


@dataclass(frozen=True)
class LambdaModel:
    """How a measured invocation here becomes billed Lambda time (a model, stated in the report).

    - CPU: Lambda gives a function CPU in proportion to its memory, one vCPU at 1,769 MB (AWS
      Lambda documentation), so single-threaded CPU work measured here on a full core is scaled
      by max(1, 1769 / memory_mb): 13.8x at the paper's 128 MB, 1x at ExCamera's 3 GB.
    - I/O waits are not measured here (moto and the file store are local); each store request
      is charged `store_latency` (DynamoDB: single-digit milliseconds per request, AWS) and each
      invoking invocation ceil(k / dispatch_workers) x `invoke_latency` for its k asynchronous
      invokes (the runtime sends them from a pool of 64 threads).
    - Billed duration is rounded up to 1 ms per invocation (Lambda's granularity since 2020)."""

    memory_mb: int = 128
    vcpu_mb: int = 1769
    store_latency: float = 0.005
    invoke_latency: float = 0.020
    dispatch_workers: int = 64

    @property
    def cpu_scale(self) -> float:
        return max(1.0, self.vcpu_mb / self.memory_mb)

    @property
    def gb(self) -> float:
        return self.memory_mb / 1024


@dataclass(frozen=True)
class SfnModel:
    """Step Functions Standard latency model (stated, not measured).

    - `transition`: seconds per state entered, including the Lambda task's own short run:
      the paper's Table 2 IoT pipeline on Step Functions, 0.23 s over its 4 state transitions
      (4 = $111.46 of its $112.02 per million executions at $27.9 per million transitions: the
      99.5 % share of Figure 6) = 57.5 ms.
    - `map_concurrency`: an inline Map runs at most 40 iterations at once (AWS Step Functions
      Developer Guide, "Using Map state in Inline mode": "supports up to 40 concurrent
      iterations"); the paper cites the Map limit as the reason for Figure 5's gap."""

    transition: float = 0.23 / 4
    map_concurrency: int = 40


# ---- billing an app run ------------------------------------------------------------------------

@dataclass
class Invocation:
    """One delivery measured on the embedded platform."""

    function: str
    handler_cpu: float     # thread CPU seconds of the user handler (compiled apps: + its ASL fragment)
    handler_wall: float
    total_cpu: float       # thread CPU seconds of the whole delivery (runtime + handler)
    total_wall: float
    invoked: int           # asynchronous invokes it sent
    start: float = 0.0     # perf_counter at the handler's start / end (ExCamera's model)
    end: float = 0.0
    chunk: int | None = None
    committed: bool = True

    @property
    def runtime_cpu(self) -> float:
        return max(0.0, self.total_cpu - self.handler_cpu)


@dataclass
class CostBreakdown:
    """$ per execution by component (the paper's price model)."""

    components: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.components.values())

    def per_million(self) -> dict[str, float]:
        return {k: v * 1e6 for k, v in self.components.items()}


def lambda_seconds(invocations: Sequence[Invocation], model: LambdaModel, *, store_requests: float,
                   runs: int) -> tuple[float, float]:
    """(user handler billed s, unum runtime billed s) per execution under `model`.

    Each invocation's handler CPU and runtime CPU are scaled by the model's CPU factor; the
    runtime part also waits for its invokes; the store requests of the runs (counted at the wire)
    are charged at the model's store latency; each invocation is rounded up to 1 ms (the
    rounding is attributed to the runtime part)."""
    user = runtime = 0.0
    for inv in invocations:
        h = inv.handler_cpu * model.cpu_scale
        r = inv.runtime_cpu * model.cpu_scale
        if inv.invoked:
            r += math.ceil(inv.invoked / model.dispatch_workers) * model.invoke_latency
        billed = math.ceil((h + r) * 1000 - 1e-9) / 1000
        user += h
        runtime += billed - h
    runtime += store_requests * model.store_latency
    return user / runs, runtime / runs


def unum_cost(*, write_units: Mapping[str, float], read_units: float, invocations: float, user_s: float,
              runtime_s: float, model: LambdaModel, prices: PaperPrices) -> CostBreakdown:
    """$ per execution of unum: DynamoDB writes by what they write, reads, Lambda requests and
    GB-s (all per execution)."""
    c: dict[str, float] = {}
    names = {"checkpoint": "store: checkpoint writes", "set": "store: fan-in set writes",
             "result": "store: result record", "chunk": "store: by-reference chunks"}
    for kind, units in sorted(write_units.items()):
        label = names.get(kind, f"store: {kind} writes")
        c[label] = c.get(label, 0.0) + units * prices.write
    c["store: reads"] = read_units * prices.read
    c["Lambda requests"] = invocations * prices.lambda_request
    c["Lambda GB-s: unum runtime"] = runtime_s * model.gb * prices.lambda_gb_s
    c["Lambda GB-s: user functions"] = user_s * model.gb * prices.lambda_gb_s
    return CostBreakdown(c)


def sfn_cost(*, transitions: int, lambda_invocations: float, user_s: float, model: LambdaModel,
             prices: PaperPrices) -> CostBreakdown:
    """$ per execution of the same state machine on Step Functions Standard: its transitions and
    the Lambda tasks it runs (the same handlers, billed the same way, without unum's runtime)."""
    billed = user_s  # already per execution; rounding per task is negligible next to transitions
    return CostBreakdown({
        "SFN state transitions": transitions * prices.sfn_transition,
        "Lambda requests": lambda_invocations * prices.lambda_request,
        "Lambda GB-s: user functions": billed * model.gb * prices.lambda_gb_s,
    })


# ---- Step Functions: transitions of one execution ---------------------------------------------

def _tasks_reachable(states: Mapping[str, Any], start: str) -> set[str]:
    seen, todo, tasks = set(), [start], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in states:
            continue
        seen.add(name)
        s = states[name]
        if s["Type"] == "Task":
            tasks.add(name)
        for key in ("Next", "Default"):
            if s.get(key):
                todo.append(s[key])
        todo += [c["Next"] for c in s.get("Choices", []) if c.get("Next")]
        for sub in _substates(s):
            tasks |= _tasks_reachable(sub["States"], sub["StartAt"])
    return tasks


def _substates(state: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if state["Type"] == "Map":
        return [state.get("ItemProcessor") or state["Iterator"]]
    if state["Type"] == "Parallel":
        return list(state["Branches"])
    return []


def sfn_transitions(definition: Mapping[str, Any], task_runs: Mapping[str, int]) -> int:
    """State transitions Step Functions Standard bills for one execution that ran the Tasks
    `task_runs` times (by Task state name, as measured on unum: a compiled function is named
    after its Task). Every state entered counts once: Task, Pass, Choice, Wait, Succeed, Fail,
    and Map/Parallel themselves, plus every state of every Map iteration and Parallel branch.
    A Map runs as many iterations as its first Task ran; a Choice takes the first rule whose
    target leads to a Task that ran (else its Default)."""

    def walk(states: Mapping[str, Any], start: str, mult: int) -> int:
        total, name = 0, start
        while name:
            s = states[name]
            kind = s["Type"]
            total += task_runs.get(name, 0) if kind == "Task" else mult
            if kind == "Map":
                sub = _substates(s)[0]
                first = sorted(_tasks_reachable(sub["States"], sub["StartAt"]))
                iterations = max((task_runs.get(t, 0) for t in first), default=0)
                head = sub["States"][sub["StartAt"]]
                if head["Type"] == "Task":
                    iterations = task_runs.get(sub["StartAt"], 0)
                total += walk(sub["States"], sub["StartAt"], iterations)
            elif kind == "Parallel":
                total += sum(walk(b["States"], b["StartAt"], mult) for b in s["Branches"])
            if kind == "Choice":
                name = s.get("Default")
                for rule in s.get("Choices", []):
                    if any(task_runs.get(t, 0) for t in _tasks_reachable(states, rule["Next"])):
                        name = rule["Next"]
                        break
                continue
            name = None if s.get("End") or kind in ("Succeed", "Fail") else s.get("Next")
        return total

    return walk(definition["States"], definition["StartAt"], 1)


# ---- latency models -----------------------------------------------------------------------------

def sfn_fanout_latency(degree: int, sfn: SfnModel) -> float:
    """Entry Task, an inline Map of `degree` no-op Task iterations (at most 40 at once, each one
    transition), the join Task: (2 + ceil(degree / 40)) x the per-transition latency."""
    return (2 + math.ceil(degree / sfn.map_concurrency)) * sfn.transition


def pool_schedule(durations: Sequence[float], ready: Sequence[float], slots: int | None) -> list[float]:
    """End times of jobs started in index order on `slots` parallel slots (None: unlimited),
    each no earlier than its ready time."""
    if slots is None or slots >= len(durations):
        return [r + d for r, d in zip(ready, durations, strict=True)]
    free = [0.0] * slots
    heapq.heapify(free)
    ends = []
    for r, d in zip(ready, durations, strict=True):
        start = max(heapq.heappop(free), r)
        ends.append(start + d)
        heapq.heappush(free, start + d)
    return ends


def excamera_makespans(ir: Mapping[str, Mapping[int, float]], sfn: Mapping[str, Mapping[int, float]], *,
                       unum_hop: float, sfn_model: SfnModel) -> dict[str, float]:
    """Critical path of both ExCamera versions with Lambda-like unlimited concurrency for unum and
    Step Functions' inline-Map limit for the Map version, from per-chunk handler durations
    (function -> chunk -> seconds; Split and Assemble under chunk -1). Every edge costs
    `unum_hop` (unum) or one transition (Step Functions)."""
    def d(table: Mapping[str, Mapping[int, float]], fn: str, i: int) -> float:
        return table.get(fn, {}).get(i, 0.0)

    n = len(ir.get("Encode", {}))
    # unum, neighbour pattern
    t0 = d(ir, "Split", -1)
    enc = [t0 + unum_hop + d(ir, "Encode", i) for i in range(n)]
    hand = [enc[i] + unum_hop + d(ir, "Handoff", i) for i in range(n)]
    dec = [enc[i] + unum_hop + d(ir, "Decode", i) for i in range(n - 1)]
    re_end = []
    for i in range(n):
        ready = max(hand[i], dec[i - 1] if i else 0.0) + unum_hop
        re_end.append(ready + d(ir, "ReEncode", i))
    unum = max(re_end) + unum_hop + d(ir, "Assemble", -1)
    # Step Functions: Map(Encode -> Decode) barrier, Pass, Map(ReEncode), Assemble
    tau, limit = sfn_model.transition, sfn_model.map_concurrency
    m = len(sfn.get("Encode", {}))
    s0 = d(sfn, "Split", -1) + tau + tau  # Split's transition, then the Map state
    first = pool_schedule([2 * tau + d(sfn, "Encode", i) + d(sfn, "Decode", i) for i in range(m)], [s0] * m, limit)
    barrier = max(first) + tau + tau  # the Pass state, then the second Map state
    second = pool_schedule([tau + d(sfn, "ReEncode", i) for i in range(m)], [barrier] * m, limit)
    sfn_total = max(second) + tau + d(sfn, "Assemble", -1)
    second_unlimited = pool_schedule([tau + d(sfn, "ReEncode", i) for i in range(m)],
                                     [max(pool_schedule([2 * tau + d(sfn, "Encode", i) + d(sfn, "Decode", i)
                                                         for i in range(m)], [s0] * m, None)) + 2 * tau] * m, None)
    return {"unum": unum, "sfn": sfn_total, "sfn_no_limit": max(second_unlimited) + tau + d(sfn, "Assemble", -1),
            "chunks": n}


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


Number = Callable[[float], str]
