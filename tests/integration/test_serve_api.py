"""`serve` through AWS's own boto3 `stepfunctions` client over loopback: each operation, and the
errors AWS documents for it, as botocore raises them (`ClientError` with AWS's code). Every answer
a test's client receives is also checked against the operation's output shape in botocore's model
(`shape_problems`: required members present, each member of its type, timestamps parsed as
datetimes), so a field unum answers wrongly fails the test that called it."""

from __future__ import annotations

import datetime as dt
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
        "Boom": "def handler(event, context):\n    raise ValueError('boom')\n",
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


_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "long": (int,), "boolean": (bool,),
                                       "double": (int, float), "float": (int, float), "timestamp": (dt.datetime,),
                                       "list": (list,), "structure": (dict,), "map": (dict,), "blob": (bytes,)}


def shape_problems(shape: Any, value: Any, where: str) -> list[str]:
    """How `value` (a parsed answer) departs from `shape` (botocore's output shape): a missing
    required member, a member of another type (a timestamp that is not a datetime)."""
    kind = shape.type_name
    if not isinstance(value, _TYPES.get(kind, (object,))) or (kind in ("integer", "long") and isinstance(value, bool)):
        return [f"{where}: {kind} expected, found {type(value).__name__} {value!r:.60}"]
    problems: list[str] = []
    if kind == "structure":
        problems += [f"{where}.{name}: required, missing" for name in shape.required_members if name not in value]
        for name, member in shape.members.items():
            if name in value:
                problems += shape_problems(member, value[name], f"{where}.{name}")
    elif kind == "list":
        for i, item in enumerate(value):
            problems += shape_problems(shape.member, item, f"{where}[{i}]")
    elif kind == "map":
        for key, item in value.items():
            problems += shape_problems(shape.value, item, f"{where}.{key}")
    return problems


def checked(sfn: Any, problems: list[str]) -> Any:
    """`sfn` with every answer it parses checked by `shape_problems` into `problems`."""
    def check(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        if "Error" not in parsed and model.output_shape is not None:
            answer = {k: v for k, v in parsed.items() if k != "ResponseMetadata"}
            problems.extend(shape_problems(model.output_shape, answer, model.name))

    sfn.meta.events.register("after-call.sfn.*", check)
    return sfn


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    problems: list[str] = []
    with serving(tmp_path, functions=write_functions(tmp_path)) as server:
        # TestState and StartSyncExecution are sent to `sync-<host>` unless the prefix is turned off
        yield checked(client(server.url, inject_host_prefix=False), problems), tmp_path
    assert not problems, problems


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


def test_describe_and_redrive_agree_on_whether_a_failed_execution_can_be_redriven(api: tuple[Any, Path]) -> None:
    """DescribeExecution's redriveStatus is RedriveExecution's answer told in advance: REDRIVABLE
    when the redrive is accepted, NOT_REDRIVABLE with the reason RedriveExecution refuses with
    (a failed Task, a failed Map item, a success)."""
    sfn, _ = api
    item_fails = {"StartAt": "M", "States": {"M": {"Type": "Map", "ItemsPath": "$.items", "End": True, "ItemProcessor": {
        "StartAt": "B", "States": {"B": {"Type": "Task", "Resource": LAMBDA + "Boom", "End": True}}}}}}
    for name, definition in {"task": chain("Inc", "Boom"), "item": json.dumps(item_fails)}.items():
        arn = sfn.create_state_machine(name=name, definition=definition, roleArn=ROLE)["stateMachineArn"]
        execution = sfn.start_execution(stateMachineArn=arn, name="f", input='{"items": [1, 2]}')["executionArn"]
        failed = wait_ended(sfn, execution)
        assert (failed["status"], failed["error"]) == ("FAILED", "ValueError") and "output" not in failed, name
        assert json.loads(failed["cause"])["errorMessage"] == "boom"
        assert sfn.get_execution_history(executionArn=execution)["events"][-1]["executionFailedEventDetails"] == \
            {"error": "ValueError", "cause": failed["cause"]}
        assert [e["name"] for e in sfn.list_executions(stateMachineArn=arn, statusFilter="FAILED")["executions"]] == \
            ["f"]
        assert sfn.list_executions(stateMachineArn=arn, statusFilter="SUCCEEDED")["executions"] == []
        if failed["redriveStatus"] == "REDRIVABLE":
            assert "redriveStatusReason" not in failed, name
            assert sfn.redrive_execution(executionArn=execution)["redriveDate"].year >= 2026, name
            assert wait_ended(sfn, execution)["redriveCount"] == 1, name
        else:
            assert failed["redriveStatus"] == "NOT_REDRIVABLE" and failed["redriveStatusReason"], name
            with pytest.raises(ClientError) as caught:
                sfn.redrive_execution(executionArn=execution)
            refusal = caught.value.response["Error"]
            assert refusal["Code"] == "ExecutionNotRedrivable", name
            assert refusal["Message"] == failed["redriveStatusReason"], name
    ok = sfn.create_state_machine(name="ok", definition=chain("Inc"), roleArn=ROLE)["stateMachineArn"]
    succeeded = sfn.start_execution(stateMachineArn=ok, name="s")["executionArn"]
    assert wait_ended(sfn, succeeded)["redriveStatus"] == "NOT_REDRIVABLE"
    assert error_code(sfn.redrive_execution, executionArn=succeeded) == "ExecutionNotRedrivable"


def test_send_task_failure_fails_the_waiting_task_once(api: tuple[Any, Path]) -> None:
    sfn, root = api
    definition = {"StartAt": "Ask", "States": {"Ask": {
        "Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token"}}, "End": True}}}
    arn = sfn.create_state_machine(name="ask", definition=json.dumps(definition), roleArn=ROLE)["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, name="a")["executionArn"]
    deadline = time.monotonic() + 60
    while not (root / "token").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    token = (root / "token").read_text()
    assert error_code(sfn.send_task_heartbeat, taskToken="garbage") == "InvalidToken"
    code = "TaskDoesNotExist"
    while code == "TaskDoesNotExist" and time.monotonic() < deadline:  # until the wait is committed
        code = answer_code(sfn.send_task_failure, taskToken=token, error="Denied", cause="by a person")
        time.sleep(0.05)
    assert code == "OK"
    done = wait_ended(sfn, execution)
    assert (done["status"], done["error"], done["cause"]) == ("FAILED", "Denied", "by a person")
    assert error_code(sfn.send_task_failure, taskToken=token, error="Again") == "TaskTimedOut"
    assert error_code(sfn.send_task_heartbeat, taskToken=token) == "TaskTimedOut"
    assert sfn.describe_execution(executionArn=execution)["error"] == "Denied"  # the first completion stands


def answer_code(call: Any, **kwargs: Any) -> str:
    """"OK" when the call succeeds, else AWS's error code."""
    try:
        call(**kwargs)
    except ClientError as exc:
        return str(exc.response["Error"]["Code"])
    return "OK"


def test_aliases_are_listed_by_machine_and_by_version_and_a_repeated_start_keeps_its_version(
        api: tuple[Any, Path]) -> None:
    sfn, _ = api
    wait = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 2, "Next": "S0"},
                                       **json.loads(chain("Inc"))["States"]}}
    created = sfn.create_state_machine(name="r", definition=json.dumps(wait), roleArn=ROLE, publish=True)
    v1 = created["stateMachineVersionArn"]
    sfn.update_state_machine(stateMachineArn=created["stateMachineArn"], definition=json.dumps(
        {**wait, "States": {**wait["States"], "W": {"Type": "Wait", "Seconds": 2, "Next": "S0"},
                            "S0": {"Type": "Task", "Resource": LAMBDA + "Inc", "Next": "S1"},
                            "S1": {"Type": "Task", "Resource": LAMBDA + "Inc", "End": True}}}), publish=True)
    v2 = MACHINE + "r:2"
    assert error_code(sfn.create_state_machine_alias, name="twice", routingConfiguration=[
        {"stateMachineVersionArn": v1, "weight": 50}, {"stateMachineVersionArn": v1, "weight": 50}]) == \
        "ValidationException"
    split = sfn.create_state_machine_alias(name="split", routingConfiguration=[
        {"stateMachineVersionArn": v1, "weight": 50}, {"stateMachineVersionArn": v2, "weight": 50}])["stateMachineAliasArn"]
    only2 = sfn.create_state_machine_alias(name="only2", routingConfiguration=[
        {"stateMachineVersionArn": v2, "weight": 100}])["stateMachineAliasArn"]
    def listed(arn: str) -> list[str]:
        return [a["stateMachineAliasArn"] for a in sfn.list_state_machine_aliases(stateMachineArn=arn)
                ["stateMachineAliases"]]
    assert sorted(listed(created["stateMachineArn"])) == sorted([split, only2])
    assert listed(v1) == [split] and sorted(listed(v2)) == sorted([split, only2])
    first = sfn.start_execution(stateMachineArn=split, name="same", input='{"n": 0}')
    version = sfn.describe_execution(executionArn=first["executionArn"])["stateMachineVersionArn"]
    again = sfn.start_execution(stateMachineArn=split, name="same", input='{"n": 0}')  # while it waits
    assert (again["executionArn"], again["startDate"]) == (first["executionArn"], first["startDate"])
    assert sfn.describe_execution(executionArn=again["executionArn"])["stateMachineVersionArn"] == version
    done = wait_ended(sfn, first["executionArn"])
    assert json.loads(done["output"]) == {"n": {v1: 1, v2: 2}[version]}
    assert error_code(sfn.start_execution, stateMachineArn=split, name="same", input='{"n": 0}') == \
        "ExecutionAlreadyExists"
    direct = sfn.start_execution(stateMachineArn=v1, name="direct")["executionArn"]
    assert [e["name"] for e in sfn.list_executions(stateMachineArn=only2)["executions"]] == []
    assert [e["name"] for e in sfn.list_executions(stateMachineArn=split)["executions"]] == ["same"]
    assert "direct" in [e["name"] for e in sfn.list_executions(stateMachineArn=v1)["executions"]]
    names = [e["name"] for page in sfn.get_paginator("list_executions").paginate(
        stateMachineArn=created["stateMachineArn"], PaginationConfig={"PageSize": 1}) for e in page["executions"]]
    assert names == ["direct", "same"]  # newest first, one a page
    wait_ended(sfn, direct)


def documented() -> dict[str, str]:
    """docs/api.md's table of Step Functions operations: operation -> supported / different / unsupported."""
    text = (Path(__file__).resolve().parents[2] / "docs/api.md").read_text()
    table = text[text.index("## Step Functions operations"):text.index("## Lambda durable-execution API")]
    rows: dict[str, str] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1] in ("supported", "different", "unsupported"):
            rows.update({name.strip(): cells[1] for name in cells[0].split("/")})
    return rows


def test_every_operation_of_the_model_is_in_the_docs_table_as_served(api: tuple[Any, Path]) -> None:
    """All 37 operations of botocore's model have a row in docs/api.md, and a row says
    supported or different exactly when unum serves the operation."""
    sfn, _ = api
    from builder.serve.states_api import StatesApi

    operations = set(sfn.meta.service_model.operation_names)
    rows = documented()
    assert len(operations) == 37 and set(rows) == operations
    served = {name.removeprefix("op_") for name in dir(StatesApi) if name.startswith("op_")}
    assert {op for op, status in rows.items() if status != "unsupported"} == served & operations


UNSUPPORTED_CALLS: dict[str, dict[str, Any]] = {
    "GetActivityTask": {"activityArn": "arn:aws:states:us-east-1:123456789012:activity:work"},
    "DescribeMapRun": {"mapRunArn": "arn:aws:states:us-east-1:123456789012:mapRun:m/Map:run"},
    "ListMapRuns": {"executionArn": "arn:aws:states:us-east-1:123456789012:execution:m:e"},
    "UpdateMapRun": {"mapRunArn": "arn:aws:states:us-east-1:123456789012:mapRun:m/Map:run", "maxConcurrency": 1},
    "TestState": {"definition": json.dumps({"Type": "Pass", "End": True}), "roleArn": ROLE},
}


def test_operations_documented_unsupported_answer_unsupported_operation(api: tuple[Any, Path]) -> None:
    sfn, _ = api
    sfn.create_activity(name="work")
    unsupported = [op for op, status in documented().items() if status == "unsupported"]
    assert set(unsupported) <= set(UNSUPPORTED_CALLS)  # none left since Map Runs (test_serve_map_runs)
    for operation in unsupported:
        call = getattr(sfn, sfn.meta.method_to_api_mapping and {v: k for k, v in sfn.meta.method_to_api_mapping.items()}
                       [operation])
        assert error_code(call, **UNSUPPORTED_CALLS[operation]) == "UnsupportedOperation", operation
    assert error_code(sfn.list_executions, mapRunArn=UNSUPPORTED_CALLS["DescribeMapRun"]["mapRunArn"]) == \
        "ResourceNotFound"  # no such Map Run (tests/integration/test_serve_map_runs.py)
