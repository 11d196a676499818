"""bench/instructions.py as README and docs/embedded-engine.md quote it, in its quick form on the
SQLite store (its memory-store run is the same code without the raw create): it runs the engine
under valgrind and prints an instruction count per transition for each workload, the raw
create's count and the ratio to it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_instructions_per_transition_are_counted() -> None:
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind is missing: localstack/setup.d/16-bench-tools.sh installs it")
    done = subprocess.run([sys.executable, "bench/instructions.py", "--quick", "--store", "sqlite"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    counts = {kind: int(n.replace(",", "")) for kind, n in
              re.findall(r"^(chain|map): ([\d,]+) instructions per transition", done.stdout, flags=re.M)}
    assert set(counts) == {"chain", "map"}, done.stdout
    assert all(50_000 < n < 5_000_000 for n in counts.values()), done.stdout  # a hop is ~10^5: not 0, not a total
    raw = re.search(r"^raw commit \(one store.create per transaction\): ([\d,]+) instructions", done.stdout, flags=re.M)
    assert raw is not None and 20_000 < int(raw.group(1).replace(",", "")) < counts["chain"], done.stdout
    assert re.search(r"^map: [\d,]+ instructions per transition \([\d.]+ raw commits\)", done.stdout, flags=re.M)
