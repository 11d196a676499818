"""The cloud front door's halves over moto's DynamoDB (real wire): StatesApi on the store-backed
registry (builder.serve.store_registry) and the invoker-backed engine (builder.serve.cloud_engine),
reached through the function URL translation (builder.serve.lambda_entry.answer), with the
deployed functions run by an embedded platform over the same DynamoDB table (its invoker stands
for Lambda's async Invoke).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builder.compiler import compile_state_machine
from builder.serve.arns import Arns
from builder.serve.cloud_engine import CloudEngine
from tests.support.entry_calls import MACHINE, ROLE, Api
from builder.serve.registry import Alias, Execution, Machine
from builder.serve.states_api import StatesApi
from builder.serve.store_registry import StoreRegistry
from unum_entry.local.platform import LocalPlatform
from unum_entry.workflow import load_workflow


@pytest.fixture
def deployed(tmp_path: Path, dynamodb_store: Any) -> Iterator[tuple[Api, LocalPlatform]]:
    folder = tmp_path / "workflow"
    compile_state_machine(MACHINE / "statemachine.json", folder, functions=MACHINE / "functions")
    workflow = load_workflow(folder)
    platform = LocalPlatform(workflow, dynamodb_store, workers=2)
    try:
        engine = CloudEngine(dynamodb_store, workflow, platform.invoker)
        registry = StoreRegistry(dynamodb_store, on_repeat=engine.restart)  # as builder.serve.cloud_entry wires it
        yield Api(StatesApi(registry, engine, dynamodb_store, Arns())), platform  # type: ignore[arg-type]
    finally:
        platform.close()


def _until(condition: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s")


def test_create_start_describe_history_stop(deployed: tuple[Api, LocalPlatform]) -> None:
    api, _ = deployed
    definition = (MACHINE / "statemachine.json").read_text()
    created = api.ok("CreateStateMachine", name="greeter", definition=definition, roleArn=ROLE)
    again = api.ok("CreateStateMachine", name="greeter", definition=definition, roleArn=ROLE)
    assert again["creationDate"] == created["creationDate"]  # idempotent, as on AWS
    arn = created["stateMachineArn"]

    started = api.ok("StartExecution", stateMachineArn=arn, name="one", input=json.dumps({"name": "cloud"}))
    described = _until(lambda: (d := api.ok("DescribeExecution", executionArn=started["executionArn"]))
                       ["status"] != "RUNNING" and d)
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"greeting": "hello cloud", "wait": False}
    events = api.ok("GetExecutionHistory", executionArn=started["executionArn"])["events"]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "ExecutionStarted" and kinds[-1] == "ExecutionSucceeded", kinds
    assert "LambdaFunctionSucceeded" in kinds

    held = api.ok("StartExecution", stateMachineArn=arn, name="two", input=json.dumps({"wait": True}))
    _until(lambda: any(e["type"] == "WaitStateEntered" for e in
                       api.ok("GetExecutionHistory", executionArn=held["executionArn"])["events"]))
    assert api.ok("DescribeExecution", executionArn=held["executionArn"])["status"] == "RUNNING"
    assert api.ok("StartExecution", stateMachineArn=arn, name="two",  # idempotent while it runs, as on AWS
                  input=json.dumps({"wait": True}))["executionArn"] == held["executionArn"]
    api.ok("StopExecution", executionArn=held["executionArn"], error="Halt", cause="test")
    stopped = api.ok("DescribeExecution", executionArn=held["executionArn"])
    assert (stopped["status"], stopped["error"]) == ("ABORTED", "Halt")
    listed = api.ok("ListExecutions", stateMachineArn=arn)["executions"]
    assert [(e["name"], e["status"]) for e in listed] == [("two", "ABORTED"), ("one", "SUCCEEDED")]
    assert [m["name"] for m in api.ok("ListStateMachines")["stateMachines"]] == ["greeter"]


def test_a_start_cut_short_is_completed_by_the_repeated_start(deployed: tuple[Api, LocalPlatform]) -> None:
    """The API function died after indexing an execution, before invoking its entry (the client
    sees a timeout and retries): the retried StartExecution invokes it, and it succeeds once."""
    api, _ = deployed
    definition = (MACHINE / "statemachine.json").read_text()
    arn = api.ok("CreateStateMachine", name="greeter", definition=definition, roleArn=ROLE)["stateMachineArn"]
    states = api.states
    folder = states.engine.compiled("greeter", definition)
    cut_short = Execution("greeter:late", "greeter", "late", arn, None, None, "r", folder, time.time(),
                          json.dumps({"name": "again"}))
    assert states.registry.add_execution(cut_short)[1]  # indexed, never started
    retried = api.ok("StartExecution", stateMachineArn=arn, name="late", input=json.dumps({"name": "again"}))
    described = _until(lambda: (d := api.ok("DescribeExecution", executionArn=retried["executionArn"]))
                       ["status"] != "RUNNING" and d)
    assert described["status"] == "SUCCEEDED" and json.loads(described["output"])["greeting"] == "hello again"
    # a repeat of the ended execution invokes nothing and is AWS's ExecutionAlreadyExists
    status, body = api("StartExecution", stateMachineArn=arn, name="late", input=json.dumps({"name": "again"}))
    assert status == 400 and body["__type"].endswith("ExecutionAlreadyExists")


def test_refusals_are_aws_errors(deployed: tuple[Api, LocalPlatform]) -> None:
    api, _ = deployed
    other = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    status, body = api("CreateStateMachine", name="other", definition=other, roleArn=ROLE)
    assert status == 400 and body["__type"].endswith("InvalidDefinition"), body
    assert "deploy" in body["message"]
    status, body = api("DescribeExecution",
                       executionArn="arn:aws:states:us-east-1:123456789012:execution:greeter:nope")
    assert status == 400 and body["__type"].endswith("ExecutionDoesNotExist"), body


def test_registry_records_live_in_the_store(dynamodb_store: Any, race: Any) -> None:
    """Every Registry method StatesApi uses, on DynamoDB: create-if-absent, one winner of a race,
    updates, versions, aliases, tags, delete and create again, executions."""
    registry = StoreRegistry(dynamodb_store)
    machine = Machine("m", "{}", ROLE, "STANDARD", 1.0, 1.0, "r1")
    winners = race(6, lambda i: registry.add_machine(Machine("m", f"{{}}{i}", ROLE, "STANDARD", 1.0, 1.0, "r1")))
    assert winners.count(None) == 1  # one create won; the others got the winner back
    won = registry.machine("m")
    assert won is not None and all(w is None or w == won for w in winners)
    assert registry.add_machine(machine) == won

    won.definition, won.revision = "{\"x\": 1}", "r2"
    registry.update_machine(won)
    assert registry.machine("m").definition == "{\"x\": 1}"  # type: ignore[union-attr]
    v1, how = registry.publish("m", "first", None, 2.0)
    assert how == "new" and v1 is not None and v1.version == 1
    assert registry.publish("m", None, None, 3.0)[1] == "existing"
    assert registry.publish("m", None, "stale", 3.0) == (None, "conflict")
    assert registry.publish("nope", None, None, 3.0) == (None, "missing")
    numbers = race(4, lambda i: (registry.update_machine(
        Machine("m", f"{{\"n\": {i}}}", ROLE, "STANDARD", 1.0, 4.0, f"n{i}")), registry.publish("m", None, None, 4.0)))
    published = {v.version for _, (v, how) in numbers if v is not None}
    assert [v.version for v in registry.versions("m")] == sorted(published | {1}, reverse=True)

    alias = Alias("m", "live", None, [{"stateMachineVersionArn": "arn:v1", "weight": 100}], 5.0, 5.0)
    assert registry.put_alias(alias, create=True) is None
    assert registry.put_alias(alias, create=True) == alias
    alias.description = "changed"
    registry.put_alias(alias, create=False)
    assert registry.alias("m", "live").description == "changed"  # type: ignore[union-attr]
    assert [a.name for a in registry.aliases("m")] == ["live"]

    registry.tag("arn:m", {"b": "2", "a": "1"})
    registry.untag("arn:m", ["b"])
    assert registry.tags("arn:m") == {"a": "1"}
    assert registry.add_activity("act", 6.0) == 6.0 and registry.add_activity("act", 7.0) == 6.0
    assert registry.activities() == [("act", 6.0)]

    assert registry.delete_machine("m") and not registry.delete_machine("m")
    assert registry.machine("m") is None and registry.versions("m") == [] and registry.aliases("m") == []
    assert registry.add_machine(machine) is None and registry.machine("m") == machine  # created again

    execution = Execution("m:e", "m", "e", "arn:m", None, None, "r1", "/f", 8.0, "{}")
    assert registry.add_execution(execution) == (execution, True)
    assert registry.add_execution(execution)[1] is False
    registry.forget_end("m:e", redriven=9.0)
    found = registry.execution("m:e")
    assert found is not None and (found.redrives, found.redriven) == (1, 9.0)
    assert [e.workflow for e in registry.executions("m")] == ["m:e"]
