"""Step Functions fidelity II (issue 20) through the real CLI (`python -m builder run|compile`),
integrations against moto server over loopback. Each expectation is AWS's documented or recorded
behaviour: Distributed Map paths and the CSV reader, EventBridge's FailedEntry, ResultWriter's
MapRunArn from the Label, aws-sdk blob serialization and result members, null parameters reaching
the service, integration error names and causes, the context object, AWS's causes of the core
language, malformed JSONata rejected at compile time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_asl_integrations import AWS, aws_env, client

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
NO_AWS = "http://127.0.0.1:9"  # nothing listens: these machines make no AWS call
ECHO = {"StartAt": "Echo", "States": {"Echo": {"Type": "Pass", "End": True}}}
DISTRIBUTED = {"ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}}


def cli(command: str, machine: dict[str, Any], tmp_path: Path, endpoint: str, input_value: Any = None,
        env: dict[str, str] | None = None, functions: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps(machine))
    for name, source in (functions or {}).items():
        (tmp_path / "functions" / name).mkdir(parents=True, exist_ok=True)
        (tmp_path / "functions" / name / "app.py").write_text(source)
    args = [sys.executable, "-m", "builder", command, str(path)]
    if command == "run":
        args += ["--input", json.dumps(input_value), "--store", str(tmp_path / "store"), "--compact", "--timeout", "60"]
    else:
        args += ["--out", str(tmp_path / "out")]
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **aws_env(endpoint), **(env or {})})


def failure(proc: subprocess.CompletedProcess[str]) -> str:
    """The `error: … failed in function 'F' after n attempt(s): ERROR: CAUSE` line of a failed run."""
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert lines and "Traceback" not in proc.stderr, proc.stderr
    return lines[-1].split("attempt(s): ", 1)[1]


@pytest.fixture
def bucket(moto_server):
    name = f"it-{uuid.uuid4().hex[:10]}"
    s3 = client("s3", moto_server.endpoint)
    s3.create_bucket(Bucket=name)
    return {"name": name, "s3": s3, "endpoint": moto_server.endpoint}


# ---- 1. Distributed Map ----------------------------------------------------------------------

@pytest.mark.parametrize("fields, value, expected", [
    ({"ToleratedFailureCountPath": "$.v"}, "some",
     'States.Runtime: The ToleratedFailureCountPath field refers to value "some" which is not a valid integer: $.v'),
    ({"ToleratedFailurePercentagePath": "$.v"}, 120, "States.Runtime: ToleratedFailurePercentage must be between 0 and 100."),
    ({"MaxConcurrencyPath": "$.v"}, -1, "States.Runtime: Expected non-negative integer for MaxConcurrency, got '-1' instead."),
    ({"ItemBatcher": {"MaxItemsPerBatchPath": "$.v"}}, [2],
     'States.Runtime: The MaxItemsPerBatchPath field refers to value "[2]" which is not a valid integer: $.v'),
])
def test_distributed_map_paths_that_resolve_to_bad_values_fail_with_states_runtime(
        tmp_path: Path, fields: dict[str, Any], value: Any, expected: str) -> None:
    definition = {"StartAt": "Each", "States": {"Each": {
        "Type": "Map", "ItemsPath": "$.items", "End": True, **fields, "ItemProcessor": {**DISTRIBUTED, **ECHO}}}}
    proc = cli("run", definition, tmp_path, NO_AWS, {"items": [1, 2, 3], "v": value})

    entered = "An error occurred while executing the state 'Each' (entered at the event id #2). "  # AWS's prefix
    assert failure(proc) == expected.replace("States.Runtime: ", "States.Runtime: " + entered, 1)


def reader(bucket: dict[str, Any], key: str, **config: Any) -> dict[str, Any]:
    return {"Resource": f"{AWS}s3:getObject", "ReaderConfig": {"InputType": "CSV", **config},
            "Parameters": {"Bucket": bucket["name"], "Key": key}}


def test_csv_reader_fills_short_rows_and_refuses_duplicate_headers_and_negative_max_items(bucket, tmp_path: Path) -> None:
    s3, name = bucket["s3"], bucket["name"]
    s3.put_object(Bucket=name, Key="short.csv", Body="id,qty,note\na,1,x\nb\n")
    s3.put_object(Bucket=name, Key="dup.csv", Body="id,id\na,b\n")

    def machine(item_reader: dict[str, Any]) -> dict[str, Any]:
        return {"StartAt": "Each", "States": {
            "Each": {"Type": "Map", "ItemReader": item_reader, "ItemProcessor": {**DISTRIBUTED, **ECHO}, "End": True,
                     "Catch": [{"ErrorEquals": ["States.ItemReaderFailed"], "Next": "Caught"}]},
            "Caught": {"Type": "Pass", "End": True}}}

    short = cli("run", machine(reader(bucket, "short.csv")), tmp_path / "s", bucket["endpoint"], {})
    dup = cli("run", machine(reader(bucket, "dup.csv")), tmp_path / "d", bucket["endpoint"], {})
    given = cli("run", machine(reader(bucket, "short.csv", CSVHeaderLocation="GIVEN", CSVHeaders=["k", "k"])),
                tmp_path / "g", bucket["endpoint"], {})
    negative = cli("run", machine(reader(bucket, "short.csv", MaxItemsPath="$.max")), tmp_path / "n",
                   bucket["endpoint"], {"max": -1})

    assert json.loads(short.stdout) == [{"id": "a", "qty": "1", "note": "x"}, {"id": "b", "qty": "", "note": ""}]
    entered = "An error occurred while executing the state 'Each' (entered at the event id #2). "  # AWS's prefix
    duplicates = {"Error": "States.ItemReaderFailed", "Cause": entered + "CSV headers cannot contain duplicates."}
    assert json.loads(dup.stdout) == duplicates and json.loads(given.stdout) == duplicates
    assert json.loads(negative.stdout) == {"Error": "States.ItemReaderFailed",
                                           "Cause": entered + "field MaxItems must be positive"}


def test_result_writer_names_the_map_run_by_the_label(bucket, tmp_path: Path) -> None:
    definition = {"StartAt": "Each", "States": {"Each": {
        "Type": "Map", "Label": "Nightly", "ItemsPath": "$.items", "End": True, "ItemProcessor": {**DISTRIBUTED, **ECHO},
        "ResultWriter": {"Resource": f"{AWS}s3:putObject", "Parameters": {"Bucket": bucket["name"], "Prefix": "out"}}}}}
    proc = cli("run", definition, tmp_path, bucket["endpoint"], {"items": [1]},
               env={"UNUM_ASL_REGION": "eu-west-1", "UNUM_ASL_ACCOUNT": "111122223333"})

    assert proc.returncode == 0, proc.stderr
    arn = json.loads(proc.stdout)["MapRunArn"]
    assert arn.startswith("arn:aws:states:eu-west-1:111122223333:mapRun:") and "/Nightly:" in arn


# ---- EventBridge, aws-sdk serialization, nulls, error names ----------------------------------

def test_put_events_with_a_failed_entry_fails_with_eventbridge_failed_entry(moto_server, tmp_path: Path) -> None:
    definition = {"StartAt": "Emit", "States": {
        "Emit": {"Type": "Task", "Resource": f"{AWS}events:putEvents", "End": True,
                 "Parameters": {"Entries": [{"DetailType": "no source", "Detail": {"a": 1}}]},
                 "Catch": [{"ErrorEquals": ["EventBridge.FailedEntry"], "Next": "Caught"}]},
        "Caught": {"Type": "Pass", "End": True}}}
    proc = cli("run", definition, tmp_path, moto_server.endpoint, {})

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["Error"] == "EventBridge.FailedEntry"
    response = json.loads(out["Cause"])  # AWS: the PutEvents response
    assert response["FailedEntryCount"] == 1 and response["Entries"][0]["ErrorCode"] == "InvalidArgument"


def test_sdk_blob_members_are_the_json_text_of_any_value_and_results_carry_only_aws_members(bucket, tmp_path: Path) -> None:
    name = bucket["name"]
    puts = {f"P{i}": {"Type": "Task", "Resource": f"{AWS}aws-sdk:s3:putObject", "ResultPath": f"$.r{i}",
                      "Parameters": {"Bucket": name, "Key": f"k{i}", "Body.$": f"$.bodies[{i}]"},
                      **({"Next": f"P{i + 1}"} if i < 3 else {"End": True})} for i in range(4)}
    proc = cli("run", {"StartAt": "P0", "States": puts}, tmp_path, bucket["endpoint"],
               {"bodies": ["hello", {"Dict": "Value"}, False, 0]})

    assert proc.returncode == 0, proc.stderr
    stored = [bucket["s3"].get_object(Bucket=name, Key=f"k{i}")["Body"].read() for i in range(4)]
    assert stored == [b'"hello"', b'{"Dict":"Value"}', b"false", b"0"]
    assert set(json.loads(proc.stdout)["r0"]) == {"ETag"}  # no checksum members the SDK would add


def test_null_parameters_reach_the_service_and_errors_have_aws_names_and_causes(moto_server, tmp_path: Path) -> None:
    table = f"it-{uuid.uuid4().hex[:10]}"
    client("dynamodb", moto_server.endpoint).create_table(
        TableName=table, BillingMode="PAY_PER_REQUEST", KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}])
    item = {"id.$": "$.id", "n": {"N": "1"}}
    catch = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Next"}]
    definition = {"StartAt": "Put", "States": {
        "Put": {"Type": "Task", "Resource": f"{AWS}dynamodb:putItem", "Parameters": {"TableName": table, "Item": item},
                "Catch": [{**catch[0], "ResultPath": "$.optimized", "Next": "SdkPut"}], "End": True},
        "SdkPut": {"Type": "Task", "Resource": f"{AWS}aws-sdk:dynamodb:putItem",
                   "Parameters": {"TableName": table, "Item": item},
                   "Catch": [{**catch[0], "ResultPath": "$.sdk", "Next": "Get"}], "End": True},
        "Get": {"Type": "Task", "Resource": f"{AWS}aws-sdk:s3:getObject", "Parameters": {"Bucket": table, "Key": "k"},
                "Catch": [{**catch[0], "ResultPath": "$.s3", "Next": "Done"}], "End": True},
        "Done": {"Type": "Pass", "End": True}}}
    client("s3", moto_server.endpoint).create_bucket(Bucket=table)
    proc = cli("run", definition, tmp_path, moto_server.endpoint, {"id": None})

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    missing = "One or more parameter values were invalid: Missing the key id in the item"
    assert out["optimized"]["Error"] == "DynamoDB.AmazonDynamoDBException"
    assert out["optimized"]["Cause"].startswith(f"{missing} (Service: AmazonDynamoDBv2; Status Code: 400; "
                                                "Error Code: ValidationException; Request ID: ")
    assert out["sdk"]["Error"] == "DynamoDb.DynamoDbException"
    assert out["sdk"]["Cause"].startswith(f"{missing} (Service: DynamoDb, Status Code: 400, Request ID: ")
    assert out["s3"]["Error"] == "S3.NoSuchKeyException"
    assert out["s3"]["Cause"].startswith("The specified key does not exist. (Service: S3, Status Code: 404, Request ID: ")
    assert ", Extended Request ID: " in out["s3"]["Cause"] and out["s3"]["Cause"].endswith(")")


# ---- the context object ----------------------------------------------------------------------

ECHO_HANDLER = "def handler(event, context):\n    return event\n"


def test_the_context_object_has_aws_members_values_and_key_order(tmp_path: Path) -> None:
    definition = {"StartAt": "Whole", "States": {
        "Whole": {"Type": "Pass", "InputPath": "$$", "ResultPath": "$.pass", "Next": "Format"},
        "Format": {"Type": "Pass", "ResultPath": "$.format", "Next": "Task",
                   "Parameters": {"state.$": "States.Format('{}', $$.State.Name)", "keys.$": "States.Format('{}', $$)"}},
        "Task": {"Type": "Task", "Resource": "Echo", "Parameters": {"ctx.$": "$$"}, "ResultPath": "$.task", "End": True}}}
    proc = cli("run", definition, tmp_path, NO_AWS, {"order": 7}, functions={"Echo": ECHO_HANDLER},
               env={"UNUM_ASL_REGION": "eu-west-1", "UNUM_ASL_ACCOUNT": "111122223333"})

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    ctx = out["pass"]  # InputPath "$$": the whole context object of a Pass state
    assert list(ctx) == ["Execution", "StateMachine", "State"]
    execution = ctx["Execution"]
    assert list(execution) == ["Id", "Input", "StartTime", "Name", "RoleArn", "RedriveCount"]
    name = execution["Name"]
    machine = ctx["StateMachine"]["Name"]
    assert execution["Id"] == f"arn:aws:states:eu-west-1:111122223333:execution:{machine}:{name}"
    assert execution["Input"] == {"order": 7}
    assert ctx["StateMachine"]["Id"] == f"arn:aws:states:eu-west-1:111122223333:stateMachine:{machine}"
    assert list(ctx["State"]) == ["Name", "EnteredTime"]  # no RetryCount in a Pass state, no Task
    assert out["format"]["keys"].startswith(f"{{Execution={{Id=arn:aws:states:eu-west-1:111122223333:execution:"
                                            f"{machine}:{name}, Input={{order=7}}, StartTime=")
    task_ctx = out["task"]["ctx"]
    assert list(task_ctx) == ["Execution", "StateMachine", "State"]  # no Task without a token
    assert task_ctx["State"]["Name"] == "Task" and task_ctx["State"]["RetryCount"] == 0
    assert task_ctx["Execution"]["Input"] == {"order": 7}  # carried to the Task's own function


def test_jsonata_states_context_carries_the_execution_input(tmp_path: Path) -> None:
    definition = {"QueryLanguage": "JSONata", "StartAt": "First", "States": {
        "First": {"Type": "Task", "Resource": "Echo", "Arguments": {"x": 1}, "Next": "Second"},
        "Second": {"Type": "Pass", "Output": "{% $states.context %}", "End": True}}}
    proc = cli("run", definition, tmp_path, NO_AWS, {"order": 8}, functions={"Echo": ECHO_HANDLER})

    assert proc.returncode == 0, proc.stderr
    ctx = json.loads(proc.stdout)
    assert ctx["Execution"]["Input"] == {"order": 8}
    assert ctx["Execution"]["Id"].startswith("arn:aws:states:us-east-1:123456789012:execution:")


# ---- causes and validation of the core language ----------------------------------------------

@pytest.mark.parametrize("seconds, cause", [
    (1.5, "The SecondsPath parameter cannot be parsed as a long value: $.s == 1.5"),
    (-3, "The SecondsPath parameter references a negative value: $.s == -3"),
])
def test_wait_seconds_path_causes_are_aws_wording(tmp_path: Path, seconds: Any, cause: str) -> None:
    definition = {"StartAt": "W", "States": {"W": {"Type": "Wait", "SecondsPath": "$.s", "End": True}}}
    proc = cli("run", definition, tmp_path, NO_AWS, {"s": seconds})

    entered = "An error occurred while executing the state 'W' (entered at the event id #2). "  # AWS's prefix
    assert failure(proc) == f"States.Runtime: {entered}{cause}"


def test_a_malformed_jsonata_delimiter_is_rejected_at_compile_time_naming_state_and_field(tmp_path: Path) -> None:
    definition = {"QueryLanguage": "JSONata", "StartAt": "P", "States": {
        "P": {"Type": "Pass", "Output": {"total": "{% 10 %"}, "End": True}}}
    proc = cli("compile", definition, tmp_path, NO_AWS)

    assert proc.returncode == 2
    assert "'P'" in proc.stderr and "Output.total" in proc.stderr and "malformed JSONata" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_task_failure_without_error_or_cause_shows_null_for_both(tmp_path: Path) -> None:
    from tests.integration.test_task_tokens import cli as token_cli
    from tests.integration.test_task_tokens import started

    path, env, token = started(tmp_path)  # its Catch takes Order.Rejected and States.Timeout only
    failed = token_cli("task-failure", token, "--store", tmp_path / "store", "--workflow", path, "--compact", env=env)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr
    workflow = failed.stderr.split("error: workflow ", 1)[1].split()[0]
    record = json.loads(token_cli("inspect", workflow, "--store", tmp_path / "store").stdout)

    assert record["status"] == "failed"
    assert (record["failure"]["Error"], record["failure"]["Cause"]) == (None, None)  # not States.TaskFailed and ""


# ---- nested state machines -------------------------------------------------------------------

CHILD = {"StartAt": "Check", "States": {
    "Check": {"Type": "Choice", "Choices": [{"Variable": "$.fail", "IsPresent": True, "Next": "Boom"}],
              "Default": "Work"},
    "Boom": {"Type": "Fail", "Error": "Child.Failed", "Cause": "asked to fail"},
    # a Lambda Task and a Map inside the child, and the child's own context object
    "Work": {"Type": "Task", "Resource": "Echo", "ResultPath": "$.echoed", "Next": "Each"},
    "Each": {"Type": "Map", "ItemsPath": "$.items", "ResultPath": "$.items", "Next": "Done",
             "ItemProcessor": {"StartAt": "Double", "States": {
                 "Double": {"Type": "Pass", "Parameters": {"v.$": "States.MathAdd($, $)"}, "End": True}}}},
    "Done": {"Type": "Pass", "End": True, "Parameters": {
        "items.$": "$.items", "execution.$": "$$.Execution.Name", "input.$": "$$.Execution.Input"}}}}


def test_a_nested_state_machine_runs_on_unum_with_aws_result_shapes(tmp_path: Path) -> None:
    (tmp_path).mkdir(parents=True, exist_ok=True)
    (tmp_path / "Child.asl.json").write_text(json.dumps(CHILD))
    child_arn = "arn:aws:states:us-east-1:123456789012:stateMachine:Child"
    definition = {"StartAt": "Json", "States": {
        "Json": {"Type": "Task", "Resource": f"{AWS}states:startExecution.sync:2", "ResultPath": "$.json", "Next": "Text",
                 "Parameters": {"StateMachineArn": child_arn, "Input": {"items.$": "$.items"}, "Name": "first"}},
        "Text": {"Type": "Task", "Resource": f"{AWS}states:startExecution.sync", "ResultPath": "$.text", "Next": "Fails",
                 "Parameters": {"StateMachineArn": "Child", "Input": {"items": [5]}}},
        "Fails": {"Type": "Task", "Resource": f"{AWS}states:startExecution.sync:2", "End": True,
                  "Parameters": {"StateMachineArn": child_arn, "Input": {"fail": True}},
                  "Retry": [{"ErrorEquals": ["States.TaskFailed"], "MaxAttempts": 1, "IntervalSeconds": 1}],
                  "Catch": [{"ErrorEquals": ["States.TaskFailed"], "ResultPath": "$.failed", "Next": "Caught"}]},
        "Caught": {"Type": "Pass", "End": True}}}
    proc = cli("run", definition, tmp_path, NO_AWS, {"items": [1, 2]}, functions={"Echo": ECHO_HANDLER})

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    first = out["json"]  # .sync:2: DescribeExecution's shape, Input and Output as JSON
    assert list(first) == ["ExecutionArn", "Input", "InputDetails", "Name", "Output", "OutputDetails", "StartDate",
                           "StateMachineArn", "Status", "StopDate"]
    assert first["ExecutionArn"] == "arn:aws:states:us-east-1:123456789012:execution:Child:first"
    assert (first["Status"], first["Name"], first["StateMachineArn"]) == ("SUCCEEDED", "first", child_arn)
    assert first["Input"] == {"items": [1, 2]}
    assert first["Output"] == {"items": [{"v": 2}, {"v": 4}], "execution": "first", "input": {"items": [1, 2]}}
    assert isinstance(first["StartDate"], int) and first["StopDate"] >= first["StartDate"]
    second = out["text"]  # .sync: Input and Output as JSON text
    assert second["Input"] == '{"items":[5]}'
    assert json.loads(second["Output"])["items"] == [{"v": 10}]
    failed = out["failed"]  # the child's failure, after the Task's Retry started a second child
    assert failed["Error"] == "States.TaskFailed"
    cause = json.loads(failed["Cause"])
    assert (cause["Status"], cause["Error"], cause["Cause"]) == ("FAILED", "Child.Failed", "asked to fail")


def test_nested_state_machines_that_cannot_run_are_rejected_at_compile_time(tmp_path: Path) -> None:
    def compiled(resource: str, arn: Any, where: Path) -> subprocess.CompletedProcess[str]:
        return cli("compile", {"StartAt": "Start", "States": {"Start": {
            "Type": "Task", "Resource": f"{AWS}{resource}", "End": True,
            "Parameters": {"StateMachineArn": arn} if isinstance(arn, str) else {"StateMachineArn.$": "$.arn"}}}},
            where, NO_AWS)

    missing = compiled("states:startExecution.sync", "Nowhere", tmp_path / "m")
    dynamic = compiled("states:startExecution.sync:2", None, tmp_path / "d")
    forget = compiled("states:startExecution.waitForTaskToken", "Child", tmp_path / "f")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "Loop.asl.json").write_text(json.dumps({"StartAt": "Again", "States": {"Again": {
        "Type": "Task", "Resource": f"{AWS}states:startExecution.sync", "End": True,
        "Parameters": {"StateMachineArn": "Loop"}}}}))
    cycle = compiled("states:startExecution.sync", "Loop", tmp_path / "c")

    for proc in (missing, dynamic, forget, cycle):
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert all("'Start'" in p.stderr for p in (missing, dynamic, forget))
    assert "Loop.asl.json: state 'Again'" in cycle.stderr  # where the cycle closes
    assert "no definition of state machine 'Nowhere'" in missing.stderr
    assert "named literally" in dynamic.stderr
    assert "the .waitForTaskToken form would start an execution that nothing joins" in forget.stderr
    assert "starts itself" in cycle.stderr


@pytest.mark.parametrize("seed", range(4))
def test_a_nested_child_completes_its_parent_exactly_once_under_faults(tmp_path: Path, seed: int) -> None:
    """Duplicates, crashes and store errors (the embedded platform's fault injector): the parent's
    result equals a fault-free run's, the child's end joined once."""
    from builder.compiler import compile_state_machine
    from unum_entry.local.faults import FaultInjector, FaultRates
    from unum_entry.local.platform import local_platform
    from unum_entry.stores import open_store
    from unum_entry.workflow import load_workflow

    (tmp_path / "functions" / "Echo").mkdir(parents=True)
    (tmp_path / "functions" / "Echo" / "app.py").write_text(ECHO_HANDLER)
    (tmp_path / "Child.asl.json").write_text(json.dumps(CHILD))
    (tmp_path / "statemachine.json").write_text(json.dumps({"StartAt": "Run", "States": {"Run": {
        "Type": "Task", "Resource": f"{AWS}states:startExecution.sync:2", "End": True,
        "Parameters": {"StateMachineArn": "Child", "Input": {"items.$": "$.items"}, "Name": "child"},
        "ResultSelector": {"output.$": "$.Output", "status.$": "$.Status"}}}}))
    out = compile_state_machine(tmp_path / "statemachine.json", tmp_path / "wf").out
    results = []
    for faults in (None, FaultInjector(FaultRates.everything(0.2), seed=seed)):
        store = open_store(str(tmp_path / f"store-{faults is None}"))
        with local_platform(load_workflow(out), store, workers=4, faults=faults) as platform:
            outcome = platform.run({"items": [1, 2, 3]}, timeout=60)
        store.close()
        assert outcome.failure is None, outcome.failure
        results.append(outcome.result)

    assert results[0] == results[1] == {"status": "SUCCEEDED", "output": {
        "items": [{"v": 2}, {"v": 4}, {"v": 6}], "execution": "child", "input": {"items": [1, 2, 3]}}}


def test_put_events_appends_the_execution_and_state_machine_arns_to_resources(moto_server, tmp_path: Path) -> None:
    """AWS: "The execution ARN and the state machine ARN are automatically appended to the
    Resources field of each PutEventsRequestEntry" (optimized integration only). Seen on the event
    as an EventBridge rule delivers it to an SQS queue (moto)."""
    sqs, events = client("sqs", moto_server.endpoint), client("events", moto_server.endpoint)
    queue = sqs.create_queue(QueueName=f"ev-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    source = f"unum.test.{uuid.uuid4().hex[:8]}"
    events.put_rule(Name=f"r-{source[-8:]}", EventPattern=json.dumps({"source": [source]}))
    events.put_targets(Rule=f"r-{source[-8:]}", Targets=[{"Id": "q", "Arn": queue_arn}])
    definition = {"StartAt": "Emit", "States": {"Emit": {
        "Type": "Task", "Resource": f"{AWS}events:putEvents", "End": True,
        "Parameters": {"Entries": [{"Source": source, "DetailType": "t", "Detail": {"a": 1},
                                    "Resources": ["arn:aws:s3:::mine"]}]}}}}
    proc = cli("run", definition, tmp_path / "emit", moto_server.endpoint, {},
               env={"UNUM_ASL_REGION": "eu-west-1", "UNUM_ASL_ACCOUNT": "111122223333"})

    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # AWS's result: the entries' EventIds and the failed count
    assert result["FailedEntryCount"] == 0 and set(result["Entries"][0]) == {"EventId"}, result
    messages = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=2).get("Messages", [])
    assert len(messages) == 1
    resources = json.loads(messages[0]["Body"])["resources"]
    assert resources[0] == "arn:aws:s3:::mine" and len(resources) == 3, resources
    assert resources[1].startswith("arn:aws:states:eu-west-1:111122223333:execution:emit:wf-")
    assert resources[2] == "arn:aws:states:eu-west-1:111122223333:stateMachine:emit"


def test_result_path_under_a_non_object_fails_with_aws_wording(tmp_path: Path) -> None:
    definition = {"StartAt": "Put", "States": {"Put": {"Type": "Pass", "Result": 1, "ResultPath": "$.x.y", "End": True}}}
    proc = cli("run", definition, tmp_path, NO_AWS, {"x": 5})

    assert failure(proc) == 'States.ResultPathMatchFailure: Unable to apply step "y" to input {"x":5}'


def test_a_nested_childs_states_see_their_own_names(tmp_path: Path) -> None:
    """`$$.State.Name` in a `.sync` child (compiled as `Task.State`) is the name the child gives it,
    in a Map iteration inside the child too."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "Child.asl.json").write_text(json.dumps({"StartAt": "Each", "States": {
        "Each": {"Type": "Map", "ItemsPath": "$.items", "ResultPath": "$.inner", "Next": "Name",
                 "ItemProcessor": {"StartAt": "Item", "States": {
                     "Item": {"Type": "Pass", "Parameters": {"s.$": "$$.State.Name"}, "End": True}}}},
        "Name": {"Type": "Pass", "Parameters": {"s.$": "$$.State.Name", "inner.$": "$.inner"}, "End": True}}}))
    definition = {"StartAt": "Run", "States": {"Run": {
        "Type": "Task", "Resource": f"{AWS}states:startExecution.sync:2", "End": True, "OutputPath": "$.Output",
        "Parameters": {"StateMachineArn": "Child", "Input": {"items": [1]}}}}}
    proc = cli("run", definition, tmp_path, NO_AWS, {})

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"s": "Name", "inner": [{"s": "Item"}]}
