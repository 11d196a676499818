"""Step Functions through the real CLI (`python -m builder compile`, `python -m builder run
<statemachine>`), a Map over 1,000 items on the embedded platform, and bad definitions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from builder.compiler import compile_state_machine
from tests.support.retained import assert_only_ttl_bounded, outcome_kinds
from unum_entry.local.platform import local_platform
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "asl_corpus"


def cli(*args: str | Path, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    import os
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "UNUM_ASL_TIME_SCALE": "0.001", **(env or {})})


def test_compile_writes_a_workflow_folder_and_prints_a_summary(tmp_path: Path) -> None:
    proc = cli("compile", CORPUS / "nested-parallel-map" / "statemachine.json", "--out", tmp_path / "wf")

    assert proc.returncode == 0, proc.stderr
    assert "7 states -> 9 functions" in proc.stdout and "Task 'Square' -> Square (app.handler)" in proc.stdout
    workflow = load_workflow(tmp_path / "wf")
    # two Tasks; the start (a Parallel), a Pass-only branch and two branches starting with a Map
    # need a router each; no Task follows the Parallel or the Maps, so each has a join function
    assert set(workflow.functions) == {"Square", "SumBatch", "Constant", "Squares", "Batches", "Both",
                                       "Squares-2", "Batches-2", "Both-2"}
    assert (tmp_path / "wf" / "Square" / "unum-asl.json").is_file()


def test_run_accepts_a_state_machine_file(tmp_path: Path) -> None:
    case = CORPUS / "yaml-loop"
    proc = cli("run", case / "statemachine.yaml", "--functions", case / "functions", "--input", '{"n": 1}',
               "--store", tmp_path / "store", "--compact")

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"n": 3, "done": True}


def test_run_of_a_failing_state_machine_prints_the_fail_state_error(tmp_path: Path) -> None:
    case = CORPUS / "fail-paths"
    proc = cli("run", case / "statemachine.json", "--input", f"@{case / 'input.json'}", "--store", tmp_path / "store")

    assert proc.returncode == 1
    assert "Order.Rejected: order 42 rejected" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("definition, expected", [
    ('{"StartAt": "A", "States": {"A": {"Type": "Pass"}}}', "state 'A': Next: a Pass state needs Next or \"End\": true"),
    ('{"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "B"}}}', "state 'A': Next: unknown state 'B'"),
    ('{"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": "F", "End": true, "Arguments": {}}}}',
     "state 'A': Arguments: is a JSONata field"),
    ('{"StartAt": "A", "States": {"A": {"Type": "Pass", "End": true}', "not valid JSON"),
])
def test_compile_rejects_bad_definitions_in_one_line(tmp_path: Path, definition: str, expected: str) -> None:
    path = tmp_path / "bad.asl.json"
    path.write_text(definition)
    proc = cli("compile", path, "--out", tmp_path / "out")

    assert proc.returncode == 2
    assert expected in proc.stderr and str(path) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_map_over_1000_items(tmp_path: Path) -> None:
    folder = tmp_path / "sm"
    (folder / "functions" / "Square").mkdir(parents=True)
    (folder / "functions" / "Square" / "app.py").write_text('def handler(event, context):\n    return event["x"] ** 2\n')
    (folder / "functions" / "Total").mkdir()
    (folder / "functions" / "Total" / "app.py").write_text('def handler(event, context):\n    return sum(event)\n')
    (folder / "statemachine.json").write_text(json.dumps({"StartAt": "Squares", "States": {
        "Squares": {"Type": "Map", "ItemsPath": "$.numbers", "ItemSelector": {"x.$": "$$.Map.Item.Value"},
                    "ItemProcessor": {"StartAt": "Square", "States": {"Square": {"Type": "Task", "Resource": "Square", "End": True}}},
                    "ResultPath": "$.squares", "Next": "Total"},
        "Total": {"Type": "Task", "Resource": "Total", "InputPath": "$.squares", "End": True}}}))
    out = compile_state_machine(folder / "statemachine.json", tmp_path / "wf").out
    store = MemoryStore()  # the file store takes ~45 s for 1,000 branches on a loaded 2-core machine
    with local_platform(load_workflow(out), store, workers=8) as platform:
        outcome = platform.run({"numbers": list(range(1000))}, timeout=120)
    try:
        kinds = outcome_kinds(assert_only_ttl_bounded(store))
    finally:
        store.close()

    assert outcome.failure is None
    assert outcome.result == sum(i * i for i in range(1000))
    assert kinds == ["result"]
