"""A Lambda durable functions handler, unchanged, on Firestore (Google's emulator over loopback):
the example `images/durable-order` through the real CLI, then a callback completed by
`callback-success` on the same store."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.integration.test_durable_functions import EXAMPLE, EXPECTED, cli

pytestmark = pytest.mark.integration


def test_the_example_and_a_callback_on_firestore(firestore_emulator, tmp_path: Path) -> None:
    url = f"firestore://unum-durable-{uuid.uuid4().hex[:10]}?project={firestore_emulator.project}"
    done = cli("run", EXAMPLE, "--input", f"@{EXAMPLE / 'input.json'}", "--store", url, "--compact")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == EXPECTED

    order = {"id": "o-9", "lines": [{"sku": "kiwi", "qty": 1, "price": 5}], "callback_file": str(tmp_path / "cb")}
    waiting = cli("run", EXAMPLE, "--input", json.dumps(order), "--store", url)
    assert waiting.returncode == 0 and waiting.stdout == "", waiting.stderr
    resumed = cli("callback-success", (tmp_path / "cb").read_text(), "--result", '"yes"', "--store", url,
                  "--workflow", EXAMPLE, "--compact")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["approval"] == "yes"


@pytest.mark.parametrize("schedule", ["duplicates", "store-errors"])
def test_durable_handler_is_exactly_once_on_firestore(tmp_path: Path, firestore_store, schedule: str) -> None:
    from tests.integration.test_durable_exactly_once import SCHEDULES, run_schedule

    run_schedule(tmp_path, firestore_store, SCHEDULES[schedule], seed=3)
