"""GetExecutionHistory through `serve`, compared with the histories Step Functions writes.

Each machine of tests/serve_histories runs on a real server (tests/support/serve.py) and its
history, read with boto3 and as the raw JSON on the wire, is compared event by event with the
AWS history in the fixture: types, ids, `previousEventId`, details members and values. Every
event read raw is checked against botocore's service model (`assert_modeled`): no member the
model lacks, every required member there, each of the model's type.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import ROLE, client, serving, wait_ended

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "serve_histories"
LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:"


# ---- the model check ----------------------------------------------------------------------------

def model_errors(value: Any, shape: Any, where: str) -> list[str]:
    """What in `value` (decoded JSON) does not fit botocore shape `shape`: unknown or missing
    members, wrong types (timestamps as JSON numbers, as AWS JSON 1.0 sends them)."""
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{where}: expected an object, found {value!r}"]
        errors = [f"{where}.{k}: not in the model's {shape.name}" for k in value if k not in shape.members]
        errors += [f"{where}.{k}: required by {shape.name}, missing" for k in shape.required_members if k not in value]
        for key, member in shape.members.items():
            if key in value:
                errors += model_errors(value[key], member, f"{where}.{key}")
        return errors
    if kind == "map":
        if not isinstance(value, dict):
            return [f"{where}: expected a map, found {value!r}"]
        return [e for k, v in value.items() for e in model_errors(v, shape.value, f"{where}[{k}]")]
    if kind == "list":
        if not isinstance(value, list):
            return [f"{where}: expected a list"]
        return [e for i, v in enumerate(value) for e in model_errors(v, shape.member, f"{where}[{i}]")]
    expected: dict[str, tuple[type, ...]] = {"string": (str,), "long": (int,), "integer": (int,),
                                             "boolean": (bool,), "timestamp": (int, float), "double": (int, float)}
    ok = isinstance(value, expected.get(kind, (object,))) and not (kind in ("long", "integer") and isinstance(value, bool))
    if kind == "string" and ok and shape.enum and value not in shape.enum:
        return [f"{where}: {value!r} is not one of {shape.name}'s values"]
    return [] if ok else [f"{where}: expected {kind}, found {value!r}"]


def details_member(event_type: str) -> str:
    """The HistoryEvent member that holds an event type's details, as the model names them."""
    if event_type.endswith("StateEntered"):
        return "stateEnteredEventDetails"
    if event_type.endswith("StateExited"):
        return "stateExitedEventDetails"
    return event_type[0].lower() + event_type[1:] + "EventDetails"


def assert_modeled(events: list[dict[str, Any]]) -> None:
    """Every event fits the model's HistoryEvent, and its details are under its type's member."""
    import botocore.session

    shape = botocore.session.get_session().get_service_model("stepfunctions").shape_for("HistoryEvent")
    errors = [e for i, event in enumerate(events) for e in model_errors(event, shape, f"events[{i}]")]
    for event in events:
        extra = [k for k in event if k.endswith("EventDetails") and k != details_member(event["type"])]
        errors += [f"event {event['id']} ({event['type']}): details under {k}" for k in extra]
    assert not errors, "\n".join(errors)


def test_the_model_check_refuses_what_the_model_lacks() -> None:
    bad = [{"timestamp": 1.0, "type": "PassStateEntered", "id": 2, "previousEventId": 0,
            "stateEnteredEventDetails": {"input": "{}", "name": "P", "inputs": "x"}},
           {"timestamp": 1.0, "type": "NoSuchEvent", "id": 3, "previousEventId": 2,
            "lambdaFunctionSucceededEventDetails": {"output": 5}},
           {"timestamp": 1.0, "type": "TaskScheduled", "id": 4, "previousEventId": 3,
            "taskScheduledEventDetails": {"resource": "invoke"}}]
    with pytest.raises(AssertionError) as refused:
        assert_modeled(bad)
    for found in ("inputs: not in the model", "'NoSuchEvent' is not one of", "output: expected string",
                  "details under lambdaFunctionSucceededEventDetails", "resourceType: required"):
        assert found in str(refused.value)


# ---- running a machine ---------------------------------------------------------------------------

def write_functions(root: Path, functions: dict[str, str]) -> Path:
    """One folder per function, whose handler returns the expression of `event` it is given."""
    folder = root / "functions"
    folder.mkdir(exist_ok=True)
    for name, expression in functions.items():
        (folder / name).mkdir(exist_ok=True)
        (folder / name / "app.py").write_text(f"def handler(event, context):\n    return {expression}\n")
    return folder


def raw_history(url: str, execution: str, **params: Any) -> list[dict[str, Any]]:
    """GetExecutionHistory as the JSON on the wire (boto3 drops members its model lacks)."""
    body = json.dumps({"executionArn": execution, **params}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "X-Amz-Target": "AWSStepFunctions.GetExecutionHistory", "Content-Type": "application/x-amz-json-1.0"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        events: list[dict[str, Any]] = json.loads(answer.read())["events"]
    return events


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Any, str, Path]]:
    functions = write_functions(tmp_path, {"F": "{'v': 2}", "G": "{'ok': True}", "Double": "event * 2",
                                           "Big": "{'blob': 'x' * 4000}"})
    mark = tmp_path / "mark"
    for name, source in {
        "Flaky": (f"from pathlib import Path\nMARK = Path({str(mark)!r})\n"
                  "def handler(event, context):\n    if not MARK.exists():\n        MARK.write_text('x')\n"
                  "        raise RuntimeError('first call fails')\n    return {'fixed': True}\n"),
        "Boom": "def handler(event, context):\n    raise ValueError('always')\n",
    }.items():
        (functions / name).mkdir()
        (functions / name / "app.py").write_text(source)
    with serving(tmp_path, functions=functions) as running:
        yield client(running.url), running.url, tmp_path


def run(sfn: Any, definition: dict[str, Any], input_text: str, name: str = "m", **start: Any) -> str:
    """Create (or reuse) machine `name` and run one execution to its end; its ARN."""
    arn = sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=ROLE)["stateMachineArn"]
    execution: str = sfn.start_execution(stateMachineArn=start.pop("arn", arn), input=input_text, **start)["executionArn"]
    assert wait_ended(sfn, execution, timeout=60)["status"] != "RUNNING"
    return execution


# ---- against AWS's histories ------------------------------------------------------------------

def _values(event: dict[str, Any], values_differ: list[str]) -> dict[str, Any]:
    """An event's details with JSON text decoded (JSON's spacing is not part of the value)."""
    details = dict(event.get(details_member(event["type"]), {}))
    for key in ("input", "output", "parameters"):
        if key in details:
            details[key] = json.loads(details[key])
    if event["type"] in values_differ and "output" in details:  # per-call metadata on AWS
        details["output"] = {k: details["output"][k] for k in ("Payload", "StatusCode")}
    return details


def _follows(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each event as (type, name/index, the event it follows: type, name/index), sorted: a
    history compared this way is the same whichever order concurrent branches took."""
    by_id = {e["id"]: e for e in events}

    def label(e: dict[str, Any] | None) -> tuple[Any, ...]:
        if e is None:
            return ("-",)
        d = e.get(details_member(e["type"]), {})
        return (e["type"], d.get("name"), d.get("index"), d.get("input"))

    return sorted((label(e), label(by_id.get(e["previousEventId"])), tuple(sorted(e.get(details_member(e["type"]), {}))))
                  for e in events)


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_the_history_is_the_one_step_functions_writes(server: tuple[Any, str, Path], fixture: str) -> None:
    sfn, url, root = server
    aws = json.loads((FIXTURES / fixture).read_text())
    write_functions(root, aws["functions"])
    execution = run(sfn, aws["definition"], aws["input"])
    ours = raw_history(url, execution)
    assert_modeled(ours)
    assert [e["id"] for e in ours] == list(range(1, len(ours) + 1))
    assert [e["type"] for e in ours if e["type"].startswith("Execution")] == \
        [e["type"] for e in aws["events"] if e["type"].startswith("Execution")]
    if aws["order"] == "exact":
        assert [e["type"] for e in ours] == [e["type"] for e in aws["events"]]
        for mine, theirs in zip(ours, aws["events"], strict=True):
            assert (mine["id"], mine["previousEventId"]) == (theirs["id"], theirs["previousEventId"]), mine
            assert _values(mine, aws.get("values_differ", [])) == _values(theirs, aws.get("values_differ", [])), mine
    else:
        assert sorted(e["type"] for e in ours) == sorted(e["type"] for e in aws["events"])
        normal = [{**e, **({details_member(e["type"]): {k: v for k, v in e[details_member(e["type"])].items()
                                                       if k != "input"}} if details_member(e["type"]) in e else {})}
                  for e in ours]
        expected = [{**e, **({details_member(e["type"]): {k: v for k, v in e[details_member(e["type"])].items()
                                                         if k != "input"}} if details_member(e["type"]) in e else {})}
                    for e in aws["events"]]
        assert _follows(normal) == _follows(expected)
        theirs_by_label = sorted(json.dumps(_values(e, []), sort_keys=True) for e in aws["events"])
        assert sorted(json.dumps(_values(e, []), sort_keys=True) for e in ours) == theirs_by_label
    assert all(e["previousEventId"] < e["id"] for e in ours)
    parsed = sfn.get_execution_history(executionArn=execution)["events"]  # boto3 reads it as AWS's
    assert [e["type"] for e in parsed] == [e["type"] for e in ours]


# ---- what the fixtures do not cover ------------------------------------------------------------------

def test_a_retried_lambda_shows_each_attempt_and_a_caught_failure_exits_the_task(server: tuple[Any, str, Path]) -> None:
    sfn, url, _ = server
    definition = {"StartAt": "Try", "States": {
        "Try": {"Type": "Task", "Resource": LAMBDA + "Flaky", "Retry": [{"ErrorEquals": ["RuntimeError"],
                                                                          "IntervalSeconds": 1, "MaxAttempts": 2}],
                "Next": "Fails"},
        "Fails": {"Type": "Task", "Resource": LAMBDA + "Boom", "Catch": [{"ErrorEquals": ["States.ALL"],
                                                                          "ResultPath": "$.error", "Next": "After"}],
                  "End": True},
        "After": {"Type": "Pass", "End": True}}}
    events = raw_history(url, run(sfn, definition, "{}"))
    assert_modeled(events)
    assert [e["type"] for e in events] == [
        "ExecutionStarted", "TaskStateEntered",
        "LambdaFunctionScheduled", "LambdaFunctionStarted", "LambdaFunctionFailed",
        "LambdaFunctionScheduled", "LambdaFunctionStarted", "LambdaFunctionSucceeded", "TaskStateExited",
        "TaskStateEntered", "LambdaFunctionScheduled", "LambdaFunctionStarted", "LambdaFunctionFailed",
        "TaskStateExited", "PassStateEntered", "PassStateExited", "ExecutionSucceeded"]
    first_failure = events[4]["lambdaFunctionFailedEventDetails"]
    assert first_failure["error"] == "RuntimeError" and "first call fails" in first_failure["cause"]
    assert json.loads(events[7]["lambdaFunctionSucceededEventDetails"]["output"]) == {"fixed": True}
    caught = json.loads(events[13]["stateExitedEventDetails"]["output"])
    assert caught["error"]["Error"] == "ValueError" and caught["fixed"] is True
    assert [e["previousEventId"] for e in events] == [0, 0, *range(2, len(events))]


def test_a_fail_state_ends_the_history_with_its_error(server: tuple[Any, str, Path]) -> None:
    sfn, url, _ = server
    definition = {"StartAt": "P", "States": {"P": {"Type": "Pass", "Next": "No"},
                                             "No": {"Type": "Fail", "Error": "Order.Rejected", "Cause": "no stock"}}}
    events = raw_history(url, run(sfn, definition, '{"n": 1}'))
    assert_modeled(events)
    assert [e["type"] for e in events] == ["ExecutionStarted", "PassStateEntered", "PassStateExited",
                                           "FailStateEntered", "ExecutionFailed"]
    assert events[-1]["executionFailedEventDetails"] == {"error": "Order.Rejected", "cause": "no stock"}
    assert events[-1]["previousEventId"] == 4


def test_without_execution_data_no_input_or_output_is_sent(server: tuple[Any, str, Path]) -> None:
    sfn, url, root = server
    aws = json.loads((FIXTURES / "lambda-invoke-choice.json").read_text())
    execution = run(sfn, aws["definition"], aws["input"])
    full = raw_history(url, execution)
    bare = raw_history(url, execution, includeExecutionData=False)
    assert_modeled(bare)
    assert [e["type"] for e in bare] == [e["type"] for e in full]
    data = ("input", "inputDetails", "output", "outputDetails", "assignedVariables", "assignedVariablesDetails")
    for event in bare:
        details = event.get(details_member(event["type"]), {})
        assert not set(details) & set(data), event
    assert bare[1]["stateEnteredEventDetails"] == {"name": "L"}
    assert bare[0]["executionStartedEventDetails"] == {"roleArn": ROLE}
    boto = sfn.get_execution_history(executionArn=execution, includeExecutionData=False)["events"]
    assert "input" not in boto[0]["executionStartedEventDetails"]


def test_execution_started_names_the_role_version_and_alias(server: tuple[Any, str, Path]) -> None:
    sfn, url, _ = server
    definition = {"StartAt": "P", "States": {"P": {"Type": "Pass", "Assign": {"seen.$": "$.n"}, "End": True}}}
    arn = sfn.create_state_machine(name="v", definition=json.dumps(definition), roleArn=ROLE,
                                   publish=True)["stateMachineArn"]
    version = sfn.list_state_machine_versions(stateMachineArn=arn)["stateMachineVersions"][0]["stateMachineVersionArn"]
    alias = sfn.create_state_machine_alias(name="live", routingConfiguration=[
        {"stateMachineVersionArn": version, "weight": 100}])["stateMachineAliasArn"]
    by_alias = sfn.start_execution(stateMachineArn=alias, input='{"n": 7}')["executionArn"]
    assert wait_ended(sfn, by_alias)["status"] == "SUCCEEDED"
    events = raw_history(url, by_alias)
    assert_modeled(events)
    assert events[0]["executionStartedEventDetails"] == {
        "input": '{"n": 7}', "inputDetails": {"truncated": False}, "roleArn": ROLE,
        "stateMachineAliasArn": alias, "stateMachineVersionArn": version}
    exited = events[2]["stateExitedEventDetails"]
    assert exited["assignedVariables"] == {"seen": "7"} and exited["assignedVariablesDetails"] == {"truncated": False}
    by_version = sfn.start_execution(stateMachineArn=version, input='{"n": 8}')["executionArn"]
    wait_ended(sfn, by_version)
    started = raw_history(url, by_version)[0]["executionStartedEventDetails"]
    assert started["stateMachineVersionArn"] == version and "stateMachineAliasArn" not in started


def test_a_large_result_that_was_not_recorded_is_left_out_not_guessed(server: tuple[Any, str, Path]) -> None:
    sfn, url, _ = server
    definition = {"StartAt": "B", "States": {
        "B": {"Type": "Task", "Resource": LAMBDA + "Big", "ResultSelector": {"n.$": "States.ArrayLength(States.StringSplit($.blob, 'y'))"},
              "ResultPath": "$.big", "Next": "P"},
        "P": {"Type": "Pass", "Next": "D"},
        "D": {"Type": "Task", "Resource": LAMBDA + "Double", "InputPath": "$.big.n", "End": True}}}
    events = raw_history(url, run(sfn, definition, '{"k": 1}'))
    assert_modeled(events)
    types = [e["type"] for e in events]
    big = events[types.index("LambdaFunctionSucceeded")]
    assert big.get("lambdaFunctionSucceededEventDetails", {}) == {}  # over 2 KiB and selected: not recorded
    exited = events[types.index("TaskStateExited")]["stateExitedEventDetails"]
    assert exited == {"name": "B"}
    assert "PassStateEntered" not in types  # the Pass ran in B's invocation, after the unknown result
    last_task = [e for e in events if e["type"] == "TaskStateEntered"][-1]["stateEnteredEventDetails"]
    assert json.loads(last_task["input"]) == {"k": 1, "big": {"n": 1}}  # the next invocation's input is known
    assert types[-1] == "ExecutionSucceeded"


def test_a_small_selected_result_is_recorded_and_shown_whole(server: tuple[Any, str, Path]) -> None:
    sfn, url, _ = server
    definition = {"StartAt": "L", "States": {
        "L": {"Type": "Task", "Resource": LAMBDA + "F", "ResultSelector": {"w.$": "$.v"}, "ResultPath": "$.r",
              "Next": "P"},
        "P": {"Type": "Pass", "Parameters": {"got.$": "$.r.w"}, "End": True}}}
    events = raw_history(url, run(sfn, definition, "{}"))
    assert_modeled(events)
    assert [e["type"] for e in events] == [
        "ExecutionStarted", "TaskStateEntered", "LambdaFunctionScheduled", "LambdaFunctionStarted",
        "LambdaFunctionSucceeded", "TaskStateExited", "PassStateEntered", "PassStateExited", "ExecutionSucceeded"]
    assert json.loads(events[4]["lambdaFunctionSucceededEventDetails"]["output"]) == {"v": 2}
    assert json.loads(events[5]["stateExitedEventDetails"]["output"]) == {"r": {"w": 2}}
    assert json.loads(events[7]["stateExitedEventDetails"]["output"]) == {"got": 2}


def test_an_uncaught_task_failure_ends_the_history_after_the_lambdas_failure(server: tuple[Any, str, Path]) -> None:
    sfn, url, _ = server
    definition = {"StartAt": "X", "States": {"X": {"Type": "Task", "Resource": LAMBDA + "Boom", "End": True}}}
    events = raw_history(url, run(sfn, definition, "{}"))
    assert_modeled(events)
    assert [e["type"] for e in events] == ["ExecutionStarted", "TaskStateEntered", "LambdaFunctionScheduled",
                                           "LambdaFunctionStarted", "LambdaFunctionFailed", "ExecutionFailed"]
    failed = events[-1]["executionFailedEventDetails"]
    assert failed["error"] == "ValueError" and json.loads(failed["cause"])["errorMessage"] == "always"
    assert events[4]["lambdaFunctionFailedEventDetails"] == failed
    assert events[-1]["previousEventId"] == 5


def test_a_redriven_execution_shows_its_failure_the_redrive_and_the_state_run_again(server: tuple[Any, str, Path]) -> None:
    sfn, url, _ = server
    definition = {"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": LAMBDA + "F", "Next": "B"},
                                             "B": {"Type": "Task", "Resource": LAMBDA + "Flaky", "End": True}}}
    execution = run(sfn, definition, "{}")
    assert sfn.describe_execution(executionArn=execution)["status"] == "FAILED"
    sfn.redrive_execution(executionArn=execution)
    assert wait_ended(sfn, execution)["status"] == "SUCCEEDED"
    events = raw_history(url, execution)
    assert_modeled(events)
    types = [e["type"] for e in events]
    at = types.index("ExecutionRedriven")
    assert types[at - 2:at + 2] == ["LambdaFunctionFailed", "ExecutionFailed", "ExecutionRedriven", "TaskStateEntered"]
    assert events[at]["executionRedrivenEventDetails"] == {"redriveCount": 1}
    assert events[at]["previousEventId"] == at and events[at + 1]["previousEventId"] == at + 1
    assert events[at + 1]["stateEnteredEventDetails"]["name"] == "B"
    assert types[-3:] == ["LambdaFunctionSucceeded", "TaskStateExited", "ExecutionSucceeded"]
