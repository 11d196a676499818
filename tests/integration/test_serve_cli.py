"""`python -m builder serve` as a subprocess, driven by the pinned AWS CLI (`aws stepfunctions ...
--endpoint-url`) with dummy credentials, as a user drives it: answers as the CLI prints them, AWS's
errors as the CLI reports them, the CLI's own paging, and StartSyncExecution's host prefix."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ROLE = "arn:aws:iam::123456789012:role/unum"
LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:Inc"
AWS = str(Path(sys.executable).parent / "aws")  # the pinned AWS CLI of this environment


def two_incs() -> str:
    return json.dumps({"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": LAMBDA, "Next": "B"},
                                                  "B": {"Type": "Task", "Resource": LAMBDA, "End": True}}})


class Serve:
    """A `serve --port 0` subprocess over `tmp`, and the AWS CLI pointed at it."""

    def __init__(self, tmp: Path) -> None:
        folder = tmp / "functions" / "Inc"
        folder.mkdir(parents=True)
        (folder / "app.py").write_text("def handler(event, context):\n    return {'n': event.get('n', 0) + 1}\n")
        self.tmp = tmp
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "builder", "serve", "--port", "0", "--store", str(tmp / "unum.db"),
             "--state-dir", str(tmp / "serve"), "--functions", str(tmp / "functions")],
            cwd=tmp, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert self.proc.stderr is not None
        self.banner = self.proc.stderr.readline()
        found = re.match(r"serving (http://127\.0\.0\.1:(\d+)) ", self.banner)
        assert found, self.banner + (self.proc.stderr.read() if self.proc.poll() is not None else "")
        self.url = found.group(1)
        self.env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                    "AWS_DEFAULT_REGION": "us-east-1", "HOME": str(tmp), "AWS_CONFIG_FILE": str(tmp / "none"),
                    "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "none")}

    def aws(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([AWS, "stepfunctions", *args, "--endpoint-url", self.url], cwd=self.tmp,
                              env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=120)

    def ok(self, *args: str, env: dict[str, str] | None = None) -> Any:
        done = self.aws(*args, env=env)
        assert done.returncode == 0, f"{args}: {done.stderr}"
        return json.loads(done.stdout) if done.stdout.strip() else None

    def ended(self, execution_arn: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            described: dict[str, Any] = self.ok("describe-execution", "--execution-arn", execution_arn)
            if described["status"] != "RUNNING" or time.monotonic() > deadline:
                return described
            time.sleep(0.2)

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    server = Serve(tmp_path)
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.communicate(timeout=30)


def test_the_cli_creates_starts_describes_and_reads_history(serve: Serve) -> None:
    assert "Step Functions and Lambda durable-execution APIs" in serve.banner
    created = serve.ok("create-state-machine", "--name", "incs", "--role-arn", ROLE, "--definition", two_incs())
    arn = created["stateMachineArn"]
    assert arn == "arn:aws:states:us-east-1:123456789012:stateMachine:incs"
    assert isinstance(created["creationDate"], float) and created["creationDate"] > 1.7e9  # the CLI prints epoch seconds
    started = serve.ok("start-execution", "--state-machine-arn", arn, "--name", "one", "--input", '{"n": 1}')
    assert started["executionArn"].endswith(":execution:incs:one")
    done = serve.ended(started["executionArn"])
    assert (done["status"], json.loads(done["output"])) == ("SUCCEEDED", {"n": 3})
    history = serve.ok("get-execution-history", "--execution-arn", started["executionArn"])["events"]
    assert history[0]["type"] == "ExecutionStarted" and history[-1]["type"] == "ExecutionSucceeded"
    # the CLI pages by itself: --max-items gives a NextToken, --starting-token the rest
    first = serve.ok("get-execution-history", "--execution-arn", started["executionArn"], "--max-items", "2",
                     "--reverse-order")
    assert [e["id"] for e in first["events"]] == [len(history), len(history) - 1] and first["NextToken"]
    rest = serve.ok("get-execution-history", "--execution-arn", started["executionArn"], "--reverse-order",
                    "--starting-token", first["NextToken"])
    assert [e["id"] for e in rest["events"]] == list(range(len(history) - 2, 0, -1))
    listed = serve.ok("list-executions", "--state-machine-arn", arn, "--status-filter", "SUCCEEDED")
    assert [e["name"] for e in listed["executions"]] == ["one"]
    assert serve.ok("list-executions", "--state-machine-arn", arn, "--status-filter", "FAILED")["executions"] == []
    code, err = serve.stop()
    assert code == 143 and "Traceback" not in err


def test_the_cli_reports_aws_errors(serve: Serve) -> None:
    arn = serve.ok("create-state-machine", "--name", "m", "--role-arn", ROLE, "--definition", two_incs())[
        "stateMachineArn"]
    cases = [
        (("describe-execution", "--execution-arn", "arn:aws:states:us-east-1:123456789012:execution:m:nope"),
         "ExecutionDoesNotExist", "DescribeExecution"),
        (("describe-execution", "--execution-arn", arn), "InvalidArn", "DescribeExecution"),
        (("start-execution", "--state-machine-arn", arn, "--name", "bad name"), "InvalidName", "StartExecution"),
        (("start-execution", "--state-machine-arn", arn, "--input", "{oops"), "InvalidExecutionInput",
         "StartExecution"),
        (("create-state-machine", "--name", "x", "--role-arn", ROLE, "--definition", "{}"), "InvalidDefinition",
         "CreateStateMachine"),
        (("send-task-success", "--task-token", "garbage", "--task-output", "{}"), "InvalidToken", "SendTaskSuccess"),
    ]
    for args, code, operation in cases:
        done = serve.aws(*args)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert f"An error occurred ({code}) when calling the {operation} operation: " in done.stderr, done.stderr
    started = serve.ok("start-execution", "--state-machine-arn", arn, "--name", "e", "--input", '{"n": 0}')
    serve.ended(started["executionArn"])
    again = serve.aws("start-execution", "--state-machine-arn", arn, "--name", "e", "--input", '{"n": 0}')
    assert "An error occurred (ExecutionAlreadyExists)" in again.stderr


def test_start_sync_execution_needs_the_host_prefix_off(serve: Serve) -> None:
    """botocore sends StartSyncExecution to `sync-<host>`: against 127.0.0.1 that host does not
    exist, and AWS_DISABLE_HOST_PREFIX_INJECTION=true (docs/api.md) makes the CLI call unum."""
    arn = serve.ok("create-state-machine", "--name", "fast", "--role-arn", ROLE, "--definition", two_incs(),
                   "--type", "EXPRESS")["stateMachineArn"]
    prefixed = serve.aws("start-sync-execution", "--state-machine-arn", arn, "--input", '{"n": 40}')
    assert prefixed.returncode != 0 and "sync-127.0.0.1" in prefixed.stderr
    answer = serve.ok("start-sync-execution", "--state-machine-arn", arn, "--input", '{"n": 40}',
                      env={"AWS_DISABLE_HOST_PREFIX_INJECTION": "true"})
    assert (answer["status"], json.loads(answer["output"])) == ("SUCCEEDED", {"n": 42})
    assert answer["executionArn"].startswith("arn:aws:states:us-east-1:123456789012:express:fast:")


def test_serve_refuses_a_bad_port_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "builder", "serve", "--port", "70000"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and "Traceback" not in done.stderr and "invalid port '70000'" in done.stderr
    helped = subprocess.run([sys.executable, "-m", "builder", "serve", "--help"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert helped.returncode == 0
    assert all(flag in helped.stdout for flag in ("--port", "--store", "--state-dir", "--functions", "--region",
                                                  "--account", "--workers"))
