"""`.waitForTaskToken` without a coordinator, through the real CLI: `python -m builder run` stops
the workflow at the waiting Task, `python -m builder task-success|task-failure TOKEN` resumes it
exactly once; a second callback, an unknown token and a late one (TimeoutSeconds) are refused
with one line. The token travels through a Lambda handler's payload and through SQS on moto."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_asl_integrations import AWS, aws_env, client

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ASK = '''import json, os
def handler(event, context):
    with open(os.path.join(os.environ["TOKEN_DIR"], "token"), "w") as f:
        f.write(event["token"])
    return {"sent": True}
'''


def cli(*args: Any, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def approval_machine(tmp_path: Path, resource: str, parameters: dict[str, Any], **task: Any) -> Path:
    (tmp_path / "functions" / "Ask").mkdir(parents=True)
    (tmp_path / "functions" / "Ask" / "app.py").write_text(ASK)
    definition = {"StartAt": "Approve", "States": {
        "Approve": {"Type": "Task", "Resource": resource, "Parameters": parameters, "ResultPath": "$.approval",
                    "Catch": [{"ErrorEquals": ["Order.Rejected", "States.Timeout"], "ResultPath": "$.rejected",
                               "Next": "Denied"}], "Next": "Ship", **task},
        "Ship": {"Type": "Pass", "Parameters": {"order.$": "$.order", "shipped.$": "$.approval.ok"}, "End": True},
        "Denied": {"Type": "Pass", "End": True}}}
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps(definition))
    return path


def started(tmp_path: Path, **task: Any) -> tuple[Path, dict[str, str], str]:
    path = approval_machine(tmp_path, f"{AWS}lambda:invoke.waitForTaskToken",
                            {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token", "order.$": "$.order"}}, **task)
    env = {"TOKEN_DIR": str(tmp_path)}
    proc = cli("run", path, "--input", '{"order": 42}', "--store", tmp_path / "store", "--timeout", "60", env=env)
    assert proc.returncode == 2 and "without a result" in proc.stderr, proc.stderr  # it waits: no result yet
    return path, env, (tmp_path / "token").read_text()


def test_task_success_resumes_the_workflow_exactly_once(tmp_path: Path) -> None:
    path, env, token = started(tmp_path)
    store = tmp_path / "store"

    first = cli("task-success", token, "--output", '{"ok": true}', "--store", store, "--workflow", path, "--compact", env=env)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"order": 42, "shipped": True}

    again = cli("task-success", token, "--output", '{"ok": false}', "--store", store, "--workflow", path, env=env)
    assert again.returncode == 2 and "already completed" in again.stderr and "Traceback" not in again.stderr
    failure = cli("task-failure", token, "--error", "Order.Rejected", "--store", store, "--workflow", path, env=env)
    assert failure.returncode == 2 and "already completed" in failure.stderr
    inspect = cli("inspect", _workflow_of(token), "--store", store)
    assert '"shipped": true' in inspect.stdout or "succeeded" in inspect.stdout, inspect.stdout + inspect.stderr


def _workflow_of(token: str) -> str:
    from unum_entry.callbacks import Token
    return Token.parse(token).workflow


def test_task_failure_goes_to_catch(tmp_path: Path) -> None:
    path, env, token = started(tmp_path)
    proc = cli("task-failure", token, "--error", "Order.Rejected", "--cause", "too expensive", "--store",
               tmp_path / "store", "--workflow", path, "--compact", env=env)

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"order": 42, "rejected": {"Error": "Order.Rejected", "Cause": "too expensive"}}


def test_unknown_and_malformed_tokens_are_refused(tmp_path: Path) -> None:
    path, env, token = started(tmp_path)
    from unum_entry.callbacks import Token
    real = Token.parse(token)
    forged = Token(real.workflow, real.function, real.iteration, "0" * 32).text()

    proc = cli("task-success", forged, "--output", "{}", "--store", tmp_path / "store", "--workflow", path, env=env)
    assert proc.returncode == 2 and "unknown task token" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("task-success", "not-a-token", "--output", "{}", "--store", tmp_path / "store", "--workflow", path, env=env)
    assert proc.returncode == 2 and "not a unum task token" in proc.stderr
    # the real token still works after the refusals
    proc = cli("task-success", token, "--output", '{"ok": 1}', "--store", tmp_path / "store", "--workflow", path, env=env)
    assert proc.returncode == 0, proc.stderr


def test_a_callback_after_timeout_seconds_is_refused_and_the_task_times_out(tmp_path: Path) -> None:
    path, env, token = started(tmp_path, TimeoutSeconds=1)
    time.sleep(1.2)
    proc = cli("task-success", token, "--output", '{"ok": true}', "--store", tmp_path / "store", "--workflow", path,
               "--compact", env=env)

    assert proc.returncode == 2 and "timed out" in proc.stderr
    status = cli("inspect", _workflow_of(token), "--store", tmp_path / "store")
    assert "States.Timeout" in status.stdout, status.stdout + status.stderr


def test_the_token_travels_through_sqs_on_moto(moto_server, tmp_path: Path) -> None:
    sqs = client("sqs", moto_server.endpoint)
    queue = sqs.create_queue(QueueName=f"approvals-{os.getpid()}-{time.monotonic_ns()}")["QueueUrl"]
    path = approval_machine(tmp_path, f"{AWS}sqs:sendMessage.waitForTaskToken",
                            {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token", "order.$": "$.order"}})
    env = aws_env(moto_server.endpoint)
    proc = cli("run", path, "--input", '{"order": 7}', "--store", tmp_path / "store", env=env)
    assert proc.returncode == 2 and "without a result" in proc.stderr, proc.stderr

    message = json.loads(sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"])
    assert message["order"] == 7
    done = cli("task-success", message["token"], "--output", '{"ok": "yes"}', "--store", tmp_path / "store",
               "--workflow", path, "--compact", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"order": 7, "shipped": "yes"}
