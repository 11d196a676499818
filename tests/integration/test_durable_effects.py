"""A durable function's step opts into unum's exactly-once transactional effects
(`unum_entry.durable_functions.transact`): through the real CLI (a retry attempt of the step
after its effect committed) and under concurrent duplicate deliveries racing one invocation, on
the SQLite store and on DynamoDB (moto server over HTTP). The effect (a credit to an account in
an application table) is applied exactly once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from unum_entry.codec import decode
from unum_entry.envelope import DataRef, Envelope
from unum_entry.errors import StaleInvocation
from unum_entry.local.platform import LocalPlatform
from unum_entry.stores import open_store
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

PAY = '''
import time
from pathlib import Path

from aws_durable_execution_sdk_python import durable_execution
from aws_durable_execution_sdk_python.config import Duration, StepConfig
from aws_durable_execution_sdk_python.retries import JitterStrategy, RetryStrategyConfig, create_retry_strategy

from unum_entry.durable_functions import transact


def credit(tx, event):
    sink = Path(event["sink"])
    with (sink / "bodies").open("a") as out:
        out.write("credit\\n")
    # Concurrent duplicates: every one computes its writes before any commits (bounded wait).
    until = time.time() + 10
    while len((sink / "bodies").read_text().split()) < event["together"] and time.time() < until:
        time.sleep(0.02)
    item = tx.get(event["table"], "ana", {"balance": 100})
    tx.put(event["table"], "ana", {"balance": item["balance"] + event["amount"]})
    return item["balance"] + event["amount"]


def pay(step, event):
    balance = transact(step, "credit", credit, event)
    if step.attempt == 1 and event["fail_first"]:
        raise RuntimeError("the step fails after its effect committed")
    return balance


@durable_execution
def handler(event, context):
    retry = create_retry_strategy(RetryStrategyConfig(max_attempts=3, initial_delay=Duration.from_seconds(1),
                                                      backoff_rate=1, jitter_strategy=JitterStrategy.NONE))
    balance = context.step(lambda step: pay(step, event), name="pay", config=StepConfig(retry_strategy=retry))
    return {"balance": balance}
'''

OUTSIDE = '''
from aws_durable_execution_sdk_python import durable_execution

from unum_entry.durable_functions import transact


@durable_execution
def handler(event, context):
    return transact(None, "nowhere", lambda tx: 1)
'''


@pytest.fixture(params=["sqlite", "dynamodb"])
def store_url(request, tmp_path: Path) -> tuple[str, str]:
    """(store URL, application table)"""
    if request.param == "sqlite":
        return str(tmp_path / "unum.db"), "accounts"
    server = request.getfixturevalue("moto_server")
    url = f"dynamodb://unum-{uuid.uuid4().hex[:10]}?endpoint={server.endpoint}&create=1"
    table = f"accounts-{uuid.uuid4().hex[:8]}"
    store = open_store(url)
    store.client.create_table(TableName=table, KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST")
    store.close()
    return url, table


def _balance(url: str, table: str) -> int:
    store = open_store(url)
    try:
        return int(decode(store.app_read(table, ["ana"])["ana"].value)["balance"])
    finally:
        store.close()


def _event(tmp_path: Path, table: str, *, together: int, fail_first: bool) -> dict:
    sink = tmp_path / "sink"
    sink.mkdir(exist_ok=True)
    return {"sink": str(sink), "table": table, "amount": 7, "together": together, "fail_first": fail_first}


def test_a_retried_step_commits_its_transactional_effect_once_through_the_cli(tmp_path: Path, store_url) -> None:
    url, table = store_url
    workflow = write_workflow(tmp_path / "wf", name="durable-pay", entry="Pay", functions={"Pay": FunctionSource(PAY)})
    event = _event(tmp_path, table, together=1, fail_first=True)
    done = subprocess.run([sys.executable, "-m", "builder", "run", str(workflow.folder), "--input", json.dumps(event),
                           "--store", url, "--compact"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"balance": 107}
    assert _balance(url, table) == 107  # two attempts of the step, one credit
    assert (tmp_path / "sink" / "bodies").read_text().split() == ["credit"]  # the retry ran no effect


def test_concurrent_duplicates_of_a_step_commit_its_effect_exactly_once(tmp_path: Path, store_url, race) -> None:
    url, table = store_url
    duplicates = 4
    workflow = write_workflow(tmp_path / "wf", name="durable-pay", entry="Pay", functions={"Pay": FunctionSource(PAY)})
    event = _event(tmp_path, table, together=duplicates, fail_first=False)
    store = open_store(url)
    try:
        with LocalPlatform(workflow, store, workers=2) as platform:
            env = Envelope(workflow="wf-pay-race", inputs=(DataRef(value=event),), start=True)

            def deliver(_: int) -> object:
                try:
                    return platform.runtimes["Pay"].handle(env)
                except StaleInvocation:
                    return None

            race(duplicates, deliver)  # the same first delivery, four times at once
            platform.wait_idle(60)
            outcome = platform.outcome("wf-pay-race")
    finally:
        store.close()
    assert outcome.failure is None, outcome.failure
    assert outcome.result == {"balance": 107}
    bodies = (tmp_path / "sink" / "bodies").read_text().split()
    assert len(bodies) >= duplicates  # every duplicate ran the step's effect function ...
    assert _balance(url, table) == 107  # ... and it was committed once


def test_transact_outside_a_durable_step_fails_with_one_clear_line(tmp_path: Path) -> None:
    workflow = write_workflow(tmp_path / "wf", name="durable-outside", entry="Out",
                              functions={"Out": FunctionSource(OUTSIDE)})
    done = subprocess.run([sys.executable, "-m", "builder", "run", str(workflow.folder), "--store",
                           str(tmp_path / "unum.db")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "call it inside a durable step" in done.stderr and "Traceback" not in done.stderr


FAILING_TASK = '''
from pathlib import Path

from aws_durable_execution_sdk_python import durable_execution
from aws_durable_execution_sdk_python.config import Duration, StepConfig
from aws_durable_execution_sdk_python.retries import RetryStrategyConfig, create_retry_strategy


class OutOfStock(Exception):
    pass


def reserve(event):
    counter = Path(event["folder"]) / "executions"
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    if n <= event["failures"]:
        raise OutOfStock(f"execution {n}: no {event['sku']} left")
    return f"reserved {event['sku']}"


@durable_execution
def handler(event, context):
    context.wait(Duration.from_seconds(1), name="pause")
    once = StepConfig(retry_strategy=create_retry_strategy(RetryStrategyConfig(max_attempts=1)))
    return {"reservation": context.step(lambda _: reserve(event), name="reserve", config=once)}
'''


def _task_machine(tmp_path: Path, *, retry: bool) -> Path:
    task = {"Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Reserve",
            "ResultPath": "$.reserved", "End": True,
            "Catch": [{"ErrorEquals": ["States.TaskFailed"], "ResultPath": "$.failure", "Next": "Backorder"}]}
    if retry:
        task["Retry"] = [{"ErrorEquals": ["StepError", "OutOfStock"], "MaxAttempts": 2, "IntervalSeconds": 1}]
    machine = {"StartAt": "Reserve", "States": {
        "Reserve": task, "Backorder": {"Type": "Pass", "Result": "backordered", "ResultPath": "$.status", "End": True}}}
    (tmp_path / "functions" / "Reserve").mkdir(parents=True)
    (tmp_path / "functions" / "Reserve" / "app.py").write_text(FAILING_TASK)
    (tmp_path / "statemachine.json").write_text(json.dumps(machine))
    return tmp_path / "statemachine.json"


@pytest.mark.parametrize("failures, expected", [(1, "retried"), (5, "caught")])
def test_a_failed_durable_execution_goes_through_the_tasks_retry_and_catch(tmp_path: Path, store_url, failures,
                                                                          expected) -> None:
    url, _ = store_url
    machine = _task_machine(tmp_path, retry=True)
    event = {"folder": str(tmp_path), "sku": "fig", "failures": failures}
    done = subprocess.run([sys.executable, "-m", "builder", "run", str(machine), "--input", json.dumps(event),
                           "--store", url, "--compact"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    if expected == "retried":  # the first durable execution failed, the Task's retry started a new one
        assert out["reserved"] == {"reservation": "reserved fig"} and (tmp_path / "executions").read_text() == "2"
        return
    assert out["status"] == "backordered" and (tmp_path / "executions").read_text() == "3"  # 1 + MaxAttempts
    assert out["failure"]["Error"] == "StepError"
    cause = json.loads(out["failure"]["Cause"])
    assert cause["errorType"] == "StepError" and "no fig left" in cause["errorMessage"]


CALLER = '''
from aws_durable_execution_sdk_python import durable_execution


@durable_execution
def handler(event, context):
    try:
        context.invoke(event["target"], {"n": 1}, name="call")
        return {"failed": None}
    except Exception as exc:
        return {"failed": type(exc).__name__, "message": str(exc)}
'''

PLAIN = "def handler(event, context):\n    raise AssertionError('a plain function must not run for a durable invoke')\n"


@pytest.mark.parametrize("target, error", [("Missing", "Function not found: Missing"),
                                           ("Plain", "'Plain' is not a durable function")])
def test_invoke_of_an_unknown_or_non_durable_function_fails_at_once(tmp_path: Path, store_url, target, error) -> None:
    import time

    url, _ = store_url
    workflow = write_workflow(tmp_path / "wf", name="durable-invoke", entry="Caller",
                              functions={"Caller": FunctionSource(CALLER), "Plain": FunctionSource(PLAIN)})
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "builder", "run", str(workflow.folder), "--input",
                           json.dumps({"target": target}), "--store", url, "--compact", "--timeout", "60"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["failed"] == "InvokeError" and error in out["message"], out
    assert time.monotonic() - started < 30  # at once, not after the run's timeout
