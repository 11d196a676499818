"""`python -m builder run --log-format json` and `-v`: the embedded engine prints the line per
delivery the function images write to CloudWatch / Cloud Logging (unum_entry.invocation_log),
so users preview them before deploying. Through the real CLI in a subprocess, a real file store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from unum_entry.invocation_log import LOG_NAME

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
KEYS = {"log", "severity", "message", "workflow_id", "function", "invocation", "attempt", "duration_ms", "outcome",
        "error", "error_type", "request_id", "state", "version"}


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=os.environ.copy())


def logged(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def test_json_lines_on_stderr_one_per_delivery_and_stdout_the_result_only(tmp_path: Path) -> None:
    proc = cli("run", "images/chain", "--input", '{"name": "ada"}', "--store", tmp_path / "s",
               "--workflow-id", "wf-log", "--log-format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["greeting"] == "HELLO, ADA!"  # stdout: the result alone
    lines = logged(proc.stderr)
    # One line per delivery, written when the delivery ends: a successor invoked from egress may end
    # (and log) before its predecessor's line is written, as in CloudWatch across log groups.
    assert sorted(line["function"] for line in lines) == ["Hello", "Shout", "Sign"]
    for line in lines:
        assert set(line) == KEYS and line["log"] == LOG_NAME and line["workflow_id"] == "wf-log"
        assert (line["outcome"], line["attempt"], line["error_type"], line["state"]) == ("done", 1, None, None)
    assert len({line["invocation"] for line in lines}) == 3
    shown = json.loads(cli("inspect", "wf-log", "--store", tmp_path / "s").stdout)
    assert {line["version"] for line in lines} == {shown["version"]} and shown["version"].startswith("v")


def test_a_compiled_machine_names_its_states_and_a_failure_its_users_error_type(tmp_path: Path) -> None:
    proc = cli("run", "images/asl-order", "--input", "@images/asl-order/input.json", "--store", tmp_path / "s",
               "--log-format", "json")
    assert proc.returncode == 0, proc.stderr
    states = {(line["function"], line["state"]) for line in logged(proc.stderr)}
    assert ("ChargeCard", "ChargeCard") in states and ("PriceLines", "PriceLines") in states  # a Task, a Map

    folder = tmp_path / "bad"
    (folder / "A").mkdir(parents=True)
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "bad", "entry": "A"}))
    (folder / "A" / "app.py").write_text("def handler(event, context):\n    raise KeyError('no price')\n")
    (folder / "A" / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": "A", "handler": "app.handler",
                                                           "max_attempts": 2}))
    failed = cli("run", folder, "--store", tmp_path / "s2", "--log-format", "json")
    assert failed.returncode == 1
    lines = logged(failed.stderr)
    assert [(line["outcome"], line["attempt"]) for line in lines] == [("retry_handler", 1), ("failed", 2)]
    assert all(line["error_type"] == "KeyError" and line["error"] == "KeyError: 'no price'" for line in lines)
    assert lines[-1]["severity"] == "ERROR"


def test_verbose_prints_each_lines_message_and_the_default_none(tmp_path: Path) -> None:
    verbose = cli("-v", "run", "images/chain", "--input", '{"name": "ada"}', "--store", tmp_path / "s",
                  "--workflow-id", "wf-v")
    assert verbose.returncode == 0, verbose.stderr
    shown = [line for line in verbose.stderr.splitlines() if line.startswith(("Hello wf-v", "Shout wf-v", "Sign wf-v"))]
    assert [line.split(" ")[0] for line in shown] == ["Hello", "Shout", "Sign"]
    assert all(" attempt 1: done in " in line and line.endswith(" ms") for line in shown)
    quiet = cli("run", "images/chain", "--input", '{"name": "ada"}', "--store", tmp_path / "s2")
    assert quiet.returncode == 0 and not logged(quiet.stderr) and " attempt 1: " not in quiet.stderr
