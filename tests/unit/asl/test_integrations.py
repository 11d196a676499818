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
from unum_entry.asl.integrations.call import client_config, exception_name, sdk_error_prefix, to_json
from unum_entry.asl.runner import Fragment, Services, run

pytestmark = pytest.mark.unit

PUT = "arn:aws:states:::dynamodb:putItem"


def stubbed(resource: str, service: str):
    handler = handler_for(resource)
    handler._client = boto3.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x",
                                   config=client_config())  # the handler's own settings
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
    assert decision["error"]["Cause"].startswith("no table (Service: DynamoDb, Status Code: 400")


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
    # an activity Task runs now: it waits for a worker's GetActivityTask (unum_entry.asl.activities, serve)
    assert unsupported_reason("arn:aws:states:us-east-1:123:activity:approve") is None
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


@pytest.mark.parametrize("body, sent", [("hello", b'"hello"'), ({"Dict": "Value"}, b'{"Dict":"Value"}'),
                                        (False, b"false"), (0, b"0")])
def test_an_sdk_blob_member_is_sent_as_the_json_text_of_any_value(body: Any, sent: bytes) -> None:
    # AWS (aws-sdk integrations): a blob-typed member such as S3 PutObject's Body is serialized
    # from the JSON value as its JSON text: a string keeps its quotes.
    resource = "arn:aws:states:::aws-sdk:s3:putObject"
    handler, stub = stubbed(resource, "s3")
    stub.add_response("put_object", {"ETag": '"e"'}, {"Bucket": "b", "Key": "k", "Body": sent})
    with stub:
        decision = run_task({"Resource": resource, "Parameters": {"Bucket": "b", "Key": "k", "Body": body},
                             "End": True}, handler, {})
        stub.assert_no_pending_responses()
    assert decision["output"] == {"ETag": '"e"'}


def test_a_null_parameter_is_left_out_so_the_service_reports_it_missing() -> None:
    # not the text "null", not a client-side refusal: the request goes without MessageBody
    resource = "arn:aws:states:::sqs:sendMessage"
    handler, stub = stubbed(resource, "sqs")
    stub.add_client_error("send_message", service_error_code="MissingParameter", http_status_code=400,
                          service_message="The request must contain the parameter MessageBody.",
                          expected_params={"QueueUrl": "https://q"})
    with stub:
        decision = run_task({"Resource": resource, "Parameters": {"QueueUrl": "https://q", "MessageBody.$": "$.body"},
                             "End": True}, handler, {"body": None})
        stub.assert_no_pending_responses()
    assert decision["error"]["Error"] == "SQS.AmazonSQSException"
    assert decision["error"]["Cause"].startswith("The request must contain the parameter MessageBody. (Service: "
                                                 "AmazonSQS; Status Code: 400; Error Code: MissingParameter; ")


@pytest.mark.parametrize("resource, name", [("arn:aws:states:::dynamodb:getItem", "DynamoDB.AmazonDynamoDBException"),
                                            ("arn:aws:states:::aws-sdk:dynamodb:getItem", "DynamoDb.DynamoDbException")])
def test_an_error_the_service_model_does_not_declare_has_the_sdks_generic_name(resource: str, name: str) -> None:
    handler, stub = stubbed(resource, "dynamodb")
    stub.add_client_error("get_item", service_error_code="ValidationException", http_status_code=400,
                          service_message="One or more parameter values were invalid")
    with stub:
        decision = run_task({"Resource": resource, "Parameters": {"TableName": "t", "Key": {}}, "End": True}, handler, {})
    assert decision["error"]["Error"] == name


def test_an_s3_error_cause_carries_the_extended_request_id() -> None:
    resource = "arn:aws:states:::aws-sdk:s3:getObject"
    handler, stub = stubbed(resource, "s3")
    stub.add_client_error("get_object", service_error_code="NoSuchKey", http_status_code=404,
                          service_message="The specified key does not exist.",
                          response_meta={"RequestId": "R1", "HostId": "H1"})
    with stub:
        decision = run_task({"Resource": resource, "Parameters": {"Bucket": "b", "Key": "k"}, "End": True}, handler, {})
    assert decision["error"] == {"Error": "S3.NoSuchKeyException", "Cause": "The specified key does not exist. "
                                 "(Service: S3, Status Code: 404, Request ID: R1, Extended Request ID: H1)"}


def test_put_events_with_a_failed_entry_fails_the_task_with_eventbridge_failed_entry() -> None:
    resource = "arn:aws:states:::events:putEvents"
    handler, stub = stubbed(resource, "events")
    response = {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InvalidArgument", "ErrorMessage": "bad"}]}
    stub.add_response("put_events", response)
    with stub:
        decision = run_task({"Resource": resource, "Parameters": {"Entries": [{"DetailType": "d", "Detail": "{}"}]},
                             "End": True}, handler, {})
    assert decision["error"]["Error"] == "EventBridge.FailedEntry"
    assert decision["error"]["Cause"] == '{"FailedEntryCount":1,"Entries":[{"ErrorCode":"InvalidArgument","ErrorMessage":"bad"}]}'


def test_a_parameter_name_the_api_does_not_have_is_refused_naming_it() -> None:
    resource = "arn:aws:states:::aws-sdk:s3:getObject"
    handler, _ = stubbed(resource, "s3")
    decision = run_task({"Resource": resource, "Parameters": {"Bucket": "b", "Kee": "k"}, "End": True}, handler, {})
    assert decision["error"]["Error"] == "States.TaskFailed" and "unknown parameter 'Kee'" in decision["error"]["Cause"]
