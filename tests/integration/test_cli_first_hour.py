"""A new user's mistakes beyond issue 10's list, through the real CLI (`python -m builder` in a
subprocess): each is answered by one clear line naming what and where, the right exit code (2
usage or operational, 1 a failed workflow), results on stdout only and never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
OK = "def handler(event, context):\n    return event\n"


def cli(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNUM_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=env)


def workflow(folder: Path, functions: dict[str, tuple[str, list[dict]]]) -> Path:
    """A workflow folder: name -> (app.py source, IR instructions); the first function is the entry."""
    folder.mkdir(parents=True)
    (folder / "unum-workflow.json").write_text(json.dumps(
        {"unum_workflow": 1, "name": folder.name, "entry": next(iter(functions))}))
    for name, (source, instructions) in functions.items():
        (folder / name).mkdir()
        (folder / name / "app.py").write_text(source)
        (folder / name / "unum-ir.json").write_text(json.dumps(
            {"unum_ir": 1, "function": name, "handler": "app.handler", "instructions": instructions}))
    return folder


def one_line(proc: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert proc.returncode == code, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: ") or ": error: " in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


@pytest.mark.parametrize(("source", "words"), [
    ("def handler(event, context)\n    return 1\n", ("SyntaxError", "app.py", "line 1")),
    ("def handle(event, context):\n    return 1\n", ("named 'handler'", "Found: handle")),
])
def test_a_broken_handler_is_one_line_before_any_workflow_starts(tmp_path: Path, source: str,
                                                                  words: tuple[str, ...]) -> None:
    folder = workflow(tmp_path / "wf", {"A": (OK, [{"op": "invoke", "function": "B"}]), "B": (source, [])})
    store = tmp_path / "store"
    one_line(cli("run", folder, "--input", "1", "--store", store), 2, "function 'B'", *words)
    # nothing was started, so nothing is left "running" to resume or clean up
    assert not store.exists() or json.loads(cli("list", "--json", "--store", store).stdout or "[]") == []


def test_a_map_whose_every_item_fails_ends_with_its_failure_not_thousands_of_lines(tmp_path: Path) -> None:
    folder = workflow(tmp_path / "wf", {
        "Split": (OK, [{"op": "create_set", "function": "Sum", "shape": "aggregate"},
                       {"op": "map", "function": "Item", "items": "$"}]),
        "Item": ("def handler(event, context):\n    raise ValueError(f'bad item {event}')\n",
                 [{"op": "fan_in", "function": "Sum"}]),
        "Sum": (OK, [])})
    proc = cli("run", folder, "--input", json.dumps(list(range(40))), "--store", tmp_path / "store")
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) < 20, proc.stderr  # 40 items x 3 attempts would log 120 lines
    assert any("hidden (-v shows every one)" in line for line in lines), proc.stderr
    assert lines[-1].startswith("error: workflow ") and "failed in function 'Item' after 3 attempt(s): ValueError: bad item" in lines[-1]


def test_what_a_handler_prints_goes_to_stderr_and_stdout_is_the_result(tmp_path: Path) -> None:
    folder = workflow(tmp_path / "wf", {"A": ("print('imported')\ndef handler(event, context):\n"
                                              "    print('debugging', event)\n    return {'n': event}\n", [])})
    proc = cli("run", folder, "--input", "7", "--store", tmp_path / "store", "--compact")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"n": 7}
    assert "imported" in proc.stderr and "debugging 7" in proc.stderr


def test_an_empty_input_file_says_so(tmp_path: Path) -> None:
    (tmp_path / "empty.json").write_text("\n")
    proc = cli("run", REPO / "images" / "chain", "--input", f"@{tmp_path / 'empty.json'}", "--store", tmp_path / "s")
    one_line(proc, 2, "--input", "empty.json", "empty")


def test_an_unknown_graph_format_lists_the_formats() -> None:
    one_line(cli("graph", "images/chain", "--format", "jpg"), 2, "'jpg'", "mermaid, dot, svg, png")


def test_task_success_names_its_own_option_and_refuses_a_mistyped_store(tmp_path: Path) -> None:
    token = "unum1.bm90LWEtcmVhbC10b2tlbg"
    assert cli("run", "images/chain", "--input", "{}", "--store", tmp_path / "store").returncode == 0
    one_line(cli("task-success", token, "--output", "{bad", "--store", tmp_path / "store", "--workflow", "images/chain"),
             2, "--output: not valid JSON")
    proc = cli("task-success", token, "--output", "{}", "--store", tmp_path / "stor", "--workflow", "images/chain")
    one_line(proc, 2, f"--store {tmp_path / 'stor'}: no such folder")
    assert not (tmp_path / "stor").exists()


def test_the_readme_chain_example_runs_with_its_input_file(tmp_path: Path) -> None:
    proc = cli("run", "images/chain", "--input", "@images/chain/input.json", "--store", tmp_path / "store", "--compact")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["greeting"] == "HELLO, WORLD!"
