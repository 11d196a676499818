"""What the execution history (unum_entry.history) costs on a workflow's path, at the DynamoDB wire.

    python bench/history_cost.py        # from the repo root; writes bench/history-report.txt (~20 s)

The history adds no request: it is a stamp appended to the value of each commit the runtime
makes anyway. This bench runs workflows on moto's DynamoDB server (bench/wire.py's counter), and
for every PutItem the store sends it splits the written value into the value and its stamp
(`unum_entry.history.split`), so the report gives, per transition: the requests sent (the same
with and without stamps), the stamp's bytes (raw, and on the wire: base64 inside the JSON body),
and the write units billed with the stamp and as they would be without it (item size minus the
stamp, rounded up to DynamoDB's 1 KB write unit).
"""

from __future__ import annotations

import base64
import json
import platform
import sys
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout, without installing
    sys.path.insert(0, str(REPO))

from bench.wire import (Shape, chain_shape, counted_dynamodb, fan_in_shape, item_size, map_shape,  # noqa: E402
                        moto_server, run_shape, write_units)
from unum_entry.history import split  # noqa: E402


@dataclass
class StampCounter:
    """Sizes of the values every PutItem wrote: with their stamp, and without."""

    puts: int = 0
    stamped: int = 0
    stamp_bytes: int = 0
    wu_with: int = 0
    wu_without: int = 0
    kinds: dict[str, int] = field(default_factory=dict)

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call.dynamodb.PutItem", self._put)

    def _put(self, params: Mapping[str, Any], **_: Any) -> None:
        body = json.loads(params.get("body") or b"{}")
        item = body.get("Item", {})
        raw = base64.b64decode(item.get("v", {}).get("B", "")) if "v" in item else b""
        size = item_size(item, wire=True)
        own, meta = split(raw)
        extra = len(raw) - len(own) if meta is not None else 0
        self.puts += 1
        if meta is not None:
            self.stamped += 1
            self.stamp_bytes += extra
            kind = item.get("t", {}).get("S", "?")
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.wu_with += write_units(size)
        self.wu_without += write_units(size - extra)


def measure(root: Path, endpoint: str, shape: Shape) -> tuple[Shape, StampCounter, int]:
    with counted_dynamodb(f"unum-hist-{uuid.uuid4().hex[:12]}", endpoint) as (store, wire):
        counter = StampCounter()
        counter.attach(store.client)
        run_shape(root, shape, store, 8, wire.paused)
        return shape, counter, sum(wire.requests.values())


def report(rows: Sequence[tuple[Shape, StampCounter, int]]) -> str:
    lines = [f"unum history cost at the DynamoDB wire - {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
             f"Python {platform.python_version()} on {platform.system()} {platform.machine()}; moto server; "
             "LocalPlatform with 8 workers, no faults",
             "Per transition (an edge taken, as in bench/wire-report.txt). Requests: every request the store sent",
             "(the history adds none: its stamp rides in the commit's own PutItem). Stamp B: bytes of the stamp in",
             "the stored value; on the wire it travels base64 in the JSON body (x4/3). WU: write units billed, with",
             "the stamp and without it (item size - stamp, rounded up to 1 KB), of the PutItems (the commits).", "",
             f"{'shape':<24} {'requests/t':>10} {'stamped puts':>12} {'stamp B/t':>10} {'wire B/t':>9} "
             f"{'B/stamp':>8} {'put WU/t':>10} {'without stamp':>13}",
             "-" * 104]
    for shape, c, requests in rows:
        edges = shape.edges * shape.runs
        lines.append(f"{shape.label:<24} {requests / edges:>10.3f} {c.stamped:>12} {c.stamp_bytes / edges:>10.1f} "
                     f"{c.stamp_bytes * 4 / 3 / edges:>9.1f} {c.stamp_bytes / max(c.stamped, 1):>8.1f} "
                     f"{c.wu_with / edges:>10.3f} {c.wu_without / edges:>13.3f}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "history-report.txt")
    args = parser.parse_args(argv)
    shapes = (chain_shape(10, 3), chain_shape(2, 3), fan_in_shape(16, 3), map_shape(16, 3), map_shape(512, 1))
    with tempfile.TemporaryDirectory(prefix="unum-hist-") as tmp, moto_server() as endpoint:
        rows = [measure(Path(tmp) / f"s{i}", endpoint, shape) for i, shape in enumerate(shapes)]
    text = report(rows)
    args.out.write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
