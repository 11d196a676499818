"""`serve` through AWS's own boto3 `stepfunctions` client over loopback: each operation, and the
errors AWS documents for it, as botocore raises them (`ClientError` with AWS's code).

NOTE TO THE ENGINEER ON SERVE CONFORMANCE: the lead wrote this file, tests/integration/test_serve_robust.py,
test_serve_docs.py, docs/api.md and README's Step Functions API section while you were delayed: extend
and correct them (precise edits), do not replace them; then remove this note."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.serve import ROLE, client, serving, wait_ended

pytestmark = pytest.mark.integration

LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:"
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:"


def write_functions(root: Path) -> Path:
    """Inc (n + 1), Flaky (fails until its marker file exists: it makes it on the first call),
    Ask (hands its task token to a file, for the task-token calls)."""
    functions = root / "functions"
    for name, source in {
        "Inc": "def handler(event, context):\n    return {'n': event.get('n', 0) + 1}\n",
        "Flaky": ("from pathlib import Path\nMARK = Path(%r)\n"
                  "def handler(event, context):\n    if not MARK.exists():\n        MARK.write_text('x')\n"
                  "        raise RuntimeError('first call fails')\n    return {'fixed': True}\n" % str(root / "mark")),
        "Ask": ("from pathlib import Path\n"
                "def handler(event, context):\n    Path(%r).write_text(event['token'])\n    return {}\n"
                % str(root / "token")),
    }.items():
        (functions / name).mkdir(parents=True)
        (functions / name / "app.py").write_text(source)
    return functions


def chain(*tasks: str, extra: dict[str, Any] | None = None) -> str:
    states: dict[str, Any] = {}
    for i, name in enumerate(tasks):
        states[f"S{i}"] = {"Type": "Task", "Resource": LAMBDA + name,
                           **({"Next": f"S{i + 1}"} if i + 1 < len(tasks) else {"End": True})}
    return json.dumps({"StartAt": "S0", "States": states, **(extra or {})})


def error_code(call: Any, **kwargs: Any) -> str:
    with pytest.raises(ClientError) as caught:
        call(**kwargs)
    return str(caught.value.response["Error"]["Code"])


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    with serving(tmp_path, functions=write_functions(tmp_path)) as server:
        yield client(server.url), tmp_path


def test_a_state_machine_is_created_described_listed_updated_and_deleted(api: tuple[Any, Path]) -> None:
    sfn, _ = api
    created = sfn.create_state_machine(name="inc", definition=chain("Inc"), roleArn=ROLE,
                                       tags=[{"key": "team", "value": "a"}])
    arn = created["stateMachineArn"]
    assert arn == MACHINE + "inc" and created["creationDate"].year >= 2026
    described = sfn.describe_state_machine(stateMachineArn=arn)
    assert (described["name"], described["status"], described["type"], described["roleArn"]) == \
        ("inc", "ACTIVE", "STANDARD", ROLE)
    assert json.loads(described["definition"]) == json.loads(chain("Inc"))
    assert [m["name"] for m in sfn.list_state_machines()["stateMachines"]] == ["inc"]
    assert sfn.list_tags_for_resource(resourceArn=arn)["tags"] == [{"key": "team", "value": "a"}]
    # the same create again is idempotent; another definition under the name is refused
    assert sfn.create_state_machine(name="inc", definition=chain("Inc"), roleArn=ROLE)["stateMachineArn"] == arn
    assert error_code(sfn.create_state_machine, name="inc", definition=chain("Inc", "Inc"),
                      roleArn=ROLE) == "StateMachineAlreadyExists"
    updated = sfn.update_state_machine(stateMachineArn=arn, definition=chain("Inc", "Inc"))
    assert updated["revisionId"] != described["revisionId"]
    assert json.loads(sfn.describe_state_machine(stateMachineArn=arn)["definition"]) == json.loads(chain("Inc", "Inc"))
    sfn.delete_state_machine(stateMachineArn=arn)
    assert error_code(sfn.describe_state_machine, stateMachineArn=arn) == "StateMachineDoesNotExist"


def test_bad_definitions_names_roles_and_arns_get_aws_errors(api: tuple[Any, Path]) -> None:
    sfn, _ = api
    assert error_code(sfn.create_state_machine, name="bad", definition="{not json", roleArn=ROLE) == "InvalidDefinition"
    assert error_code(sfn.create_state_machine, name="bad", definition=json.dumps({"StartAt": "Nowhere", "States": {}}),
                      roleArn=ROLE) == "InvalidDefinition"
    assert error_code(sfn.create_state_machine, name="has space", definition=chain("Inc"), roleArn=ROLE) == "InvalidName"
    assert error_code(sfn.create_state_machine, name="ok", definition=chain("Inc"), roleArn="role") == "InvalidArn"
    assert error_code(sfn.describe_state_machine, stateMachineArn="arn:aws:states:eu-west-1:1:stateMachine:x") == \
        "InvalidArn"
    assert error_code(sfn.describe_execution, executionArn=MACHINE + "x") == "InvalidArn"
    assert error_code(sfn.start_execution, stateMachineArn=MACHINE + "missing") == "StateMachineDoesNotExist"
    valid = sfn.validate_state_machine_definition(definition=chain("Inc"))
    assert valid["result"] == "OK" and valid["diagnostics"] == []
    invalid = sfn.validate_state_machine_definition(definition=json.dumps({"StartAt": "A", "States": {}}))
    assert invalid["result"] == "FAIL" and invalid["diagnostics"][0]["severity"] == "ERROR"


def test_an_execution_runs_to_its_output_and_shows_in_list_and_history(api: tuple[Any, Path]) -> None:
    sfn, _ = api
    arn = sfn.create_state_machine(name="three", definition=chain("Inc", "Inc", "Inc"), roleArn=ROLE)["stateMachineArn"]
    started = sfn.start_execution(stateMachineArn=arn, name="first", input=json.dumps({"n": 1}))
    assert started["executionArn"] == "arn:aws:states:us-east-1:123456789012:execution:three:first"
    done = wait_ended(sfn, started["executionArn"])
    assert done["status"] == "SUCCEEDED" and json.loads(done["output"]) == {"n": 4}
    assert done["stopDate"] >= done["startDate"] and json.loads(done["input"]) == {"n": 1}
    listed = sfn.list_executions(stateMachineArn=arn)["executions"]
    assert [(e["name"], e["status"]) for e in listed] == [("first", "SUCCEEDED")]
    assert sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"] == []
    events = sfn.get_execution_history(executionArn=started["executionArn"])["events"]
    assert events[0]["type"] == "ExecutionStarted" and events[-1]["type"] == "ExecutionSucceeded"
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    backwards = sfn.get_execution_history(executionArn=started["executionArn"], reverseOrder=True)["events"]
    assert [e["id"] for e in backwards] == [e["id"] for e in reversed(events)]
    page = sfn.get_execution_history(executionArn=started["executionArn"], maxResults=2)
    assert [e["id"] for e in page["events"]] == [1, 2] and page["nextToken"]
    rest = sfn.get_execution_history(executionArn=started["executionArn"], maxResults=1000,
                                     nextToken=page["nextToken"])
    assert [e["id"] for e in rest["events"]] == list(range(3, len(events) + 1)) and "nextToken" not in rest
    machine_of = sfn.describe_state_machine_for_execution(executionArn=started["executionArn"])
    assert json.loads(machine_of["definition"]) == json.loads(chain("Inc", "Inc", "Inc"))


def test_start_execution_names_follow_aws_rules(api: tuple[Any, Path]) -> None:
    sfn, _ = api
    arn = sfn.create_state_machine(name="wait", definition=json.dumps(
        {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3, "Next": "T"},
                                    "T": {"Type": "Task", "Resource": LAMBDA + "Inc", "End": True}}}),
        roleArn=ROLE)["stateMachineArn"]
    first = sfn.start_execution(stateMachineArn=arn, name="once", input='{"n": 1}')
    # the same name and input while it runs: the same execution (AWS: idempotent)
    assert sfn.start_execution(stateMachineArn=arn, name="once", input='{"n":1}')["executionArn"] == first["executionArn"]
    assert error_code(sfn.start_execution, stateMachineArn=arn, name="once", input='{"n": 2}') == \
        "ExecutionAlreadyExists"
    assert error_code(sfn.start_execution, stateMachineArn=arn, name="no/slash") == "InvalidName"
    assert error_code(sfn.start_execution, stateMachineArn=arn, name="x" * 81) == "ValidationException"
    assert error_code(sfn.start_execution, stateMachineArn=arn, input="{oops") == "InvalidExecutionInput"
    unnamed = sfn.start_execution(stateMachineArn=arn, input='{"n": 5}')
    assert len(unnamed["executionArn"].rsplit(":", 1)[1]) == 36  # a UUID, as AWS names it
    assert json.loads(wait_ended(sfn, first["executionArn"])["output"]) == {"n": 2}
    assert error_code(sfn.start_execution, stateMachineArn=arn, name="once", input='{"n": 1}') == \
        "ExecutionAlreadyExists"  # ended: AWS refuses the name
    page = sfn.list_executions(stateMachineArn=arn, maxResults=1)
    assert len(page["executions"]) == 1 and page["nextToken"]
    second = sfn.list_executions(stateMachineArn=arn, maxResults=1, nextToken=page["nextToken"])
    assert {page["executions"][0]["name"], second["executions"][0]["name"]} == \
        {"once", unnamed["executionArn"].rsplit(":", 1)[1]}


def test_stop_ends_a_running_execution_once(api: tuple[Any, Path]) -> None:
    sfn, _ = api
    arn = sfn.create_state_machine(name="slow", definition=json.dumps(
        {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 600, "End": True}}}), roleArn=ROLE)["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, name="s")["executionArn"]
    stopped = sfn.stop_execution(executionArn=execution, error="Manual", cause="by the test")
    assert stopped["stopDate"].year >= 2026
    described = sfn.describe_execution(executionArn=execution)
    assert (described["status"], described["error"], described["cause"]) == ("ABORTED", "Manual", "by the test")
    again = sfn.stop_execution(executionArn=execution, error="Other")  # the first ending stands
    assert sfn.describe_execution(executionArn=execution)["error"] == "Manual" and again["stopDate"]
    assert sfn.get_execution_history(executionArn=execution)["events"][-1]["type"] == "ExecutionAborted"
    assert error_code(sfn.stop_execution, executionArn=execution.rsplit(":", 1)[0] + ":nope") == "ExecutionDoesNotExist"


@pytest.mark.xfail(strict=True, reason="a compiled state machine's failing Task commits its failure decision: "
                   "unum_entry.redrive cannot re-run it yet (docs/api.md, RedriveExecution)")
def test_a_failed_execution_is_redriven_from_its_failure(api: tuple[Any, Path]) -> None:
    sfn, _ = api
    arn = sfn.create_state_machine(name="flaky", definition=chain("Inc", "Flaky"), roleArn=ROLE)["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, name="f", input='{"n": 0}')["executionArn"]
    failed = wait_ended(sfn, execution)
    assert failed["status"] == "FAILED" and failed["error"] == "RuntimeError" and failed["redriveStatus"] == "REDRIVABLE"
    redriven = sfn.redrive_execution(executionArn=execution)
    assert redriven["redriveDate"].year >= 2026
    done = wait_ended(sfn, execution)
    assert done["status"] == "SUCCEEDED" and json.loads(done["output"]) == {"fixed": True}
    assert done["redriveCount"] == 1
    assert error_code(sfn.redrive_execution, executionArn=execution) == "ExecutionNotRedrivable"


def test_task_tokens_complete_a_waiting_task_once(api: tuple[Any, Path]) -> None:
    sfn, root = api
    definition = {"StartAt": "Ask", "States": {"Ask": {
        "Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token"}}, "End": True}}}
    arn = sfn.create_state_machine(name="ask", definition=json.dumps(definition), roleArn=ROLE)["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, name="a")["executionArn"]
    token_file = root / "token"
    deadline = time.monotonic() + 60
    while not token_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    token = token_file.read_text()
    sfn.send_task_heartbeat(taskToken=token)
    success = None
    while success is None and time.monotonic() < deadline:  # until the wait is committed
        try:
            sfn.send_task_success(taskToken=token, output=json.dumps({"approved": True}))
            success = True
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "TaskDoesNotExist"
            time.sleep(0.05)
    done = wait_ended(sfn, execution)
    assert done["status"] == "SUCCEEDED" and json.loads(done["output"]) == {"approved": True}
    assert error_code(sfn.send_task_success, taskToken=token, output="{}") == "TaskTimedOut"
    assert error_code(sfn.send_task_failure, taskToken="garbage") == "InvalidToken"
    assert error_code(sfn.send_task_success, taskToken=token, output="{bad") == "InvalidOutput"


def test_versions_and_an_alias_split_new_executions_by_weight(api: tuple[Any, Path]) -> None:
    sfn, _ = api
    created = sfn.create_state_machine(name="v", definition=chain("Inc"), roleArn=ROLE, publish=True)
    v1 = created["stateMachineVersionArn"]
    sfn.update_state_machine(stateMachineArn=created["stateMachineArn"], definition=chain("Inc", "Inc"))
    v2 = sfn.publish_state_machine_version(stateMachineArn=created["stateMachineArn"])["stateMachineVersionArn"]
    assert (v1, v2) == (MACHINE + "v:1", MACHINE + "v:2")
    listed = sfn.list_state_machine_versions(stateMachineArn=created["stateMachineArn"])["stateMachineVersions"]
    assert [x["stateMachineVersionArn"] for x in listed] == [v2, v1]
    assert json.loads(sfn.describe_state_machine(stateMachineArn=v1)["definition"]) == json.loads(chain("Inc"))
    alias = sfn.create_state_machine_alias(name="live", routingConfiguration=[
        {"stateMachineVersionArn": v1, "weight": 50}, {"stateMachineVersionArn": v2, "weight": 50}])
    alias_arn = alias["stateMachineAliasArn"]
    assert alias_arn == MACHINE + "v:live"
    assert error_code(sfn.create_state_machine_alias, name="bad", routingConfiguration=[
        {"stateMachineVersionArn": v1, "weight": 60}]) == "ValidationException"
    count = 400
    arns = [sfn.start_execution(stateMachineArn=alias_arn, name=f"e{i}", input='{"n": 0}')["executionArn"]
            for i in range(count)]
    on_v2 = sum(1 for a in arns if sfn.describe_execution(executionArn=a).get("stateMachineVersionArn") == v2)
    bound = 4 * math.sqrt(count * 0.25)  # four standard deviations of a fair binomial
    assert abs(on_v2 - count / 2) <= bound, on_v2
    first = sfn.describe_execution(executionArn=arns[0])
    assert first["stateMachineAliasArn"] == alias_arn
    # a repeated start of a running or ended name never switches version
    again = wait_ended(sfn, arns[0])
    assert again["stateMachineVersionArn"] == first["stateMachineVersionArn"]
    expected = {v1: 1, v2: 2}[first["stateMachineVersionArn"]]
    assert json.loads(again["output"]) == {"n": expected}
    sfn.update_state_machine_alias(stateMachineAliasArn=alias_arn,
                                   routingConfiguration=[{"stateMachineVersionArn": v2, "weight": 100}])
    assert sfn.describe_state_machine_alias(stateMachineAliasArn=alias_arn)["routingConfiguration"] == \
        [{"stateMachineVersionArn": v2, "weight": 100}]
    assert error_code(sfn.delete_state_machine_version, stateMachineVersionArn=v2) == "ConflictException"
    sfn.delete_state_machine_alias(stateMachineAliasArn=alias_arn)
    assert error_code(sfn.describe_state_machine_alias, stateMachineAliasArn=alias_arn) == "ResourceNotFound"
    sfn.delete_state_machine_version(stateMachineVersionArn=v1)
    assert [x["stateMachineVersionArn"] for x in sfn.list_state_machine_versions(
        stateMachineArn=created["stateMachineArn"])["stateMachineVersions"]] == [v2]


def test_activities_and_tags(api: tuple[Any, Path]) -> None:
    sfn, _ = api
    activity = sfn.create_activity(name="review")["activityArn"]
    assert activity == "arn:aws:states:us-east-1:123456789012:activity:review"
    assert sfn.describe_activity(activityArn=activity)["name"] == "review"
    assert [a["name"] for a in sfn.list_activities()["activities"]] == ["review"]
    sfn.tag_resource(resourceArn=activity, tags=[{"key": "k", "value": "v"}, {"key": "x", "value": "y"}])
    sfn.untag_resource(resourceArn=activity, tagKeys=["x"])
    assert sfn.list_tags_for_resource(resourceArn=activity)["tags"] == [{"key": "k", "value": "v"}]
    sfn.delete_activity(activityArn=activity)
    assert error_code(sfn.describe_activity, activityArn=activity) == "ActivityDoesNotExist"
    assert error_code(sfn.list_tags_for_resource, resourceArn=activity) == "ResourceNotFound"


def test_sync_execution_of_an_express_machine(api: tuple[Any, Path]) -> None:
    sfn, _ = api
    express = sfn.create_state_machine(name="fast", definition=chain("Inc", "Inc"), roleArn=ROLE,
                                       type="EXPRESS")["stateMachineArn"]
    standard = sfn.create_state_machine(name="std", definition=chain("Inc"), roleArn=ROLE)["stateMachineArn"]
    # botocore prefixes StartSyncExecution's host with `sync-`: against 127.0.0.1 that is turned off
    sync = client(sfn.meta.endpoint_url, inject_host_prefix=False)
    answer = sync.start_sync_execution(stateMachineArn=express, input='{"n": 40}')
    assert answer["status"] == "SUCCEEDED" and json.loads(answer["output"]) == {"n": 42}
    assert answer["billingDetails"]["billedDurationInMilliseconds"] >= 0
    assert error_code(sync.start_sync_execution, stateMachineArn=standard) == "StateMachineTypeNotSupported"
