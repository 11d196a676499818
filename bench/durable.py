"""Lambda durable functions on unum: DynamoDB requests and dollars per durable operation, at the wire.

    python bench/durable.py [--runs 5]     # from the repo root; writes bench/durable-report.txt

Runs the example images/durable-order (map of 2, invoke, parallel of 2, child context, wait,
wait_for_condition, steps; no callback) `--runs` times on the embedded platform over a DynamoDB
table on moto's server, counting every request its botocore client sends and the units they
are billed (bench/wire.py's DynamoWire). A *durable operation* is what Lambda's durable service
bills as one: every operation in the executions' logs (steps, waits, contexts of map/parallel
and their branches, invokes, the retries of wait_for_condition count per attempt), besides the
executions themselves. Compared with the service's published price (about $8 per million
durable operations, plus data written and retained, which are left out here) and with the
same figures for the unum invocations around them.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from wire import Prices, counted_dynamodb, moto_server  # noqa: E402

from unum_entry import naming  # noqa: E402
from unum_entry.envelope import Frame  # noqa: E402
from unum_entry.local.platform import LocalPlatform  # noqa: E402
from unum_entry.workflow import load_workflow  # noqa: E402

SERVICE_PER_MILLION = 8.0  # USD, Lambda durable functions: durable operations (data not included)


def _operations(store, invocation: str) -> tuple[int, int, list[str]]:
    """(operation transitions counted like the service bills them, log entries, chained invoke ids)."""
    ops, entries, invokes, n = 0, 0, [], 0
    while (raw := store.get(naming.durable_log_key(invocation, n))) is not None:
        entry = json.loads(raw)
        for u in entry.get("u", ()):
            if u["Action"] in ("START", "RETRY") and u["Type"] != "EXECUTION":
                ops += 1
            if u["Type"] == "CHAINED_INVOKE":
                invokes.append(u["Id"])
        entries += 1
        n += 1
    return ops, entries, invokes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "bench" / "durable-report.txt"))
    args = parser.parse_args()
    prices = Prices()
    workflow = load_workflow(ROOT / "images" / "durable-order")
    order = json.loads((ROOT / "images" / "durable-order" / "input.json").read_text())
    with tempfile.TemporaryDirectory(), moto_server() as endpoint, \
            counted_dynamodb(f"unum-durable-{uuid.uuid4().hex[:8]}", endpoint) as (store, wire):
        ids = []
        with LocalPlatform(workflow, store, workers=4) as platform:
            for i in range(args.runs):
                outcome = platform.run({**order, "id": f"o-{i}"}, timeout=120)
                assert outcome.failure is None, outcome.failure
                ids.append(outcome.workflow_id)
        with wire.paused():
            ops = entries = 0
            for wf in ids:
                o, e, invokes = _operations(store, naming.checkpoint_key(wf, "Order", (Frame(),)))
                ops, entries = ops + o, entries + e
                for op_id in invokes:
                    o, e, _ = _operations(store, naming.checkpoint_key(f"{wf}~{op_id[:16]}", "Tax", (Frame(),)))
                    ops, entries = ops + o, entries + e
    write_units = sum(wire.write_units.values())
    dollars = write_units * prices.write_unit + wire.read_units * prices.read_unit
    per_op = dollars / ops * 1e6
    lines = [
        "Lambda durable functions on unum: DynamoDB (moto server) requests per durable operation",
        f"workflow: images/durable-order, {args.runs} runs, {ops} durable operations "
        f"({ops / args.runs:.0f} per run), {entries} log entries (checkpoint writes)",
        "requests: " + ", ".join(f"{k} {v}" for k, v in sorted(wire.requests.items())),
        f"requests per durable operation: {sum(wire.requests.values()) / ops:.2f} "
        f"(writes {sum(wire.write_requests.values()) / ops:.2f}, read units {wire.read_units / ops:.2f})",
        f"write units {write_units}, read units {wire.read_units} (on-demand: ${prices.write_unit * 1e6:.2f} / "
        f"${prices.read_unit * 1e6:.2f} per million units)",
        f"unum on DynamoDB: ${per_op:.2f} per million durable operations (requests only, every unum invocation "
        f"and its own checkpoints included); Lambda's durable service: ${SERVICE_PER_MILLION:.2f} per million "
        "(plus data written and retained)",
    ]
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
