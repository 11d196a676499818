"""Service integrations through the real CLI (`python -m builder run statemachine.json`), every
call made by boto3 against moto server over HTTP (AWS_ENDPOINT_URL): DynamoDB getItem / putItem /
updateItem / deleteItem, SQS sendMessage, SNS publish, EventBridge putEvents and the generic
aws-sdk integration, with AWS's result shapes and error names seen by Retry and Catch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
AWS = "arn:aws:states:::"


def aws_env(endpoint: str) -> dict[str, str]:
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1", "UNUM_ASL_TIME_SCALE": "0.001"}


def run(machine: dict[str, Any], tmp_path: Path, endpoint: str, input_value: Any) -> subprocess.CompletedProcess[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps(machine))
    env = {**os.environ, **aws_env(endpoint)}
    return subprocess.run([sys.executable, "-m", "builder", "run", str(path), "--input", json.dumps(input_value),
                           "--store", str(tmp_path / "store"), "--compact", "--timeout", "60"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=env)


def client(service: str, endpoint: str):
    import boto3
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def resources(moto_server):
    """A fresh table, queue, topic and event bus on the session's moto server."""
    endpoint = moto_server.endpoint
    name = f"it-{uuid.uuid4().hex[:10]}"
    ddb = client("dynamodb", endpoint)
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}])
    sqs = client("sqs", endpoint)
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    topic = client("sns", endpoint).create_topic(Name=name)["TopicArn"]
    bus = client("events", endpoint).create_event_bus(Name=name)["EventBusArn"]
    client("s3", endpoint).create_bucket(Bucket=name)
    return {"endpoint": endpoint, "table": name, "queue": queue, "topic": topic, "bus": name, "bus_arn": bus,
            "bucket": name, "sqs": sqs, "ddb": ddb}


def machine(r: dict[str, Any]) -> dict[str, Any]:
    table = r["table"]
    key = {"id": {"S.$": "$.id"}}
    return {"StartAt": "Put", "States": {
        "Put": {"Type": "Task", "Resource": f"{AWS}dynamodb:putItem",
                "Parameters": {"TableName": table, "Item": {"id": {"S.$": "$.id"}, "n": {"N": "1"}},
                               "ConditionExpression": "attribute_not_exists(id)"},
                "ResultPath": "$.put", "Next": "PutAgain"},
        "PutAgain": {"Type": "Task", "Resource": f"{AWS}dynamodb:putItem",
                     "Parameters": {"TableName": table, "Item": {"id": {"S.$": "$.id"}},
                                    "ConditionExpression": "attribute_not_exists(id)"},
                     "Retry": [{"ErrorEquals": ["DynamoDB.ConditionalCheckFailedException"], "MaxAttempts": 2,
                                "IntervalSeconds": 1}],
                     "Catch": [{"ErrorEquals": ["DynamoDB.ConditionalCheckFailedException"], "ResultPath": "$.dup",
                                "Next": "Update"}],
                     "End": True},
        "Update": {"Type": "Task", "Resource": f"{AWS}dynamodb:updateItem",
                   "Parameters": {"TableName": table, "Key": key, "UpdateExpression": "ADD n :two",
                                  "ExpressionAttributeValues": {":two": {"N": "2"}}, "ReturnValues": "ALL_NEW"},
                   "ResultSelector": {"n.$": "$.Attributes.n.N"}, "ResultPath": "$.updated", "Next": "Get"},
        "Get": {"Type": "Task", "Resource": f"{AWS}dynamodb:getItem",
                "Parameters": {"TableName": table, "Key": key, "ConsistentRead": True},
                "ResultPath": "$.got", "Next": "Send"},
        "Send": {"Type": "Task", "Resource": f"{AWS}sqs:sendMessage",
                 "Parameters": {"QueueUrl": r["queue"], "MessageBody": {"id.$": "$.id", "n.$": "$.got.Item.n.N"}},
                 "ResultPath": "$.sent", "Next": "Publish"},
        "Publish": {"Type": "Task", "Resource": f"{AWS}sns:publish",
                    "Parameters": {"TopicArn": r["topic"], "Message.$": "$.id"},
                    "ResultPath": "$.published", "Next": "Emit"},
        "Emit": {"Type": "Task", "Resource": f"{AWS}events:putEvents",
                 "Parameters": {"Entries": [{"EventBusName": r["bus"], "Source": "unum.test", "DetailType": "done",
                                             "Detail": {"id.$": "$.id"}}]},
                 "ResultPath": "$.events", "Next": "Missing"},
        "Missing": {"Type": "Task", "Resource": f"{AWS}aws-sdk:s3:getObject",
                    "Parameters": {"Bucket": r["bucket"], "Key": "no/such/key"},
                    "Catch": [{"ErrorEquals": ["S3.NoSuchKeyException"], "ResultPath": "$.missing", "Next": "Delete"}],
                    "ResultPath": "$.object", "Next": "Delete"},
        "Delete": {"Type": "Task", "Resource": f"{AWS}dynamodb:deleteItem",
                   "Parameters": {"TableName": table, "Key": key, "ReturnValues": "ALL_OLD"},
                   "ResultSelector": {"old.$": "$.Attributes"}, "ResultPath": "$.deleted", "End": True},
    }}


def test_optimized_and_sdk_integrations_run_with_aws_shapes_and_error_names(resources, tmp_path: Path) -> None:
    r = resources
    proc = run(machine(r), tmp_path, r["endpoint"], {"id": "order-7"})

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out["put"]) == {"SdkHttpMetadata", "SdkResponseMetadata"}
    assert out["put"]["SdkHttpMetadata"]["HttpStatusCode"] == 200
    assert out["dup"]["Error"] == "DynamoDB.ConditionalCheckFailedException"
    assert "(Service: AmazonDynamoDBv2; Status Code: 400; Error Code: ConditionalCheckFailedException" in out["dup"]["Cause"]
    assert out["updated"] == {"n": "3"}
    assert out["got"]["Item"] == {"id": {"S": "order-7"}, "n": {"N": "3"}}
    assert {"MessageId", "MD5OfMessageBody", "SdkHttpMetadata", "SdkResponseMetadata"} <= set(out["sent"])
    assert set(out["published"]) == {"MessageId", "SdkHttpMetadata", "SdkResponseMetadata"}
    assert out["events"]["FailedEntryCount"] == 0 and len(out["events"]["Entries"]) == 1
    assert out["missing"]["Error"] == "S3.NoSuchKeyException"
    assert "(Service: S3, Status Code: 404" in out["missing"]["Cause"]
    assert out["deleted"]["old"] == {"id": {"S": "order-7"}, "n": {"N": "3"}}
    # the side effects happened where the definition said
    messages = r["sqs"].receive_message(QueueUrl=r["queue"], MaxNumberOfMessages=10).get("Messages", [])
    assert [json.loads(m["Body"]) for m in messages] == [{"id": "order-7", "n": "3"}]
    assert messages[0]["MessageId"] == out["sent"]["MessageId"]
    assert "Item" not in r["ddb"].get_item(TableName=r["table"], Key={"id": {"S": "order-7"}}, ConsistentRead=True)


def test_an_uncaught_integration_error_fails_the_workflow_with_its_aws_name(resources, tmp_path: Path) -> None:
    r = resources
    definition = {"StartAt": "Send", "States": {"Send": {
        "Type": "Task", "Resource": f"{AWS}aws-sdk:sqs:sendMessage",
        "Parameters": {"QueueUrl": r["queue"] + "-gone", "MessageBody": "x"}, "End": True}}}
    proc = run(definition, tmp_path, r["endpoint"], {})

    assert proc.returncode == 1
    assert "Sqs.QueueDoesNotExistException" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_unsupported_integration_is_rejected_with_the_reason(tmp_path: Path) -> None:
    definition = {"StartAt": "Job", "States": {"Job": {
        "Type": "Task", "Resource": f"{AWS}ecs:runTask.sync", "Parameters": {}, "End": True}}}
    proc = run(definition, tmp_path, "http://127.0.0.1:9", {})

    assert proc.returncode == 2
    assert "Job" in proc.stderr and "Resource" in proc.stderr and "'.sync'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_deploy_template_grants_exactly_the_integration_actions_on_the_named_resources(tmp_path: Path) -> None:
    from builder.compiler import compile_state_machine
    from builder.deploy.aws import logical_id, sam_template
    from unum_entry.workflow import load_workflow

    definition = {"StartAt": "Put", "States": {
        "Put": {"Type": "Task", "Resource": f"{AWS}dynamodb:putItem",
                "Parameters": {"TableName": "Orders", "Item": {}}, "Next": "Send"},
        "Send": {"Type": "Task", "Resource": f"{AWS}sqs:sendMessage",
                 "Parameters": {"QueueUrl": "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs",
                                "MessageBody.$": "$"}, "Next": "Publish"},
        "Publish": {"Type": "Task", "Resource": f"{AWS}sns:publish",
                    "Parameters": {"TopicArn.$": "$.topic", "Message": "x"}, "Next": "Sdk"},
        "Sdk": {"Type": "Task", "Resource": f"{AWS}aws-sdk:s3:getObject",
                "Parameters": {"Bucket": "b", "Key": "k"}, "End": True}}}
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps(definition))
    compile_state_machine(path, tmp_path / "wf")
    template = sam_template(load_workflow(tmp_path / "wf"), image_prefix="123.dkr.ecr.us-east-1.amazonaws.com")

    def grants(function: str) -> list[dict[str, Any]]:
        statements = template["Resources"][logical_id(function)]["Properties"]["Policies"][0]["Statement"]
        return statements[2:]  # after the store table and lambda:InvokeFunction

    assert grants("Put") == [{"Effect": "Allow", "Action": ["dynamodb:PutItem"], "Resource": {
        "Fn::Sub": "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/Orders"}}]
    assert grants("Send") == [{"Effect": "Allow", "Action": ["sqs:SendMessage"],
                               "Resource": {"Fn::Sub": "arn:${AWS::Partition}:sqs:eu-west-1:123456789012:jobs"}}]
    assert grants("Publish") == [{"Effect": "Allow", "Action": ["sns:Publish"], "Resource": "*"}]  # chosen at run time
    assert grants("Sdk") == [{"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "*"}]
