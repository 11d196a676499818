"""Service integrations inside the state runner, with a real botocore client whose HTTP layer is
replaced by botocore's Stubber (exact request parameters, AWS's error responses): Retry and
Catch see Step Functions' error names, results keep AWS's shapes. Resource parsing and refusals."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from unum_entry.asl.integrations import handler_for, parse, unsupported_reason
from unum_entry.asl.integrations.call import exception_name, sdk_error_prefix, to_json
from unum_entry.asl.runner import Fragment, Services, run

pytestmark = pytest.mark.unit

PUT = "arn:aws:states:::dynamodb:putItem"


def stubbed(resource: str, service: str):
    handler = handler_for(resource)
    handler._client = boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    return handler, Stubber(handler._client)


def run_task(state: dict[str, Any], handler, event: Any) -> dict[str, Any]:
    states = {"T": {"Type": "Task", **state}, "Caught": {"Type": "Pass", "End": True}}
    fragment = Fragment(function="T", head="T", join=False, in_branch=False, states=states, task="T")
    context = SimpleNamespace(workflow_id="wf", invocation="c-1", attempt=0, index=0, size=1, iteration=0)
    return run(fragment, handler, event, context, Services(sleep=lambda s: None))


def conditional_failure(stub: Stubber) -> None:
    stub.add_client_error("put_item", service_error_code="ConditionalCheckFailedException",
                          service_message="The conditional request failed", http_status_code=400)


def test_retry_matches_the_aws_error_name_and_the_next_attempt_succeeds() -> None:
    handler, stub = stubbed(PUT, "dynamodb")
    params = {"TableName": "t", "Item": {"id": {"S": "a"}}, "ConditionExpression": "attribute_not_exists(id)"}
    conditional_failure(stub)
    stub.add_response("put_item", {}, params)
    state = {"Resource": PUT, "Parameters": {"TableName": "t", "Item": {"id": {"S.$": "$.id"}},
                                             "ConditionExpression": "attribute_not_exists(id)"},
             "Retry": [{"ErrorEquals": ["DynamoDB.ConditionalCheckFailedException"], "MaxAttempts": 1}], "End": True}
    with stub:
        decision = run_task(state, handler, {"id": "a"})
        stub.assert_no_pending_responses()

    assert decision["__next__"] == "__end__"
    assert decision["output"]["SdkHttpMetadata"]["HttpStatusCode"] == 200
    assert "SdkResponseMetadata" in decision["output"]


def test_catch_gets_error_and_cause_in_aws_form_after_retries_are_exhausted() -> None:
    handler, stub = stubbed(PUT, "dynamodb")
    for _ in range(2):
        conditional_failure(stub)
    state = {"Resource": PUT, "Parameters": {"TableName": "t", "Item": {"id": {"S": "a"}}},
             "Retry": [{"ErrorEquals": ["States.ALL"], "MaxAttempts": 1}],
             "Catch": [{"ErrorEquals": ["DynamoDB.ConditionalCheckFailedException"], "Next": "Caught"}], "End": True}
    with stub:
        decision = run_task(state, handler, {})
        stub.assert_no_pending_responses()

    error = decision["output"]
    assert error["Error"] == "DynamoDB.ConditionalCheckFailedException"
    assert error["Cause"].startswith("The conditional request failed (Service: AmazonDynamoDBv2; Status Code: 400; "
                                     "Error Code: ConditionalCheckFailedException; Request ID: ")


def test_sqs_send_message_sends_a_json_body_as_compact_text_and_returns_aws_fields() -> None:
    resource = "arn:aws:states:::sqs:sendMessage"
    handler, stub = stubbed(resource, "sqs")
    stub.add_response("send_message", {"MessageId": "m-1", "MD5OfMessageBody": "abc"},
                      {"QueueUrl": "https://q", "MessageBody": '{"a":1,"b":[true]}'})
    with stub:
        decision = run_task({"Resource": resource, "Parameters": {"QueueUrl": "https://q", "MessageBody": {"a": 1, "b": [True]}},
                             "End": True}, handler, {})
    assert decision["output"]["MessageId"] == "m-1" and decision["output"]["MD5OfMessageBody"] == "abc"


def test_an_uncaught_sdk_error_fails_with_service_dot_code_exception() -> None:
    resource = "arn:aws:states:::aws-sdk:dynamodb:describeTable"
    handler, stub = stubbed(resource, "dynamodb")
    stub.add_client_error("describe_table", service_error_code="ResourceNotFoundException", service_message="no table",
                          http_status_code=400)
    with stub:
        decision = run_task({"Resource": resource, "Parameters": {"TableName": "t"}, "End": True}, handler, {})
    assert decision["__next__"] == "__fail__"
    assert decision["error"]["Error"] == "DynamoDb.ResourceNotFoundException"
    assert decision["error"]["Cause"].startswith("no table (Service: DynamoDB, Status Code: 400")


def test_an_unknown_sdk_action_is_a_runtime_error_naming_it() -> None:
    resource = "arn:aws:states:::aws-sdk:dynamodb:fetchEverything"
    handler, _ = stubbed(resource, "dynamodb")
    decision = run_task({"Resource": resource, "Parameters": {}, "End": True}, handler, {})
    assert decision["error"]["Error"] == "States.Runtime" and "fetchEverything" in decision["error"]["Cause"]


@pytest.mark.parametrize("resource, expected", [
    ("arn:aws:states:::dynamodb:getItem", ("dynamodb", "getItem", False, False)),
    ("arn:aws-us-gov:states:::sns:publish.waitForTaskToken", ("sns", "publish", False, True)),
    ("arn:aws:states:::aws-sdk:s3:listObjectsV2", ("s3", "listObjectsV2", True, False)),
    ("arn:aws:states:::dynamodb:getItem.waitForTaskToken", None),  # AWS has no callback on DynamoDB
    ("arn:aws:states:::dynamodb:query", None),
    ("arn:aws:states:::aws-sdk:s3:GetObject", None),
    ("arn:aws:lambda:us-east-1:1:function:f", None),
    ("Double", None),
])
def test_parse(resource: str, expected) -> None:
    found = parse(resource)
    assert (None if found is None else (found.service, found.action, found.sdk, found.callback)) == expected


def test_what_cannot_run_without_a_coordinator_is_refused_with_the_reason() -> None:
    assert "poller" in unsupported_reason("arn:aws:states:::glue:startJobRun.sync")
    assert "GetActivityTask" in unsupported_reason("arn:aws:states:us-east-1:123:activity:approve")
    assert "aws-sdk:SERVICE:ACTION" in unsupported_reason("arn:aws:states:::dynamodb:query")
    assert unsupported_reason("arn:aws:states:::sqs:sendMessage") is None


def test_names_and_values_as_step_functions_shows_them() -> None:
    assert [sdk_error_prefix(s) for s in ("DynamoDB", "ACM PCA", "S3", "SQS", "EventBridge")] == \
        ["DynamoDb", "AcmPca", "S3", "Sqs", "EventBridge"]
    assert exception_name("NoSuchKey") == "NoSuchKeyException"
    assert exception_name("AWS.SimpleQueueService.NonExistentQueue") == "QueueDoesNotExistException"
    from datetime import datetime, timezone
    assert to_json({"T": datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "B": b"hi"}) == \
        {"T": "2024-01-02T03:04:05.000Z", "B": "hi"}
