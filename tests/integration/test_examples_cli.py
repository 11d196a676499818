"""The example workflows under images/, run end to end through `python -m builder run`.

Every folder with `input.json` + `expected.json` must print exactly the expected result and
leave its result in the store next to nothing but retained objects that expire within the store's
TTL (tests/support/retained.py). The CLI's
bad-input paths must exit with a one-line message, never a Python traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.retained import assert_only_ttl_bounded, outcome_kinds
from unum_entry.stores import open_store

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "images"
EXAMPLES = sorted(p for p in IMAGES.iterdir()
                  if p.is_dir() and (p / "input.json").is_file() and (p / "expected.json").is_file())


def run_cli(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m builder run ARGS...` from the repository root, Step Functions time scaled
    1:1000 (images/asl-wait waits two hours and times out a Task after one: 11 s here)."""
    return subprocess.run([sys.executable, "-m", "builder", "run", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "UNUM_ASL_TIME_SCALE": "0.001"})


def write_workflow(folder: Path, entry: str, functions: dict[str, tuple[str, dict]]) -> Path:
    """Write a workflow folder: functions maps name -> (app.py source, IR fields)."""
    from unum_entry.workflow import FunctionSource
    from unum_entry.workflow import write_workflow as write

    write(folder, name=folder.name, entry=entry,
          functions={name: FunctionSource(source, (), ir) for name, (source, ir) in functions.items()})
    return folder


def test_examples_are_found() -> None:
    assert len(EXAMPLES) >= 8, [p.name for p in EXAMPLES]


@pytest.mark.parametrize("folder", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_prints_expected_result_and_leaves_only_ttl_bounded_objects(folder: Path, tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    proc = run_cli(folder, "--input", f"@{folder / 'input.json'}", "--store", store_path, "--compact")

    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert json.loads(proc.stdout) == json.loads((folder / "expected.json").read_text())
    store = open_store(str(store_path))
    try:
        records = assert_only_ttl_bounded(store)
    finally:
        store.close()
    kinds = outcome_kinds(records)
    assert kinds, "the workflow left no result in the store"
    assert set(kinds) == {"result"}, kinds  # results only: no failure record


def test_input_that_is_not_json(tmp_path: Path) -> None:
    proc = run_cli(IMAGES / "map-aggregate", "--input", "{words: [1, 2", "--store", tmp_path / "store")

    assert proc.returncode == 2
    assert "--input" in proc.stderr and "not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_input_file_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    proc = run_cli(IMAGES / "map-aggregate", "--input", f"@{missing}", "--store", tmp_path / "store")

    assert proc.returncode == 2
    assert str(missing) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_folder_without_workflow_manifest(tmp_path: Path) -> None:
    folder = tmp_path / "not-a-workflow"
    folder.mkdir()
    proc = run_cli(folder, "--store", tmp_path / "store")

    assert proc.returncode == 2
    assert "unum-workflow.json" in proc.stderr and str(folder) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_ir_with_unknown_target(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    shutil.copytree(IMAGES / "text-processing", folder)
    ir_path = folder / "CreatePost" / "unum-ir.json"
    ir = json.loads(ir_path.read_text())
    ir["instructions"] = [{"op": "invoke", "function": "Publsh"}]
    ir_path.write_text(json.dumps(ir))
    proc = run_cli(folder, "--input", f"@{folder / 'input.json'}", "--store", tmp_path / "store")

    assert proc.returncode == 2
    assert str(ir_path) in proc.stderr
    assert "instructions[0]" in proc.stderr and "Publsh" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_ir_that_is_not_valid(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    shutil.copytree(IMAGES / "branch", folder)
    ir_path = folder / "Validate" / "unum-ir.json"
    ir = json.loads(ir_path.read_text())
    ir["instructions"][0]["when"] = {"Variable": "$.total", "NumericGreaterThan": "1000"}
    ir_path.write_text(json.dumps(ir))
    proc = run_cli(folder, "--input", f"@{folder / 'input.json'}", "--store", tmp_path / "store")

    assert proc.returncode == 2
    assert str(ir_path) in proc.stderr and "instructions[0].when" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_handler_that_raises_fails_after_max_attempts(tmp_path: Path) -> None:
    source = 'def handler(event, context):\n    """Always fail."""\n    raise ValueError(f"sensor {event} is unplugged")\n'
    folder = write_workflow(tmp_path / "failing", "Start", {
        "Start": ('def handler(event, context):\n    """Pass on."""\n    return event\n',
                  {"instructions": [{"op": "invoke", "function": "Explode"}]}),
        "Explode": (source, {"max_attempts": 2}),
    })
    proc = run_cli(folder, "--input", '"s-7"', "--store", tmp_path / "store")

    assert proc.returncode == 1
    assert "'Explode'" in proc.stderr
    assert "ValueError" in proc.stderr and "sensor s-7 is unplugged" in proc.stderr
    assert "after 2 attempt(s)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_handler_that_raises_inside_a_fan_out(tmp_path: Path) -> None:
    folder = write_workflow(tmp_path / "failing-map", "Split", {
        "Split": ('def handler(event, context):\n    """Items."""\n    return [1, 0, 2]\n',
                  {"instructions": [{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "Invert"}]}),
        "Invert": ('def handler(event, context):\n    """1/x."""\n    return 1 / event\n',
                   {"max_attempts": 3, "instructions": [{"op": "fan_in", "function": "Sum"}]}),
        "Sum": ('def handler(event, context):\n    """Sum."""\n    return sum(event)\n', {}),
    })
    proc = run_cli(folder, "--store", tmp_path / "store")

    assert proc.returncode == 1
    assert "'Invert'" in proc.stderr and "ZeroDivisionError" in proc.stderr
    assert "after 3 attempt(s)" in proc.stderr
    assert "Traceback" not in proc.stderr
