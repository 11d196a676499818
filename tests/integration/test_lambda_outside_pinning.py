"""Issue 44: what continues a deployed workflow from outside its functions runs the build the
workflow started on, not `$LATEST`.

Two builds of one workflow are real unum functions (LambdaAdapter over `load_function`) behind in-process RIE stand-ins behind the local Invoke endpoint (their store: DynamoDB on moto), each published
as Lambda versions with an alias named after the build, each function's invoker qualified with
its build (as `deploy --target aws` sets it; tests/integration/test_lambda_version_pinning.py).
A workflow is started on build one; build two is published, so `$LATEST` is build two; then
the real CLI continues the workflow with an invoker URL naming no build:
- `callback-success ID --invoker URL` of a durable callback the workflow waits on (the
  `deployed_invoker` that `task-success` shares, builder.commands.callback_commands);
- `task-success TOKEN --invoker URL` of a compiled `.waitForTaskToken` Task (its token sent
  through SQS on moto);
- `redrive WF --invoker URL` of a workflow failed on build one (a transient fault in B);
- the `--api` function's SendTaskSuccess and RedriveExecution (StatesApi over CloudEngine).
Each must end on build one's code (`"one"`): invoked unqualified, `$LATEST` answers `"two"`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry
from tests.integration.test_lambda_version_pinning import InProcessRie
from unum_entry.invokers.aws_lambda import build_client
from unum_entry.invokers.lambda_builds import read_build
from unum_entry.invokers.lambda_event import to_event
from unum_entry.outcome import RunResult, read_outcome
from unum_entry.platforms.aws_lambda import LambdaAdapter
from unum_entry.platforms.common import FunctionSettings, RetryPolicy, load_function
from unum_entry.runtime import new_workflow
from unum_entry.stores import open_store
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

APPROVAL = '''
from pathlib import Path

from aws_durable_execution_sdk_python import durable_execution


@durable_execution
def handler(event, context):
    callback = context.create_callback(name="approve")
    Path(event["folder"], "callback-id").write_text(callback.callback_id)
    return {"approved": callback.result(), "build": BUILD}
'''

FLAKY = '''import os
def handler(event, context):
    if not os.path.exists(event["fixed"]):
        raise RuntimeError("a transient fault")
    return BUILD
'''


def _approval(folder: Path, build: str) -> Path:
    write_workflow(folder, name="approval", entry="A",
                   functions={"A": FunctionSource(APPROVAL.replace("BUILD", repr(build)))})
    return folder


def _flaky(folder: Path, build: str) -> Path:
    write_workflow(folder, name="flaky", entry="A", functions={
        "A": FunctionSource("def handler(event, context):\n    return event\n", [{"op": "invoke", "function": "B"}]),
        "B": FunctionSource(FLAKY.replace("BUILD", repr(build)), ir_fields={"max_attempts": 1})})
    return folder


class Builds:
    """The local Invoke endpoint, the store and the builds published on it so far."""

    def __init__(self, endpoint: AsyncInvokeEndpoint, store_url: str) -> None:
        self.endpoint = endpoint
        self.store_url = store_url
        self.client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
        self.servers: list[InProcessRie] = []
        self.url = f"lambda://?endpoint={endpoint.endpoint}&region=us-east-1"  # names no build

    def publish(self, folder: Path, build: str) -> None:
        """Serve every function of `folder` pinned to `build`, register it (it becomes
        `$LATEST`), publish a version and alias it `build`."""
        for function in sorted(p.name for p in folder.iterdir() if p.is_dir()):
            loaded = load_function(FunctionSettings.from_env({
                "UNUM_FUNCTION_DIR": str(folder / function), "UNUM_STORE": self.store_url,
                "UNUM_INVOKER": f"{self.url}&qualifier={build}", "UNUM_WATCHDOG": "0"}))
            self.servers.append(InProcessRie(LambdaAdapter(loaded, retry=RetryPolicy(base=0.0))))
            self.endpoint.register(function, self.servers[-1].url, image=f"sha256:{build}")
            number = self.client.publish_version(FunctionName=function)["Version"]
            self.client.create_alias(FunctionName=function, Name=build, FunctionVersion=number)

    def start(self, build: str, workflow_id: str, input_value: Any, *, entry: str = "A") -> None:
        """Start `workflow_id` through `ENTRY:build` (as the alias would route it)."""
        body = to_event(new_workflow(input_value, workflow_id).to_wire(), store=None)
        assert self.client.invoke(FunctionName=f"{entry}:{build}", InvocationType="Event",
                                  Payload=body)["StatusCode"] == 202

    def outcome(self, workflow_id: str, *, timeout: float = 30.0) -> RunResult:
        """The workflow's outcome once it has a result or a failure (bounded wait)."""
        store = open_store(self.store_url)
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                outcome = read_outcome(store, workflow_id)
                if outcome.results or outcome.failure:
                    return outcome
                time.sleep(0.05)
            raise AssertionError(f"{workflow_id}: no outcome within {timeout} s")
        finally:
            store.close()

    def close(self) -> None:
        for server in self.servers:
            server.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "UNUM_INVOKER"}
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env)


def _wait_for(path: Path, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path}: not written within {timeout} s")


@pytest.fixture
def builds(moto_server: Any):
    store_url = f"dynamodb://unum-pin-{uuid.uuid4().hex[:10]}?endpoint={moto_server.endpoint}&region=us-east-1"
    open_store(store_url + "&create=1").close()
    with AsyncInvokeEndpoint(retry=LambdaRetry(delays=(0.05,), request_timeout=30)) as endpoint:
        found = Builds(endpoint, store_url)
        try:
            yield found
        finally:
            found.close()


def test_callback_from_the_cli_continues_on_the_started_build(builds: Builds, tmp_path: Path) -> None:
    builds.publish(_approval(tmp_path / "one", "one"), "vone")
    (tmp_path / "waiting").mkdir()
    builds.start("vone", "wf-cb", {"folder": str(tmp_path / "waiting")})
    callback_id = _wait_for(tmp_path / "waiting" / "callback-id")
    assert builds.endpoint.wait_idle(20)
    builds.publish(_approval(tmp_path / "two", "two"), "vtwo")  # $LATEST is build two now

    done = _cli("callback-success", callback_id, "--result", '"yes"', "--store", builds.store_url,
                "--invoker", builds.url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"workflow": "wf-cb", "resumed": "A"}
    outcome = builds.outcome("wf-cb")
    assert outcome.failure is None, outcome.failure
    assert outcome.results[0] == {"approved": '"yes"', "build": "one"}  # `$LATEST` would answer "two"


def test_redrive_from_the_cli_continues_on_the_started_build(builds: Builds, tmp_path: Path) -> None:
    builds.publish(_flaky(tmp_path / "one", "one"), "vone")
    fixed = tmp_path / "fixed"
    builds.start("vone", "wf-rd", {"fixed": str(fixed)})
    failed = builds.outcome("wf-rd")
    assert failed.failure is not None and "transient" in failed.failure["Cause"], failed.failure
    store = open_store(builds.store_url)
    try:
        assert read_build(store, "wf-rd") == "vone"  # recorded by build one's entry at the start
    finally:
        store.close()
    assert builds.endpoint.wait_idle(20)
    builds.publish(_flaky(tmp_path / "two", "two"), "vtwo")  # $LATEST is build two now
    fixed.write_text("ok")

    done = _cli("redrive", "wf-rd", "--store", builds.store_url, "--invoker", builds.url)
    assert done.returncode == 0, done.stderr
    sent = json.loads(done.stdout)
    assert (sent["workflow"], sent["redrive"], sent["resumed"]) == ("wf-rd", 1, "B"), sent
    outcome = builds.outcome("wf-rd")
    assert outcome.failure is None, outcome.failure
    assert outcome.results[0] == "one"  # `$LATEST` would answer "two"

    again = _cli("redrive", "wf-rd", "--store", builds.store_url, "--invoker", builds.url)
    assert again.returncode == 2 and "did not fail" in again.stderr and "Traceback" not in again.stderr


def _machine(folder: Path, queue: str, build: str) -> Path:
    """A compiled state machine: a Task sends its token through SQS and waits; then a Pass
    names the build."""
    machine = {"StartAt": "Approve", "States": {
        "Approve": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                    "Parameters": {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token"}},
                    "ResultPath": "$.approval", "Next": "Ship"},
        "Ship": {"Type": "Pass", "Parameters": {"ok.$": "$.approval.ok", "build": build}, "End": True}}}
    folder.mkdir(parents=True)
    (folder / "statemachine.json").write_text(json.dumps(machine))
    compiled = _cli("compile", str(folder / "statemachine.json"), "--out", str(folder / "wf"))
    assert compiled.returncode == 0, compiled.stderr
    return folder / "wf"


def test_task_success_from_the_cli_continues_on_the_started_build(builds: Builds, moto_server: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3  # type: ignore[import-untyped]

    for name, value in {"AWS_ENDPOINT_URL_SQS": moto_server.endpoint, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)  # the in-process functions' SQS client
    sqs = boto3.client("sqs", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    queue = sqs.create_queue(QueueName=f"approvals-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    one, two = _machine(tmp_path / "one", queue, "one"), _machine(tmp_path / "two", queue, "two")
    builds.publish(one, "vone")
    builds.start("vone", "wf-task", {}, entry=load_workflow(one).entry)
    messages: list[Any] = []
    deadline = time.monotonic() + 30
    while not messages and time.monotonic() < deadline:
        messages = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1).get("Messages", [])
    assert messages, "no task token within 30 s"
    token = json.loads(messages[0]["Body"])["token"]
    assert builds.endpoint.wait_idle(20)
    builds.publish(two, "vtwo")  # $LATEST is build two now

    done = _cli("task-success", token, "--output", '{"ok": "yes"}', "--store", builds.store_url,
                "--invoker", builds.url)
    assert done.returncode == 0, done.stderr
    outcome = builds.outcome("wf-task")
    assert outcome.failure is None, outcome.failure
    assert outcome.results[0] == {"ok": "yes", "build": "one"}  # `$LATEST` would answer "two"


FLAKY_TASK = '''import os
def handler(event, context):
    if not os.path.exists(event["fixed"]):
        raise RuntimeError("a transient fault of build " + BUILD)
    return {"checked": BUILD}
'''


def _api_machine(folder: Path, queue: str, build: str) -> Path:
    """A state machine of the `--api` function: wait for a task token (SQS), run a Lambda Task
    that fails until a file exists, then a Pass naming the build."""
    from builder.compiler import compile_state_machine

    (folder / "functions" / "Check").mkdir(parents=True)
    (folder / "functions" / "Check" / "app.py").write_text(FLAKY_TASK.replace("BUILD", repr(build)))
    machine = {"StartAt": "Approve", "States": {
        "Approve": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                    "Parameters": {"QueueUrl": queue, "MessageBody": {"token.$": "$$.Task.Token"}},
                    "ResultPath": "$.approval", "Next": "Check"},
        "Check": {"Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Check",
                  "ResultPath": "$.check", "Next": "Ship"},
        "Ship": {"Type": "Pass", "Parameters": {"checked.$": "$.check.checked", "build": build}, "End": True}}}
    (folder / "statemachine.json").write_text(json.dumps(machine))
    compile_state_machine(folder / "statemachine.json", folder / "wf", functions=folder / "functions")
    return folder / "wf"


def test_the_api_functions_send_task_success_and_redrive_continue_on_the_started_build(
        builds: Builds, moto_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The `--api` function (StatesApi over CloudEngine, as builder.serve.cloud_entry wires it,
    its invoker naming no build): SendTaskSuccess, then RedriveExecution after the Task failed,
    both after build two is published, end on build one's code."""
    import boto3

    from builder.serve.arns import Arns
    from builder.serve.cloud_engine import CloudEngine
    from builder.serve.lambda_entry import answer
    from builder.serve.states_api import StatesApi
    from builder.serve.store_registry import StoreRegistry
    from unum_entry.invokers import open_invoker

    for name, value in {"AWS_ENDPOINT_URL_SQS": moto_server.endpoint, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    sqs = boto3.client("sqs", endpoint_url=moto_server.endpoint, region_name="us-east-1")
    queue = sqs.create_queue(QueueName=f"api-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    one, two = _api_machine(tmp_path / "one", queue, "one"), _api_machine(tmp_path / "two", queue, "two")
    builds.publish(one, "vone")

    store = open_store(builds.store_url)
    try:
        workflow = load_workflow(one)
        engine = CloudEngine(store, workflow, open_invoker(builds.url, store=store))
        states = StatesApi(StoreRegistry(store, on_repeat=engine.restart), engine, store, Arns())  # type: ignore[arg-type]

        def call(operation: str, **body: Any) -> dict[str, Any]:
            event = {"version": "2.0", "headers": {"x-amz-target": f"AWSStepFunctions.{operation}",
                                                   "content-type": "application/x-amz-json-1.0"},
                     "requestContext": {"http": {"method": "POST"}}, "body": json.dumps(body),
                     "isBase64Encoded": False}
            response = answer(event, states)
            assert response["statusCode"] == 200, response["body"]
            return json.loads(response["body"])

        def ended(arn: str) -> dict[str, Any]:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                described = call("DescribeExecution", executionArn=arn)
                if described["status"] != "RUNNING":
                    return described
                time.sleep(0.1)
            raise AssertionError(f"{arn}: still running after 30 s")

        machine = call("CreateStateMachine", name="orders", roleArn="arn:aws:iam::123456789012:role/unum",
                       definition=(tmp_path / "one" / "statemachine.json").read_text())["stateMachineArn"]
        fixed = tmp_path / "fixed"
        arn = call("StartExecution", stateMachineArn=machine, name="o1",
                   input=json.dumps({"fixed": str(fixed)}))["executionArn"]
        messages: list[Any] = []
        deadline = time.monotonic() + 30
        while not messages and time.monotonic() < deadline:
            messages = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1).get("Messages", [])
        assert messages, "no task token within 30 s"
        assert builds.endpoint.wait_idle(20)
        builds.publish(two, "vtwo")  # $LATEST is build two now

        call("SendTaskSuccess", taskToken=json.loads(messages[0]["Body"])["token"], output='{"ok": true}')
        failed = ended(arn)
        assert failed["status"] == "FAILED" and "fault of build one" in failed.get("cause", ""), failed  # not 'two'
        fixed.write_text("ok")
        assert builds.endpoint.wait_idle(20)
        call("RedriveExecution", executionArn=arn)
        done = ended(arn)
        assert done["status"] == "SUCCEEDED", done
        assert json.loads(done["output"]) == {"checked": "one", "build": "one"}  # `$LATEST` would say "two"
    finally:
        store.close()


def test_redrive_with_a_bad_invoker_or_an_unknown_workflow_is_one_line(tmp_path: Path) -> None:
    store_url = f"sqlite://{tmp_path / 'unum.db'}"
    open_store(store_url).close()
    for invoker, said in (("lambda://?bogus=1", "unknown option 'bogus'"), ("lambda://?region=us-east-1", "no workflow")):
        done = _cli("redrive", "wf-x", "--store", store_url, "--invoker", invoker)
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
