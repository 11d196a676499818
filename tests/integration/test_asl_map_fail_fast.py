"""Step Functions fails a Map at its first failed item unless a tolerance, Retry or Catch absorbs
it (builder/compiler/plan.py `fails_the_workflow`): the failed item records the workflow's
failure at once and the items still queued are not started (unum_entry/local/platform.py),
through the real `python -m builder run` of a state machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ITEMS = 2000
WORK = '''import os


def handler(event, context):
    with open(os.environ["MAP_RAN_LOG"], "a") as log:
        log.write(f"{event}\\n")
    if event == 3:
        raise ValueError("item 3 is bad")
    return event
'''


def machine(tmp: Path, **map_fields: object) -> Path:
    (tmp / "functions" / "Work").mkdir(parents=True)
    (tmp / "functions" / "Work" / "app.py").write_text(WORK)
    each = {"Type": "Map", "ItemsPath": "$.items", "End": True, **map_fields,
            "ItemProcessor": {"StartAt": "Work", "States": {"Work": {"Type": "Task", "Resource": "Work", "End": True}}}}
    states = {"Each": each, **({"Caught": {"Type": "Pass", "Result": "caught", "End": True}} if "Catch" in each else {})}
    (tmp / "statemachine.json").write_text(json.dumps({"StartAt": "Each", "States": states}))
    return tmp / "statemachine.json"


def run(definition: Path, items: int) -> tuple[subprocess.CompletedProcess, list[int]]:
    log = definition.parent / "ran.log"
    done = subprocess.run([sys.executable, "-m", "builder", "run", str(definition), "--input",
                           json.dumps({"items": list(range(items))}), "--store", str(definition.parent / "store.db"),
                           "--timeout", "300"], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MAP_RAN_LOG": str(log)})
    return done, [int(line) for line in log.read_text().split()]


def test_a_failed_item_fails_the_map_at_once_and_the_rest_do_not_start(tmp_path: Path) -> None:
    done, ran = run(machine(tmp_path), ITEMS)
    assert done.returncode == 1, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("error: workflow ") and "failed in function 'Work'" in last and "item 3 is bad" in last, last
    assert 3 in ran and len(ran) == len(set(ran))
    assert len(ran) < ITEMS // 4, f"{len(ran)} of {ITEMS} items ran after one failed"  # measured: ~100 (8 workers)


@pytest.mark.parametrize("absorbs", [{"ToleratedFailureCount": 1},
                                     {"Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}]}])
def test_a_tolerated_or_caught_failure_lets_every_item_run(tmp_path: Path, absorbs: dict) -> None:
    done, ran = run(machine(tmp_path, **absorbs), 40)
    assert done.returncode == 0, done.stderr
    assert sorted(ran) == list(range(40))
    result = json.loads(done.stdout)
    assert result == "caught" if "Catch" in absorbs else result[3]["Error"] == "ValueError", result
