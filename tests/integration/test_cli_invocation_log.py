"""A function image's JSON line per invocation, captured from a real process: `unum_entry`'s
Lambda adapter loaded from the environment (as in the image) handles real deliveries against a
real file store, and its stdout is what CloudWatch would receive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from unum_entry.naming import checkpoint_key
from unum_entry.runtime import new_workflow
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

# What the image's entrypoint does up to awslambdaric's loop, then two events as Lambda would
# deliver them (the first starts a workflow; the second is the same start again).
DRIVER = textwrap.dedent("""
    import os, sys
    from unum_entry.platforms.aws_lambda import LambdaAdapter
    from unum_entry.platforms.common import FunctionSettings, RetryPolicy, load_function

    adapter = LambdaAdapter(load_function(FunctionSettings.from_env(os.environ)), retry=RetryPolicy(base=0.0))
    class Context:
        aws_request_id = sys.argv[1]
    adapter.handle({"n": 2}, Context())
    adapter.handle({"n": 2}, Context())
""")


def run_function(tmp_path: Path, code: str, request: str, **env: str) -> subprocess.CompletedProcess[str]:
    workflow = write_workflow(tmp_path / "wf", name="wf", entry="F",
                              functions={"F": FunctionSource(code, (), {"max_attempts": 2})})
    environ = {**os.environ, "UNUM_FUNCTION_DIR": str(workflow.functions["F"].folder),
               "UNUM_STORE": str(tmp_path / "store"),
               "UNUM_INVOKER": "lambda://?prefix=t-&endpoint=http://127.0.0.1:1&region=us-east-1", **env}
    return subprocess.run([sys.executable, "-c", DRIVER, request], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=environ)


def lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_each_delivery_logs_one_json_line(tmp_path: Path) -> None:
    proc = run_function(tmp_path, "def handler(event, context):\n    return event['n'] * 21\n", "req-1")
    assert proc.returncode == 0, proc.stderr
    logged = lines(proc.stdout)
    assert len(logged) == 2 == len(proc.stdout.splitlines())  # one line per delivery, nothing else on stdout
    first, again = logged
    assert first["log"] == "unum.invocation" and first["severity"] == "INFO"
    assert first["workflow_id"] == "wf-req-1" and first["function"] == "F" and first["attempt"] == 1
    assert first["invocation"] == checkpoint_key("wf-req-1", "F", new_workflow(None, "wf-req-1").frames) == again["invocation"]
    assert first["outcome"] == "done" and first["error"] is None and first["error_type"] is None
    assert first["request_id"] == "req-1" == again["request_id"] and first["state"] is None  # not a compiled machine
    assert isinstance(first["duration_ms"], float) and 0 <= first["duration_ms"] < 60_000


def test_a_failed_handler_logs_its_error(tmp_path: Path) -> None:
    """max_attempts 2: a handler that always raises; the adapter retries by re-invoking itself
    (the invoke goes nowhere here), so the first delivery logs retry_handler with the error."""
    proc = run_function(tmp_path, "def handler(event, context):\n    raise ValueError('bad n')\n", "req-2")
    logged = lines(proc.stdout)
    assert logged, proc.stderr
    assert logged[0]["outcome"] == "retry_handler" and logged[0]["severity"] == "WARNING"
    assert "ValueError: bad n" in logged[0]["error"] and logged[0]["error_type"] == "ValueError"


def test_the_hosted_state_of_a_compiled_function(tmp_path: Path) -> None:
    from unum_entry.invocation_log import hosted_state

    (tmp_path / "unum-asl.json").write_text(json.dumps({"task": "ChargeCard", "states": {}}))
    assert hosted_state(str(tmp_path)) == "ChargeCard"
    assert hosted_state(str(tmp_path / "missing")) is None and hosted_state(None) is None


def test_the_switch_turns_it_off(tmp_path: Path) -> None:
    proc = run_function(tmp_path, "def handler(event, context):\n    return 1\n", "req-3", UNUM_INVOCATION_LOG="0")
    assert proc.returncode == 0, proc.stderr
    assert lines(proc.stdout) == []


def test_the_line_names_the_version_the_image_runs(tmp_path: Path) -> None:
    """`UNUM_WORKFLOW_VERSION` (set by a deploy) is every line's `version`; unset, it is null."""
    code = "def handler(event, context):\n    return event['n']\n"
    pinned = run_function(tmp_path / "a", code, "req-v", UNUM_WORKFLOW_VERSION="v0123456789abcdef")
    unset = run_function(tmp_path / "b", code, "req-u")
    assert pinned.returncode == 0 == unset.returncode, pinned.stderr + unset.stderr
    assert [line["version"] for line in lines(pinned.stdout)] == ["v0123456789abcdef"] * 2
    assert [line["version"] for line in lines(unset.stdout)] == [None, None]
