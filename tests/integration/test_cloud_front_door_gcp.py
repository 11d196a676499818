"""The cloud front door on Google Cloud's emulators (issue 43): StatesApi on the store-backed
registry (builder.serve.store_registry) over the Firestore emulator and the invoker-backed engine
(builder.serve.cloud_engine) with the Pub/Sub invoker, reached through the function URL
translation (builder.serve.lambda_entry.answer). The deployed functions run as Cloud Run runs
them (`python -m unum_entry` under functions-framework on loopback ports, HostFunctions), pushed
to by the Pub/Sub emulator; the Wait state's durable timer goes through the Cloud Tasks emulator.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builder.compiler import compile_state_machine
from builder.local_stack.gcp import HostFunctions
from builder.serve.arns import Arns
from builder.serve.cloud_engine import CloudEngine
from tests.support.entry_calls import MACHINE, ROLE, Api
from builder.serve.registry import Machine
from builder.serve.states_api import StatesApi
from builder.serve.store_registry import StoreRegistry
from unum_entry.invokers import open_invoker
from unum_entry.stores.firestore import FirestoreStore
from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.integration

JSON_10 = "application/x-amz-json-1.0"

def _until(condition: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s")


@pytest.fixture
def gcp_deployment(tmp_path: Path, firestore_emulator: Any, pubsub_emulator: Any,
                   cloud_tasks_emulator: Any) -> Iterator[dict[str, Any]]:
    """The front door's machine deployed on the emulators: its folder, store, URLs and functions."""
    folder = tmp_path / "workflow"
    compile_state_machine(MACHINE / "statemachine.json", folder, functions=MACHINE / "functions")
    workflow = load_workflow(folder)
    tag = uuid.uuid4().hex[:8]
    prefix = f"unum-fd{tag}-"
    queue = f"projects/{pubsub_emulator.project}/locations/local/queues/{prefix}timers"
    cloud_tasks_emulator.create_queue(queue)
    store_url = f"firestore://unum-fd-{tag}?project={firestore_emulator.project}"
    invoker_url = f"pubsub://{pubsub_emulator.project}?prefix={prefix}&tasks_queue={queue}"
    env = {**firestore_emulator.env(), **pubsub_emulator.env(), **cloud_tasks_emulator.env()}
    store = FirestoreStore.from_url(store_url)
    try:
        with HostFunctions(workflow, store_url=store_url, invoker_url=invoker_url, emulators=env,
                           extra_env={"UNUM_RETRY_BASE_DELAY": "0.05"}) as functions:
            pubsub_emulator.wire_push(functions.urls, prefix=prefix)
            yield {"folder": folder, "workflow": workflow, "store": store, "store_url": store_url,
                   "invoker_url": invoker_url, "env": env, "functions": functions}
    finally:
        store.close()


@pytest.fixture
def api(gcp_deployment: dict[str, Any]) -> Api:
    store = gcp_deployment["store"]
    invoker = open_invoker(gcp_deployment["invoker_url"], store=store)
    engine = CloudEngine(store, gcp_deployment["workflow"], invoker)
    registry = StoreRegistry(store, on_repeat=engine.restart)  # as builder.serve.cloud_entry wires it
    return Api(StatesApi(registry, engine, store, Arns()))  # type: ignore[arg-type]


def test_create_start_describe_history_stop_list_on_firestore(api: Api, gcp_deployment: dict[str, Any]) -> None:
    definition = (MACHINE / "statemachine.json").read_text()
    created = api.ok("CreateStateMachine", name="greeter", definition=definition, roleArn=ROLE)
    again = api.ok("CreateStateMachine", name="greeter", definition=definition, roleArn=ROLE)
    assert again["creationDate"] == created["creationDate"]  # idempotent, as on AWS
    arn = created["stateMachineArn"]

    started = api.ok("StartExecution", stateMachineArn=arn, name="one", input=json.dumps({"name": "gcp"}))
    try:
        described = _until(lambda: (d := api.ok("DescribeExecution", executionArn=started["executionArn"]))
                           ["status"] != "RUNNING" and d)
    except AssertionError:
        raise AssertionError(gcp_deployment["functions"].logs()) from None
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"greeting": "hello gcp", "wait": False}
    kinds = [e["type"] for e in api.ok("GetExecutionHistory", executionArn=started["executionArn"])["events"]]
    assert kinds[0] == "ExecutionStarted" and kinds[-1] == "ExecutionSucceeded", kinds
    assert "LambdaFunctionSucceeded" in kinds

    held = api.ok("StartExecution", stateMachineArn=arn, name="two", input=json.dumps({"wait": True}))
    _until(lambda: any(e["type"] == "WaitStateEntered" for e in
                       api.ok("GetExecutionHistory", executionArn=held["executionArn"])["events"]))
    assert api.ok("DescribeExecution", executionArn=held["executionArn"])["status"] == "RUNNING"
    api.ok("StopExecution", executionArn=held["executionArn"], error="Halt", cause="test")
    stopped = api.ok("DescribeExecution", executionArn=held["executionArn"])
    assert (stopped["status"], stopped["error"]) == ("ABORTED", "Halt")
    listed = api.ok("ListExecutions", stateMachineArn=arn)["executions"]
    assert [(e["name"], e["status"]) for e in listed] == [("two", "ABORTED"), ("one", "SUCCEEDED")]
    assert [m["name"] for m in api.ok("ListStateMachines")["stateMachines"]] == ["greeter"]
    status, body = api("CreateStateMachine", name="other", roleArn=ROLE,
                       definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))
    assert status == 400 and body["__type"].endswith("InvalidDefinition"), body


@pytest.fixture
def firestore_store(firestore_emulator: Any) -> Iterator[FirestoreStore]:
    store = FirestoreStore.from_url(f"firestore://unum-fd-{uuid.uuid4().hex[:12]}?project={firestore_emulator.project}")
    try:
        yield store
    finally:
        store.close()


def test_registry_races_on_firestore_have_one_winner(firestore_store: FirestoreStore, race: Any) -> None:
    """Six racing CreateStateMachine of one name on Firestore: one creates, the others get it back;
    a delete and create again lists the machine once."""
    registry = StoreRegistry(firestore_store)
    winners = race(6, lambda i: registry.add_machine(Machine("m", f"{{}}{i}", ROLE, "STANDARD", 1.0, 1.0, "r1")))
    assert winners.count(None) == 1, winners
    won = registry.machine("m")
    assert won is not None and all(w is None or w == won for w in winners)
    assert registry.delete_machine("m") and registry.machine("m") is None and registry.machines() == []
    again = Machine("m", "{}", ROLE, "STANDARD", 2.0, 2.0, "r2")
    assert registry.add_machine(again) is None
    assert registry.machines() == [again]
    assert registry.add_activity("act", 6.0) == 6.0 and registry.activities() == [("act", 6.0)]


@pytest.fixture
def cloud_run_api(gcp_deployment: dict[str, Any], tmp_path: Path) -> Iterator[str]:
    """`python -m builder.serve.cloud_run_entry` on a free loopback port, as Cloud Run runs the
    API service (the deploy's environment plus the emulators'): its URL."""
    import os
    import subprocess
    import sys
    import urllib.request

    from builder.local_stack.process import free_port

    port = free_port()
    env = {**os.environ, **gcp_deployment["env"], "UNUM_STORE": gcp_deployment["store_url"],
           "UNUM_INVOKER": gcp_deployment["invoker_url"], "UNUM_WORKFLOW_DIR": str(gcp_deployment["folder"]),
           "HOST": "127.0.0.1", "PORT": str(port), "WORKERS": "1", "THREADS": "4"}
    log = (tmp_path / "api.log").open("wb")
    process = subprocess.Popen([sys.executable, "-m", "builder.serve.cloud_run_entry"], env=env,
                               stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).parents[2])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(urllib.request.Request(url, data=b"{}", method="POST"), timeout=2)
            except urllib.error.HTTPError:
                break  # it answered (an AWS error: no X-Amz-Target)
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((tmp_path / "api.log").read_text()) from None
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


def test_boto3_stepfunctions_drives_the_cloud_run_entry_over_http(cloud_run_api: str) -> None:
    """boto3's own stepfunctions client, pointed at the Cloud Run entry (any credentials: the
    service is behind Cloud Run's IAM, not SigV4), creates, starts, describes and lists."""
    import boto3
    import botocore.exceptions

    sfn = boto3.client("stepfunctions", endpoint_url=cloud_run_api, region_name="us-east-1",
                       aws_access_key_id="x", aws_secret_access_key="x")
    definition = (MACHINE / "statemachine.json").read_text()
    arn = sfn.create_state_machine(name="greeter", definition=definition, roleArn=ROLE)["stateMachineArn"]
    assert sfn.create_state_machine(name="greeter", definition=definition, roleArn=ROLE)["stateMachineArn"] == arn
    execution = sfn.start_execution(stateMachineArn=arn, name="http", input=json.dumps({"name": "run"}))["executionArn"]
    described = _until(lambda: (d := sfn.describe_execution(executionArn=execution))["status"] != "RUNNING" and d)
    assert described["status"] == "SUCCEEDED" and json.loads(described["output"])["greeting"] == "hello run"
    events = sfn.get_execution_history(executionArn=execution)["events"]
    assert events[0]["type"] == "ExecutionStarted" and events[-1]["type"] == "ExecutionSucceeded"
    assert [e["name"] for e in sfn.list_executions(stateMachineArn=arn)["executions"]] == ["http"]
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        sfn.describe_execution(executionArn="arn:aws:states:us-east-1:123456789012:execution:greeter:nope")
    assert refused.value.response["Error"]["Code"] == "ExecutionDoesNotExist"


def test_the_cloud_run_entry_refuses_bad_requests_in_aws_shape(cloud_run_api: str) -> None:
    import urllib.error
    import urllib.request

    def post(body: bytes, target: str) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(cloud_run_api, data=body, method="POST",
                                         headers={"X-Amz-Target": target, "Content-Type": JSON_10})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    status, body = post(b"{not json", "AWSStepFunctions.ListStateMachines")
    assert status == 400 and body["__type"].endswith("SerializationException"), body
    status, body = post(b"{}", "AWSStepFunctions.NoSuchOperation")
    assert status == 400 and "UnknownOperation" in body["__type"], body
    status, body = post(b"x" * (2 << 20), "AWSStepFunctions.ListStateMachines")
    assert status == 413, body


def test_the_cloud_run_entry_refuses_a_bad_configuration_in_one_line(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("UNUM_")}
    done = subprocess.run([sys.executable, "-m", "builder.serve.cloud_run_entry"], env=env, capture_output=True,
                          text=True, timeout=60, cwd=Path(__file__).parents[2])
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "UNUM_STORE is not set" in done.stderr
    done = subprocess.run([sys.executable, "-m", "builder.serve.cloud_run_entry"], capture_output=True, text=True,
                          env={**env, "UNUM_STORE": "memory://", "UNUM_INVOKER": "local://",
                               "UNUM_WORKFLOW_DIR": str(tmp_path / "absent")}, timeout=60, cwd=Path(__file__).parents[2])
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0 and "cannot start" in done.stderr, done.stderr
