"""Step Functions Local's mocked service integrations through `serve`, as Step Functions Local
users write their suites: a MockConfigFile.json, a state machine created with boto3, and
StartExecution on `...:stateMachine:Orders#TestCase` (builder/serve/mocks.py,
unum_entry/asl/mocked.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.serve import ROLE, client, serving, wait_ended

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:"
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:Orders"

# Validate (lambda:invoke, Retry on throttling, Catch all) -> Save (dynamodb:putItem) -> Ship (a
# Map over the items, one at a time, whose iterator is the Pack Lambda). Only Pack has code.
DEFINITION = {
    "StartAt": "Validate",
    "States": {
        "Validate": {
            "Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": LAMBDA + "Validate", "Payload.$": "$"},
            "ResultSelector": {"valid.$": "$.Payload.valid"}, "ResultPath": "$.validation",
            "Retry": [{"ErrorEquals": ["Lambda.TooManyRequestsException"], "IntervalSeconds": 1, "MaxAttempts": 2}],
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Rejected"}],
            "Next": "Save"},
        "Save": {
            "Type": "Task", "Resource": "arn:aws:states:::dynamodb:putItem",
            "Parameters": {"TableName": "Orders", "Item": {"id": {"S.$": "$.id"}}},
            "ResultSelector": {"status.$": "$.SdkHttpMetadata.HttpStatusCode"}, "ResultPath": "$.saved",
            "Next": "Ship"},
        "Ship": {
            "Type": "Map", "ItemsPath": "$.items", "MaxConcurrency": 1, "ResultPath": "$.packed",
            "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "Pack", "States": {
                "Pack": {"Type": "Task", "Resource": LAMBDA + "Pack", "End": True}}},
            "End": True},
        "Rejected": {"Type": "Pass", "Result": "rejected", "ResultPath": "$.status", "End": True},
    },
}

# A callback Task, then polling: describeInstances until the instance runs (a loop back to the Task).
POLL = {
    "StartAt": "Approve",
    "States": {
        "Approve": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                    "Parameters": {"QueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/approvals",
                                   "MessageBody": {"token.$": "$$.Task.Token"}},
                    "ResultPath": "$.approval", "Next": "Describe"},
        "Describe": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:ec2:describeInstances",
                     "Parameters": {"InstanceIds": ["i-1"]},
                     "ResultSelector": {"state.$": "$.Reservations[0].Instances[0].State.Name"},
                     "ResultPath": "$.instance", "Next": "Running?"},
        "Running?": {"Type": "Choice", "Choices": [
            {"Variable": "$.instance.state", "StringEquals": "running", "Next": "Done"}], "Default": "Later"},
        "Later": {"Type": "Wait", "Seconds": 1, "Next": "Describe"},
        "Done": {"Type": "Succeed"},
    },
}


def _instance(state: str) -> dict[str, Any]:
    return {"Return": {"Reservations": [{"Instances": [{"State": {"Name": state}}]}]}}


MOCK_CONFIG = {
    "StateMachines": {"Poll": {"TestCases": {"Starting": {"Approve": "Approved", "Describe": "PendingTwice"}}},
                      "Orders": {"TestCases": {
        "HappyPath": {"Validate": "ValidOrder", "Save": "Saved", "Pack": "SmallBox"},
        "RetryPath": {"Validate": "ThrottledThenValid", "Save": "Saved", "Pack": "SmallBox"},
        "CatchPath": {"Validate": "InvalidOrder"},
        "MapPath": {"Validate": "ValidOrder", "Save": "Saved", "Pack": "SmallThenLarge"},
        "MapFailurePath": {"Validate": "ValidOrder", "Save": "Saved", "Pack": "SecondItemFails"},
        "HybridPath": {"Validate": "ValidOrder", "Save": "Saved"},
        "NoMoreResponses": {"Validate": "ThrottledOnce"},
    }}},
    "MockedResponses": {
        "ValidOrder": {"0": {"Return": {"StatusCode": 200, "Payload": {"valid": True}}}},
        "ThrottledThenValid": {
            "0": {"Throw": {"Error": "Lambda.TooManyRequestsException", "Cause": "Rate exceeded."}},
            "1": {"Return": {"StatusCode": 200, "Payload": {"valid": True}}}},
        "ThrottledOnce": {"0": {"Throw": {"Error": "Lambda.TooManyRequestsException", "Cause": "Rate exceeded."}}},
        "InvalidOrder": {"0-2": {"Throw": {"Error": "OrderInvalid", "Cause": "no such customer"}}},
        "Saved": {"0": {"Return": {"SdkHttpMetadata": {"HttpStatusCode": 200}, "SdkResponseMetadata": {}}}},
        "SmallBox": {"0-9": {"Return": {"box": "small"}}},
        "SmallThenLarge": {"0": {"Return": {"box": "small"}}, "1-9": {"Return": {"box": "large"}}},
        "SecondItemFails": {"0": {"Return": {"box": "small"}},
                            "1-3": {"Throw": {"Error": "Pack.OutOfBoxes", "Cause": "none left"}}},
        "Approved": {"0": {"Return": {"approved": True}}},
        "PendingTwice": {"0-1": _instance("pending"), "2": _instance("running")},
    },
}
ORDER = {"id": "o-1", "items": ["book", "lamp"]}


@pytest.fixture
def sfn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("UNUM_ASL_TIME_SCALE", "0.01")  # the Retry's 1 s back-off
    functions = tmp_path / "functions"
    (functions / "Pack").mkdir(parents=True)
    (functions / "Pack" / "app.py").write_text("def handler(event, context):\n    return {'packed': event}\n")
    config = tmp_path / "MockConfigFile.json"
    config.write_text(json.dumps(MOCK_CONFIG))
    with serving(tmp_path, functions=functions, mock_config=str(config)) as server:
        api = client(server.url)
        api.create_state_machine(name="Orders", definition=json.dumps(DEFINITION), roleArn=ROLE)
        yield api


def run(sfn: Any, test_case: str, name: str) -> dict[str, Any]:
    started = sfn.start_execution(stateMachineArn=f"{MACHINE}#{test_case}", name=name, input=json.dumps(ORDER))
    return wait_ended(sfn, started["executionArn"], timeout=60)


def output(described: dict[str, Any]) -> Any:
    assert described["status"] == "SUCCEEDED", described
    return json.loads(described["output"])


def test_happy_path_returns_the_mocked_responses_without_any_code(sfn: Any) -> None:
    assert output(run(sfn, "HappyPath", "happy")) == {
        **ORDER, "validation": {"valid": True}, "saved": {"status": 200},
        "packed": [{"box": "small"}, {"box": "small"}]}


def test_retry_path_throws_first_then_returns_on_the_retry(sfn: Any) -> None:
    described = run(sfn, "RetryPath", "retry")
    assert output(described)["validation"] == {"valid": True}
    history = sfn.get_execution_history(executionArn=described["executionArn"])["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if e["type"] == "TaskStateEntered"]
    assert entered[:2] == ["Validate", "Save"]  # mocked Tasks keep their Task events


def test_catch_path_catches_the_thrown_error(sfn: Any) -> None:
    out = output(run(sfn, "CatchPath", "catch"))
    assert out["status"] == "rejected"
    assert out["error"] == {"Error": "OrderInvalid", "Cause": "no such customer"}


def test_map_iterations_take_the_next_invocation_numbers(sfn: Any) -> None:
    assert output(run(sfn, "MapPath", "map"))["packed"] == [{"box": "small"}, {"box": "large"}]
    failed = run(sfn, "MapFailurePath", "map-fails")
    assert (failed["status"], failed["error"], failed["cause"]) == ("FAILED", "Pack.OutOfBoxes", "none left")


def test_states_the_test_case_does_not_name_run_their_code(sfn: Any) -> None:
    assert output(run(sfn, "HybridPath", "hybrid"))["packed"] == [{"packed": "book"}, {"packed": "lamp"}]


def test_an_invocation_without_a_response_fails_the_execution(sfn: Any) -> None:
    failed = run(sfn, "NoMoreResponses", "exhausted")
    assert failed["status"] == "FAILED" and failed["error"] == "States.Runtime", failed
    assert "invocation 1" in failed["cause"] and "ThrottledOnce" in failed["cause"]


def test_a_loop_back_to_a_mocked_task_takes_the_next_invocation_number(sfn: Any) -> None:
    sfn.create_state_machine(name="Poll", definition=json.dumps(POLL), roleArn=ROLE)
    started = sfn.start_execution(stateMachineArn=MACHINE.replace("Orders", "Poll#Starting"), input="{}")
    described = wait_ended(sfn, started["executionArn"], timeout=60)
    # the callback Task got a token made up for it and completed with its mocked Return
    assert output(described) == {"approval": {"approved": True}, "instance": {"state": "running"}}
    history = sfn.get_execution_history(executionArn=started["executionArn"])["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in history if e["type"] == "TaskStateEntered"]
    assert entered.count("Describe") == 3


def test_unknown_test_cases_and_machines_are_validation_errors(sfn: Any) -> None:
    for arn in (f"{MACHINE}#NoSuchCase", "arn:aws:states:us-east-1:123456789012:stateMachine:Other#HappyPath"):
        if arn.endswith("Other#HappyPath"):
            sfn.create_state_machine(name="Other", definition=json.dumps(
                {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}), roleArn=ROLE)
        with pytest.raises(ClientError) as caught:
            sfn.start_execution(stateMachineArn=arn, input="{}")
        error = caught.value.response["Error"]
        assert error["Code"] == "ValidationException"
        assert "\n" not in error["Message"] and "MockConfigFile.json" in error["Message"]


def test_without_a_test_case_a_mocked_task_without_code_cannot_run(sfn: Any) -> None:
    with pytest.raises(ClientError) as caught:
        sfn.start_execution(stateMachineArn=MACHINE, input=json.dumps(ORDER))
    assert caught.value.response["Error"]["Code"] == "InvalidDefinition"
    assert "no code for Lambda function 'Validate'" in caught.value.response["Error"]["Message"]


def _serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", "serve", "--port", "0", "--store", str(tmp_path / "u.db"),
                           "--state-dir", str(tmp_path / "serve"), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("bad, where", [
    ({"MockedResponses": {"R": {"2-1": {"Return": {}}}}}, '$.MockedResponses.R["2-1"]: the range ends (1)'),
    ({"StateMachines": {"Orders": {"TestCases": {"T": {"Validate": "Missing"}}}}, "MockedResponses": {}},
     "$.StateMachines.Orders.TestCases.T.Validate: names the mocked response 'Missing'"),
    ({"MockedResponses": {"R": {"0": {"Throw": {"Cause": "x"}}}}}, '$.MockedResponses.R["0"].Throw: expected'),
])
def test_a_bad_mock_file_stops_serve_before_it_listens(tmp_path: Path, bad: Any, where: str) -> None:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps(bad))
    for done in (_serve(tmp_path, "--mock-config", str(config)), _serve(tmp_path, env={"SFN_MOCK_CONFIG": str(config)})):
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and str(config) in lines[0] and where in lines[0], done.stderr
        assert "serving" not in done.stderr
