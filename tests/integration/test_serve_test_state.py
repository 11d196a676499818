"""TestState through boto3 against `serve`: one state's data flow step by step, its Task called
for real or mocked, and the statuses a Retry and a Catch give (SUCCEEDED, RETRIABLE,
CAUGHT_ERROR, FAILED)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.serve import ROLE, client, serving

pytestmark = pytest.mark.integration

TASK = {"Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Inc",
        "Parameters": {"n.$": "$.x"}, "ResultSelector": {"m.$": "$.n"}, "ResultPath": "$.r", "Next": "After",
        "Retry": [{"ErrorEquals": ["ValueError"], "MaxAttempts": 1}],
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Recover"}]}


@pytest.fixture
def sfn(tmp_path: Path) -> Iterator[Any]:
    code = tmp_path / "functions" / "Inc"
    code.mkdir(parents=True)
    (code / "app.py").write_text("def handler(event, context):\n    if event.get('boom'):\n"
                                 "        raise ValueError('no')\n    return {'n': event['n'] + 1}\n")
    with serving(tmp_path, functions=tmp_path / "functions") as server:
        # TestState, like StartSyncExecution, goes to the `sync-` host prefix: off against 127.0.0.1
        yield client(server.url, inject_host_prefix=False)


def run(sfn: Any, state: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    answer: dict[str, Any] = sfn.test_state(definition=json.dumps(state), roleArn=ROLE, **kwargs)
    return answer


def test_a_task_runs_its_lambda_and_shows_each_data_flow_step(sfn: Any) -> None:
    answer = run(sfn, TASK, input='{"x": 1}', inspectionLevel="DEBUG")
    assert (answer["status"], json.loads(answer["output"]), answer["nextState"]) == \
        ("SUCCEEDED", {"x": 1, "r": {"m": 2}}, "After")
    data = {k: json.loads(v) for k, v in answer["inspectionData"].items()}
    assert data == {"input": {"x": 1}, "afterParameters": {"n": 1}, "result": {"n": 2},
                    "afterResultSelector": {"m": 2}, "afterResultPath": {"x": 1, "r": {"m": 2}}}
    assert "inspectionData" not in run(sfn, TASK, input='{"x": 1}')  # INFO: the output only


def test_a_mock_stands_in_for_the_task(sfn: Any) -> None:
    answer = run(sfn, TASK, input='{"x": 1}', mock={"result": '{"n": 41}'})
    assert json.loads(answer["output"]) == {"x": 1, "r": {"m": 41}}
    failed = run(sfn, {**TASK, "Catch": []}, input='{"x": 1}', mock={"errorOutput": {"error": "Boom", "cause": "c"}})
    assert (failed["status"], failed["error"], failed["cause"]) == ("FAILED", "Boom", "c")


def test_retry_then_catch_decide_the_status_of_an_error(sfn: Any) -> None:
    boom = {**TASK, "Parameters": {"n.$": "$.x", "boom": True}}
    first = run(sfn, boom, input='{"x": 1}')
    assert (first["status"], first["error"]) == ("RETRIABLE", "ValueError")
    caught = run(sfn, boom, input='{"x": 1}', stateConfiguration={"retrierRetryCount": 1})
    assert caught["status"] == "CAUGHT_ERROR" and caught["nextState"] == "Recover"
    output = json.loads(caught["output"])
    assert output["x"] == 1 and output["error"]["Error"] == "ValueError"
    assert json.loads(output["error"]["Cause"])["errorMessage"] == "no"


def test_other_states_and_a_state_of_a_whole_machine(sfn: Any) -> None:
    choice = {"Type": "Choice", "Choices": [{"Variable": "$.x", "NumericGreaterThan": 5, "Next": "Big"}],
              "Default": "Small"}
    assert run(sfn, choice, input='{"x": 9}')["nextState"] == "Big"
    assert run(sfn, choice, input='{"x": 1}')["nextState"] == "Small"
    machine = {"StartAt": "P", "States": {"P": {"Type": "Pass", "Result": {"a": 1}, "ResultPath": "$.p", "End": True},
                                          "F": {"Type": "Fail", "Error": "E", "Cause": "C"}}}
    passed = sfn.test_state(definition=json.dumps(machine), roleArn=ROLE, stateName="P", input='{"k": 0}')
    assert json.loads(passed["output"]) == {"k": 0, "p": {"a": 1}} and "nextState" not in passed
    failed = sfn.test_state(definition=json.dumps(machine), roleArn=ROLE, stateName="F")
    assert (failed["status"], failed["error"], failed["cause"]) == ("FAILED", "E", "C")


def test_bad_test_state_requests_get_aws_errors(sfn: Any) -> None:
    for kwargs, code in [({"definition": "{oops"}, "InvalidDefinition"),
                         ({"definition": json.dumps({"StartAt": "A", "States": {}}), "stateName": "A"},
                          "InvalidDefinition"),
                         ({"definition": json.dumps({"Type": "Map"})}, "ValidationException"),
                         ({"definition": json.dumps(TASK), "input": "{bad"}, "InvalidExecutionInput")]:
        with pytest.raises(ClientError) as caught:
            sfn.test_state(roleArn=ROLE, **kwargs)
        assert caught.value.response["Error"]["Code"] == code, kwargs
