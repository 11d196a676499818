"""The callback commands on a deployed workflow (`--invoker URL` or `$UNUM_INVOKER`, no
`--workflow`): `callback-success|callback-failure` of a durable function's callback and
`task-success` of a `.waitForTaskToken` Task record the completion in the store and re-invoke the
waiting function through the platform, which finishes the workflow. The deployment is Lambda
without containers: the real RIE runs `python -m unum_entry` on the host behind the local
asynchronous Invoke endpoint, DynamoDB (and SQS) on moto; the CLI runs as a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from builder.local_stack.lambda_containers import HostLambdaFunction
from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry
from unum_entry.invokers.aws_lambda import build_client
from unum_entry.outcome import read_outcome
from unum_entry.runtime import new_workflow
from unum_entry.stores import open_store
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
FAST = LambdaRetry(delays=(0.1, 0.2), unavailable_delay=0.1, max_event_age=60.0, request_timeout=60.0)

APPROVAL = '''
from pathlib import Path

from aws_durable_execution_sdk_python import durable_execution


@durable_execution
def handler(event, context):
    callback = context.create_callback(name="approve")
    Path(event["folder"], "callback-id").write_text(callback.callback_id)
    return {"approved": callback.result()}
'''


@contextmanager
def deployed(moto_server, folder: Path, *, environment: dict[str, str] | None = None
             ) -> Iterator[tuple[str, str, AsyncInvokeEndpoint]]:
    """Every function of the workflow `folder` on the host Lambda stack: (store URL, invoker URL,
    endpoint)."""
    workflow = load_workflow(folder)
    table = f"unum-cb-{uuid.uuid4().hex[:10]}"
    store_url = f"dynamodb://{table}?endpoint={moto_server.endpoint}&region=us-east-1"
    open_store(store_url + "&create=1").close()
    with ExitStack() as stack:
        endpoint = stack.enter_context(AsyncInvokeEndpoint(retry=FAST))
        invoker_url = f"lambda://?endpoint={endpoint.endpoint}&region=us-east-1"
        env = {"UNUM_STORE": store_url, "UNUM_INVOKER": invoker_url, "UNUM_LOG_LEVEL": "WARNING", **(environment or {})}
        for name, spec in workflow.functions.items():
            function = stack.enter_context(HostLambdaFunction(spec.folder, function_name=name, environment=env))
            endpoint.register(name, function.invoke_url)
        yield store_url, invoker_url, endpoint


def _approval(tmp_path: Path) -> Path:
    return write_workflow(tmp_path / "wf", name="approval", entry="Approve",
                          functions={"Approve": FunctionSource(APPROVAL)}).folder


def _start(endpoint: AsyncInvokeEndpoint, store_url: str, entry: str, input_value: object) -> str:
    """Start the workflow at `entry`; once it waits (nothing in flight, no result): its id."""
    env = new_workflow(input_value, f"wf-{uuid.uuid4().hex[:10]}")
    client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
    assert client.invoke(FunctionName=entry, InvocationType="Event",
                         Payload=json.dumps(env.to_wire()))["StatusCode"] == 202
    assert endpoint.wait_idle(60), endpoint.stats
    store = open_store(store_url)
    try:
        assert read_outcome(store, env.workflow).results == []  # waiting: no result yet
    finally:
        store.close()
    return env.workflow


def _start_waiting(endpoint: AsyncInvokeEndpoint, store_url: str, folder: Path) -> tuple[str, str]:
    """Start the approval; once it waits for its callback: (workflow id, callback id)."""
    workflow_id = _start(endpoint, store_url, "Approve", {"folder": str(folder)})
    return workflow_id, (folder / "callback-id").read_text()


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def _outcome(store_url: str, workflow_id: str, endpoint: AsyncInvokeEndpoint):
    assert endpoint.wait_idle(60), endpoint.stats
    store = open_store(store_url)
    try:
        for _ in range(100):  # bounded: the re-invoke is asynchronous (202 at once)
            outcome = read_outcome(store, workflow_id)
            if outcome.results or outcome.failure:
                return outcome
            time.sleep(0.1)
        return outcome
    finally:
        store.close()


def test_callback_success_with_invoker_resumes_the_deployed_function_once(moto_server, tmp_path: Path) -> None:
    with deployed(moto_server, _approval(tmp_path)) as (store_url, invoker_url, endpoint):
        workflow_id, callback_id = _start_waiting(endpoint, store_url, tmp_path)
        beat = _cli("callback-heartbeat", callback_id, "--store", store_url)
        assert beat.returncode == 0, beat.stderr
        done = _cli("callback-success", callback_id, "--result", '{"by": "ana"}', "--store", store_url,
                    "--invoker", invoker_url)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"workflow": workflow_id, "resumed": "Approve"}
        outcome = _outcome(store_url, workflow_id, endpoint)
        assert outcome.failure is None and outcome.result == {"approved": '{"by": "ana"}'}
        again = _cli("callback-success", callback_id, "--result", '"bob"', "--store", store_url,
                     "--invoker", invoker_url)
        assert again.returncode == 2 and "already completed" in again.stderr and "Traceback" not in again.stderr
        assert _outcome(store_url, workflow_id, endpoint).result == {"approved": '{"by": "ana"}'}


def test_callback_failure_through_unum_invoker_fails_the_deployed_workflow(moto_server, tmp_path: Path) -> None:
    with deployed(moto_server, _approval(tmp_path)) as (store_url, invoker_url, endpoint):
        workflow_id, callback_id = _start_waiting(endpoint, store_url, tmp_path)
        missing = _cli("callback-failure", callback_id, "--store", store_url, env={"UNUM_INVOKER": ""})
        assert missing.returncode == 2 and "--invoker URL" in missing.stderr and "Traceback" not in missing.stderr
        done = _cli("callback-failure", callback_id, "--error", "Rejected", "--cause", "over budget",
                    "--store", store_url, env={"UNUM_INVOKER": invoker_url})
        assert done.returncode == 0, done.stderr
        outcome = _outcome(store_url, workflow_id, endpoint)
        assert outcome.failure is not None and "over budget" in outcome.failure["Cause"], outcome.failure


def test_task_success_with_invoker_resumes_the_deployed_state_machine(moto_server, tmp_path: Path) -> None:
    """A compiled `.waitForTaskToken` Task sends its token through SQS (moto); `task-success`
    with `--invoker` re-invokes the deployed function that waits."""
    import boto3

    sqs = boto3.client("sqs", endpoint_url=moto_server.endpoint, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    queue = sqs.create_queue(QueueName=f"approvals-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    machine = {"StartAt": "Approve", "States": {
        "Approve": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                    "Parameters": {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token", "order.$": "$.order"}},
                    "ResultPath": "$.approval", "Next": "Ship"},
        "Ship": {"Type": "Pass", "Parameters": {"order.$": "$.order", "shipped.$": "$.approval.ok"}, "End": True}}}
    (tmp_path / "statemachine.json").write_text(json.dumps(machine))
    compiled = _cli("compile", str(tmp_path / "statemachine.json"), "--out", str(tmp_path / "wf"))
    assert compiled.returncode == 0, compiled.stderr
    entry = load_workflow(tmp_path / "wf").entry
    aws = {"AWS_ENDPOINT_URL": moto_server.endpoint, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    with deployed(moto_server, tmp_path / "wf", environment=aws) as (store_url, invoker_url, endpoint):
        workflow_id = _start(endpoint, store_url, entry, {"order": 7})
        token = json.loads(sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=5)["Messages"][0]["Body"])["token"]
        done = _cli("task-success", token, "--output", '{"ok": "yes"}', "--store", store_url, "--invoker", invoker_url)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["workflow"] == workflow_id
        outcome = _outcome(store_url, workflow_id, endpoint)
        assert outcome.failure is None and outcome.result == {"order": 7, "shipped": "yes"}, outcome
