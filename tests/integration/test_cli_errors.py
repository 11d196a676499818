"""Every operational or usage error of the CLI is one line and the right exit code, never a
traceback (issue 10): through the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def one_line_error(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    return line


def test_an_unreachable_store_is_one_line_and_fast(tmp_path: Path) -> None:
    started = time.monotonic()
    line = one_line_error(cli("run", "images/chain", "--store", "dynamodb://unum-t?endpoint=http://127.0.0.1:1"))
    assert time.monotonic() - started < 20
    assert line.startswith("error: DynamoDB") and "127.0.0.1:1" in line


@pytest.mark.parametrize("store, expected", [
    ("dynamodb://t?endpoint=http://127.0.0.1:1", "table name 't' is invalid"),
    ("redis://x", "unknown store URL"),
])
def test_a_misconfigured_store_is_one_line(store: str, expected: str) -> None:
    assert expected in one_line_error(cli("run", "images/chain", "--store", store))


def test_bad_output_paths_are_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    line = one_line_error(cli("compile", "images/asl-order/statemachine.json", "--out", blocker / "out"))
    assert line == f"error: {blocker / 'out'}: Not a directory"


def test_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`inspect … | head`: the reader goes away before the report is written."""
    folder = tmp_path / "big"
    (folder / "A").mkdir(parents=True)
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "big", "entry": "A"}))
    (folder / "A" / "app.py").write_text("def handler(event, context):\n    return list(range(100000))\n")
    (folder / "A" / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": "A", "handler": "app.handler"}))
    store = tmp_path / "s"
    assert cli("run", folder, "--store", store, "--workflow-id", "wf-big", "--compact").returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "builder", "inspect", "wf-big", "--store", str(store)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()  # as `head` does once it has its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert err == ""


@pytest.mark.parametrize("args, env, expected", [
    (["--workers", "0"], {}, "argument --workers: expected a whole number >= 1, found '0'"),
    (["--timeout", "-1"], {}, "argument --timeout: expected seconds > 0, found '-1'"),
    ([], {"UNUM_WORKERS": "many"}, "expected a whole number >= 1, found 'many' (from $UNUM_WORKERS)"),
])
def test_option_values_are_validated(args: list[str], env: dict[str, str], expected: str) -> None:
    line = one_line_error(cli("run", "images/chain", *args, env=env))
    assert line.startswith("python -m builder run: error: ") and expected in line


def test_env_vars_stand_in_for_flags_and_are_documented(tmp_path: Path) -> None:
    store = tmp_path / "env-store"
    proc = cli("run", "images/chain", "--input", '{"name": "ada"}', "--workflow-id", "wf-env",
               env={"UNUM_STORE": str(store), "UNUM_WORKERS": "1", "UNUM_TIMEOUT": "60"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(cli("inspect", "wf-env", env={"UNUM_STORE": str(store)}).stdout)["status"] == "succeeded"
    helped = cli("run", "--help").stdout
    for name in ("$UNUM_STORE", "$UNUM_WORKERS", "$UNUM_TIMEOUT"):
        assert name in helped


def test_inspect_of_an_unknown_id_is_an_error(tmp_path: Path) -> None:
    store = tmp_path / "s"
    assert cli("run", "images/chain", "--input", '{"name": "a"}', "--store", store).returncode == 0  # the store exists
    line = one_line_error(cli("inspect", "wf-nope", "--store", store))
    assert line.startswith("error: no workflow 'wf-nope' in store")


def test_inspect_of_a_store_that_does_not_exist_does_not_create_it(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    assert "no such folder" in one_line_error(cli("inspect", "wf-1", "--store", missing))
    assert "no such folder" in one_line_error(cli("gc", "--store", missing))
    assert not missing.exists()
    assert "not a unum store" in one_line_error(cli("inspect", "wf-1", "--store", tmp_path))


def test_the_workflow_file_instead_of_its_folder(tmp_path: Path) -> None:
    line = one_line_error(cli("run", "images/chain/unum-workflow.json"))
    assert line == ("error: images/chain/unum-workflow.json is the workflow's definition file: "
                    "pass its folder instead (images/chain)")


def test_version_and_program_name() -> None:
    from importlib.metadata import version

    shown = cli("--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"python -m builder {version('unum')}"
    usage = cli("run")
    assert one_line_error(usage).startswith("python -m builder run: error: the following arguments are required")
    script = Path(sys.executable).with_name("unum")
    if script.exists():  # the console script of the installed distribution says its own name
        named = subprocess.run([str(script), "run"], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert named.returncode == 2 and named.stderr.startswith("unum run: error: ")
