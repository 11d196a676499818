"""`.waitForTaskToken` without a coordinator, through the real CLI: `python -m builder run` stops
the workflow at the waiting Task (exit 0, "waiting", the token and how to complete it; `inspect`
says "waiting"), `python -m builder task-success|task-failure TOKEN` resumes it exactly once; a
second callback, an unknown token and a late one (after the TimeoutSeconds timer fired) are refused with one line; a
failure callback goes through the Task's Retry, then its Catch. Tasks inside a Map iteration and
inside a Parallel branch nested in a Map wait too: completed out of order, the Map's output is in
item order. The token travels through a Lambda handler's payload and through SQS on moto."""

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
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr  # waiting is not an error; no result yet
    token = (tmp_path / "token").read_text()
    assert "is waiting for 1 task-token callback(s) at 'Approve'" in proc.stderr, proc.stderr
    assert f"Approve: {token}" in proc.stderr and "task-success TOKEN --output JSON" in proc.stderr
    return path, env, token


def test_task_success_resumes_the_workflow_exactly_once(tmp_path: Path) -> None:
    path, env, token = started(tmp_path)
    store = tmp_path / "store"
    waiting = json.loads(cli("inspect", _workflow_of(token), "--store", store).stdout)
    assert waiting["status"] == "waiting" and waiting["results"] == []
    assert waiting["waiting"] == [{"state": "Approve", "function": "Approve", "token": token}]
    assert "task-success TOKEN" in waiting["complete"] and "resume" not in waiting
    listed = json.loads(cli("list", "--store", store, "--json").stdout)
    assert [(w["workflow"], w["status"]) for w in listed] == [(_workflow_of(token), "waiting")]
    only = json.loads(cli("list", "--store", store, "--json", "--status", "waiting").stdout)
    assert [w["workflow"] for w in only] == [_workflow_of(token)]
    refused = cli("rm", _workflow_of(token), "--store", store)
    assert refused.returncode == 2 and "is waiting" in refused.stderr, refused.stderr

    first = cli("task-success", token, "--output", '{"ok": true}', "--store", store, "--workflow", path, "--compact", env=env)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"order": 42, "shipped": True}

    again = cli("task-success", token, "--output", '{"ok": false}', "--store", store, "--workflow", path, env=env)
    assert again.returncode == 2 and "already completed" in again.stderr and "Traceback" not in again.stderr
    failure = cli("task-failure", token, "--error", "Order.Rejected", "--store", store, "--workflow", path, env=env)
    assert failure.returncode == 2 and "already completed" in failure.stderr
    inspect = cli("inspect", _workflow_of(token), "--store", store)
    assert '"shipped": true' in inspect.stdout or "succeeded" in inspect.stdout, inspect.stdout + inspect.stderr
    listed = json.loads(cli("list", "--store", store, "--json").stdout)
    assert [w["status"] for w in listed] == ["succeeded"]


def _workflow_of(token: str) -> str:
    from unum_entry.asl.callbacks import Token
    return Token.parse(token).workflow


def test_task_failure_goes_to_catch(tmp_path: Path) -> None:
    path, env, token = started(tmp_path)
    proc = cli("task-failure", token, "--error", "Order.Rejected", "--cause", "too expensive", "--store",
               tmp_path / "store", "--workflow", path, "--compact", env=env)

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"order": 42, "rejected": {"Error": "Order.Rejected", "Cause": "too expensive"}}


def test_unknown_and_malformed_tokens_are_refused(tmp_path: Path) -> None:
    path, env, token = started(tmp_path)
    from unum_entry.asl.callbacks import Token
    real = Token.parse(token)
    forged = Token(real.workflow, real.function, real.frames, "0" * 32).text()

    proc = cli("task-success", forged, "--output", "{}", "--store", tmp_path / "store", "--workflow", path, env=env)
    assert proc.returncode == 2 and "unknown task token" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("task-success", "not-a-token", "--output", "{}", "--store", tmp_path / "store", "--workflow", path, env=env)
    assert proc.returncode == 2 and "not a unum task token" in proc.stderr
    # the real token still works after the refusals
    proc = cli("task-success", token, "--output", '{"ok": 1}', "--store", tmp_path / "store", "--workflow", path, env=env)
    assert proc.returncode == 0, proc.stderr


def test_the_task_times_out_when_its_timeout_seconds_elapse_and_a_late_callback_is_refused(tmp_path: Path) -> None:
    path = approval_machine(tmp_path, f"{AWS}lambda:invoke.waitForTaskToken",
                            {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token", "order.$": "$.order"}},
                            TimeoutSeconds=1)
    env = {"TOKEN_DIR": str(tmp_path)}
    store = tmp_path / "store"
    began = time.monotonic()
    proc = cli("run", path, "--input", '{"order": 42}', "--store", store, "--compact", env=env)

    # The timeout's timer fired after 1 s (nothing called back): Catch took States.Timeout.
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"order": 42, "rejected": {
        "Error": "States.Timeout", "Cause": "the task timed out after 1 seconds before its callback"}}
    assert time.monotonic() - began >= 1.0
    token = (tmp_path / "token").read_text()
    late = cli("task-success", token, "--output", '{"ok": true}', "--store", store, "--workflow", path, env=env)
    assert late.returncode == 2 and "timed out" in late.stderr and "Traceback" not in late.stderr, late.stderr
    beat = cli("task-heartbeat", token, "--store", store)
    assert beat.returncode == 2 and "timed out" in beat.stderr, beat.stderr
    status = cli("inspect", _workflow_of(token), "--store", store)
    assert "States.Timeout" in status.stdout and "succeeded" in status.stdout, status.stdout + status.stderr


def test_the_token_travels_through_sqs_on_moto(moto_server, tmp_path: Path) -> None:
    sqs = client("sqs", moto_server.endpoint)
    queue = sqs.create_queue(QueueName=f"approvals-{os.getpid()}-{time.monotonic_ns()}")["QueueUrl"]
    path = approval_machine(tmp_path, f"{AWS}sqs:sendMessage.waitForTaskToken",
                            {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token", "order.$": "$.order"}})
    env = aws_env(moto_server.endpoint)
    proc = cli("run", path, "--input", '{"order": 7}', "--store", tmp_path / "store", env=env)
    assert proc.returncode == 0 and "waiting for 1 task-token callback" in proc.stderr, proc.stderr

    message = json.loads(sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"])
    assert message["order"] == 7
    done = cli("task-success", message["token"], "--output", '{"ok": "yes"}', "--store", tmp_path / "store",
               "--workflow", path, "--compact", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"order": 7, "shipped": "yes"}


COUNTING_ASK = '''import json, os
def handler(event, context):
    folder = os.environ["TOKEN_DIR"]
    with open(os.path.join(folder, "token-%s" % event.get("id", "")), "a") as f:
        f.write(event["token"] + "\\n")
    return {"sent": True}
'''


def _ask_function(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "functions" / "Ask").mkdir(parents=True)
    (tmp_path / "functions" / "Ask" / "app.py").write_text(COUNTING_ASK)
    return {"TOKEN_DIR": str(tmp_path), "UNUM_ASL_TIME_SCALE": "0.001"}


def _tokens(tmp_path: Path, key: Any = "") -> list[str]:
    return (tmp_path / f"token-{key}").read_text().split()


WAITING_TASK = {"Type": "Task", "Resource": f"{AWS}lambda:invoke.waitForTaskToken",
                "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token", "id.$": "$.id"}}}


def test_a_failure_callback_is_retried_then_caught(tmp_path: Path) -> None:
    env = _ask_function(tmp_path)
    definition = {"StartAt": "Approve", "States": {
        "Approve": {**WAITING_TASK, "ResultPath": "$.approval", "End": True,
                    "Retry": [{"ErrorEquals": ["Order.Rejected"], "MaxAttempts": 1, "IntervalSeconds": 1}],
                    "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.rejected", "Next": "Denied"}]},
        "Denied": {"Type": "Pass", "End": True}}}
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps(definition))
    store = tmp_path / "store"
    assert cli("run", path, "--input", '{"id": 1}', "--store", store, env=env).returncode == 0
    [first] = _tokens(tmp_path, 1)

    retried = cli("task-failure", first, "--error", "Order.Rejected", "--cause", "no", "--store", store,
                  "--workflow", path, env=env)
    assert retried.returncode == 0 and "is waiting for 1 task-token callback(s) at 'Approve'" in retried.stderr, \
        retried.stderr
    first_again, second = _tokens(tmp_path, 1)  # Retry ran the Task again: a new call, a new token
    assert first_again == first and second != first
    caught = cli("task-failure", second, "--error", "Order.Rejected", "--cause", "still no", "--store", store,
                 "--workflow", path, "--compact", env=env)
    assert caught.returncode == 0, caught.stderr  # MaxAttempts 1 is used up: Catch takes it
    assert json.loads(caught.stdout) == {"id": 1, "rejected": {"Error": "Order.Rejected", "Cause": "still no"}}
    assert _tokens(tmp_path, 1) == [first, second]


def test_each_map_iteration_waits_and_the_map_joins_in_item_order(tmp_path: Path) -> None:
    env = _ask_function(tmp_path)
    definition = {"StartAt": "Each", "States": {"Each": {
        "Type": "Map", "ItemsPath": "$.orders", "ResultPath": "$.approved", "End": True,
        "ItemProcessor": {"StartAt": "Approve", "States": {"Approve": {**WAITING_TASK, "ResultPath": "$.ok",
                                                                         "End": True}}}}}}
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps(definition))
    store = tmp_path / "store"
    orders = {"orders": [{"id": 0}, {"id": 1}, {"id": 2}]}
    run = cli("run", path, "--input", json.dumps(orders), "--store", store, env=env)
    assert run.returncode == 0 and "waiting for 3 task-token callback(s) at 'Approve'" in run.stderr, run.stderr
    tokens = [_tokens(tmp_path, i)[0] for i in range(3)]
    assert len(set(tokens)) == 3
    workflow = _workflow_of(tokens[0])

    for i, left in ((2, 2), (0, 1)):  # out of order: the others keep waiting
        done = cli("task-success", tokens[i], "--output", json.dumps({"by": i}), "--store", store, "--workflow", path,
                   env=env)
        assert done.returncode == 0 and done.stdout == "", done.stderr
        assert f"is waiting for {left} task-token callback(s) at 'Approve'" in done.stderr, done.stderr
    report = json.loads(cli("inspect", workflow, "--store", store).stdout)
    assert report["status"] == "waiting" and [w["token"] for w in report["waiting"]] == [tokens[1]]
    again = cli("task-success", tokens[2], "--output", '{"by": "late"}', "--store", store, "--workflow", path, env=env)
    assert again.returncode == 2 and "already completed" in again.stderr and "Traceback" not in again.stderr

    last = cli("task-success", tokens[1], "--output", '{"by": 1}', "--store", store, "--workflow", path,
               "--compact", env=env)
    assert last.returncode == 0, last.stderr
    assert json.loads(last.stdout) == {**orders, "approved": [{"id": i, "ok": {"by": i}} for i in range(3)]}
    assert json.loads(cli("inspect", workflow, "--store", store).stdout)["status"] == "succeeded"
    refused = cli("task-failure", tokens[0], "--error", "X", "--store", store, "--workflow", path, env=env)
    assert refused.returncode == 2 and "already completed" in refused.stderr


def test_a_parallel_branch_nested_in_a_map_waits(tmp_path: Path) -> None:
    env = _ask_function(tmp_path)
    branches = [{"StartAt": "Approve", "States": {"Approve": {**WAITING_TASK, "End": True}}},
                {"StartAt": "Note", "States": {"Note": {"Type": "Pass", "Result": "noted", "End": True}}}]
    definition = {"StartAt": "Each", "States": {"Each": {
        "Type": "Map", "End": True,
        "ItemProcessor": {"StartAt": "Both", "States": {"Both": {"Type": "Parallel", "Branches": branches,
                                                                   "End": True}}}}}}
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps(definition))
    store = tmp_path / "store"
    run = cli("run", path, "--input", '[{"id": "a"}, {"id": "b"}]', "--store", store, env=env)
    assert run.returncode == 0 and "waiting for 2 task-token callback(s)" in run.stderr, run.stderr
    for key in ("b", "a"):
        done = cli("task-success", _tokens(tmp_path, key)[0], "--output", json.dumps(key.upper()), "--store", store,
                   "--workflow", path, "--compact", env=env)
        assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["A", "noted"], ["B", "noted"]]


def test_a_duplicate_execution_of_the_waiting_task_sends_the_same_token(tmp_path: Path) -> None:
    env = _ask_function(tmp_path)
    definition = {"StartAt": "Approve", "States": {"Approve": {**WAITING_TASK, "End": True}}}
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps(definition))
    store = tmp_path / "store"
    for _ in range(2):  # the same workflow id again: the waiting Task's invocation is delivered twice
        proc = cli("run", path, "--input", '{"id": 5}', "--workflow-id", "wf-twice", "--store", store, env=env)
        assert proc.returncode == 0 and "waiting for 1 task-token callback" in proc.stderr, proc.stderr
    first, second = _tokens(tmp_path, 5)  # the handler ran twice; the nonce is a journaled step
    assert first == second
    done = cli("task-success", second, "--output", '"yes"', "--store", store, "--workflow", path, "--compact", env=env)
    assert done.returncode == 0 and json.loads(done.stdout) == "yes", done.stderr
