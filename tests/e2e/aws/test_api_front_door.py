"""The cloud front door end to end (issue 43): the API image (`python -m builder build FOLDER
--api`) running as a Lambda container under the RIE behind the local Invoke endpoint, over
moto's DynamoDB table that the workflow's function containers use, reached through a local
function URL with AWS_IAM's signing rule (builder.local_stack.function_url). boto3's own
`stepfunctions` client drives it: create-state-machine, start-execution, describe until
SUCCEEDED, get-execution-history, stop of a second, held execution.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]
MACHINE = REPO / "tests" / "support" / "front_door"
ROLE = "arn:aws:iam::123456789012:role/unum"


def sign_as_lambda(client: Any) -> Any:
    """A function URL with AWS_IAM auth takes SigV4 for the service `lambda` (docs/api.md)."""
    client.meta.events.register("before-sign.sfn.*", lambda request, **_: request.context.setdefault(
        "signing", {}).update(signing_name="lambda"))
    return client


def _until(what: str, condition: Callable[[], Any], timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s")


@pytest.fixture(scope="module")
def front_door(tmp_path_factory: pytest.TempPathFactory, lambda_stack: Any, base_tag: str) -> Iterator[str]:
    from builder.local_stack.function_url import FunctionUrl
    from builder.local_stack.lambda_containers import lambda_container_config
    from tests.e2e.aws.conftest import LambdaFunctionContainer
    from tests.e2e.conftest import E2E_TAG_PREFIX
    from unum_entry.invokers.aws_lambda import build_client

    folder = tmp_path_factory.mktemp("front-door") / "front_door"
    subprocess.run([sys.executable, "-m", "builder", "compile", str(MACHINE / "statemachine.json"), "--out",
                    str(folder)], cwd=REPO, check=True, capture_output=True, timeout=120)
    built = subprocess.run([sys.executable, "-m", "builder", "build", str(folder), "--api", "--json",
                            "--no-base-rebuild", "--base-tag", base_tag, "--tag-prefix", E2E_TAG_PREFIX],
                           cwd=REPO, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr
    api_tag = next(image["tag"] for image in json.loads(built.stdout) if image["function"] == "unum-api")
    stack = lambda_stack(folder)
    config = lambda_container_config(api_tag, function_name="unum-api", environment=stack.environment)
    entrypoint = [*config.entrypoint[:-3], "python3", "-m", "builder.serve.cloud_entry"]  # the image's own
    container = LambdaFunctionContainer(dataclasses.replace(config, entrypoint=entrypoint)).start()
    try:
        stack.endpoint.register("unum-api", config.ports.invoke_url)
        with FunctionUrl(build_client(endpoint=stack.endpoint.endpoint, region="us-east-1"), "unum-api") as url:
            yield url.url
    finally:
        container.stop()


def _client(url: str, *, signed_for_lambda: bool = True) -> Any:
    import boto3
    from botocore.config import Config

    client = boto3.client("stepfunctions", endpoint_url=url, region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test",
                          config=Config(retries={"max_attempts": 1}, read_timeout=60, connect_timeout=5))
    return sign_as_lambda(client) if signed_for_lambda else client


def test_boto3_stepfunctions_through_the_function_url(front_door: str) -> None:
    sfn = _client(front_door)
    definition = (MACHINE / "statemachine.json").read_text()
    arn = sfn.create_state_machine(name="greeter", definition=definition, roleArn=ROLE)["stateMachineArn"]
    assert arn == "arn:aws:states:us-east-1:123456789012:stateMachine:greeter"

    started = sfn.start_execution(stateMachineArn=arn, name="one", input=json.dumps({"name": "lambda"}))
    described = _until("SUCCEEDED", lambda: (d := sfn.describe_execution(executionArn=started["executionArn"]))
                       ["status"] != "RUNNING" and d)
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"greeting": "hello lambda", "wait": False}
    events = sfn.get_execution_history(executionArn=started["executionArn"])["events"]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "ExecutionStarted" and kinds[-1] == "ExecutionSucceeded", kinds
    assert "LambdaFunctionSucceeded" in kinds

    held = sfn.start_execution(stateMachineArn=arn, name="two", input=json.dumps({"wait": True}))
    _until("the Wait state", lambda: any(e["type"] == "WaitStateEntered" for e in
                                         sfn.get_execution_history(executionArn=held["executionArn"])["events"]))
    assert sfn.describe_execution(executionArn=held["executionArn"])["status"] == "RUNNING"
    sfn.stop_execution(executionArn=held["executionArn"], error="Halt", cause="e2e")
    stopped = sfn.describe_execution(executionArn=held["executionArn"])
    assert (stopped["status"], stopped["error"], stopped["cause"]) == ("ABORTED", "Halt", "e2e")
    listed = sfn.list_executions(stateMachineArn=arn)["executions"]
    assert [(e["name"], e["status"]) for e in listed] == [("two", "ABORTED"), ("one", "SUCCEEDED")]


def test_the_docs_client_code_as_written(front_door: str) -> None:
    """docs/api.md's "In the cloud" client code, the stack's ApiUrl output being the local URL."""
    from tests.integration.test_docs_api_cloud import client_code

    definition = (MACHINE / "statemachine.json").read_text()
    # order-independent: the machine exists whichever test ran first (a create of the same
    # definition is idempotent, as on AWS)
    _client(front_door).create_state_machine(name="greeter", definition=definition, roleArn=ROLE)
    code = client_code().replace("<ApiUrl output>", front_door)
    # a client as a user's process has it: no AWS_* setting another test of this worker left behind
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**clean, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['greeter']"


def test_a_request_not_signed_for_lambda_is_refused(front_door: str) -> None:
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as refused:
        _client(front_door, signed_for_lambda=False).list_state_machines()
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
