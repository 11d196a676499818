"""Map Runs through boto3 against `serve`: a Distributed Map's DescribeMapRun (while it runs and
after), ListMapRuns, ListExecutions(mapRunArn), its MapRun history events, UpdateMapRun, and the
errors for unknown and malformed ARNs. Every answer is checked against botocore's output shapes
(`checked`, as in test_serve_api)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_serve_api import checked, error_code
from tests.support.serve import ROLE, client, serving, wait_ended

pytestmark = pytest.mark.integration

LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:"
ITEMS = 20
WAIT_SECONDS = 20  # scaled by UNUM_ASL_TIME_SCALE below: 2 s per item (a durable timer), 5 at a time


def machine(tolerated: float, *, wait: int = WAIT_SECONDS) -> str:
    """A Distributed Map over `$.items` (5 at a time, `tolerated` % of failures tolerated): each
    item waits, then Item doubles it (fails for the items `$.bad` names); then a second
    Distributed Map over `$.two` (two Pass items)."""
    processor = {"ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}, "StartAt": "W",
                 "States": {"W": {"Type": "Wait", "Seconds": wait, "Next": "T"},
                            "T": {"Type": "Task", "Resource": LAMBDA + "Item", "End": True}}}
    return json.dumps({"StartAt": "M", "States": {
        "M": {"Type": "Map", "ItemsPath": "$.items", "MaxConcurrency": 5, "ToleratedFailurePercentage": tolerated,
              "ItemProcessor": processor, "ResultPath": "$.results", "Next": "M2"},
        "M2": {"Type": "Map", "ItemsPath": "$.two", "ResultPath": None, "End": True,
               "ItemProcessor": {"ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                                 "StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}}}})


def start_input(bad: list[int]) -> str:
    return json.dumps({"items": [{"n": i, "bad": i in bad} for i in range(ITEMS)], "two": [1, 2]})


@pytest.fixture
def sfn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("UNUM_ASL_TIME_SCALE", "0.1")
    item = tmp_path / "functions" / "Item"
    item.mkdir(parents=True)
    (item / "app.py").write_text("def handler(event, context):\n    if event['bad']:\n"
                                 "        raise ValueError(f\"item {event['n']} is bad\")\n"
                                 "    return {'n': event['n'] * 2}\n")
    problems: list[str] = []
    with serving(tmp_path, functions=tmp_path / "functions") as server:
        yield checked(client(server.url), problems)
    assert not problems, problems


def first_run(sfn: Any, execution: str, timeout: float = 30.0) -> str:
    """The execution's first Map Run's ARN, once it has one (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = sfn.list_map_runs(executionArn=execution)["mapRuns"]
        if runs:
            return str(runs[0]["mapRunArn"])
        time.sleep(0.05)
    raise AssertionError(f"no Map Run within {timeout} s")


def test_a_distributed_map_is_a_map_run_described_while_running_and_after(sfn: Any) -> None:
    arn = sfn.create_state_machine(name="dm", definition=machine(10), roleArn=ROLE)["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=start_input([7]))["executionArn"]
    run = first_run(sfn, execution)
    assert run.startswith("arn:aws:states:us-east-1:123456789012:mapRun:dm/M:")

    # while it runs: items waiting in their iterations are running, the rest pending (bounded)
    running = sfn.describe_map_run(mapRunArn=run)
    assert running["status"] == "RUNNING" and "stopDate" not in running
    assert (running["maxConcurrency"], running["toleratedFailurePercentage"], running["toleratedFailureCount"]) == \
        (5, 10.0, 0)
    counts = running["itemCounts"]
    assert counts["total"] == ITEMS and counts["succeeded"] + counts["failed"] < ITEMS
    assert counts["pending"] + counts["running"] + counts["succeeded"] + counts["failed"] == ITEMS
    assert counts["resultsWritten"] == 0
    deadline = time.monotonic() + 30
    while sfn.describe_map_run(mapRunArn=run)["itemCounts"]["running"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sfn.describe_map_run(mapRunArn=run)["itemCounts"]["running"] > 0

    # after: one item failed, under the 10 % tolerated; the execution succeeded
    assert wait_ended(sfn, execution, timeout=90)["status"] == "SUCCEEDED"
    done = sfn.describe_map_run(mapRunArn=run)
    assert done["status"] == "SUCCEEDED" and done["stopDate"] >= done["startDate"]
    assert done["executionArn"] == execution
    expected = {"pending": 0, "running": 0, "succeeded": ITEMS - 1, "failed": 1, "timedOut": 0, "aborted": 0,
                "total": ITEMS, "resultsWritten": ITEMS}
    assert done["itemCounts"] == expected and done["executionCounts"] == expected

    # ListMapRuns: both Distributed Maps, in order, paged
    pages = list(sfn.get_paginator("list_map_runs").paginate(executionArn=execution,
                                                             PaginationConfig={"PageSize": 1}))
    assert len(pages) == 2
    runs = [r for page in pages for r in page["mapRuns"]]
    assert runs[0]["mapRunArn"] == run and ":mapRun:dm/M2:" in runs[1]["mapRunArn"]
    assert runs[0]["stateMachineArn"] == arn + "/M" and all(r["executionArn"] == execution for r in runs)

    # ListExecutions(mapRunArn): one child execution per item, paged, with statusFilter
    children = [e for page in sfn.get_paginator("list_executions").paginate(
        mapRunArn=run, PaginationConfig={"PageSize": 7}) for e in page["executions"]]
    assert len(children) == ITEMS and len({c["executionArn"] for c in children}) == ITEMS
    assert all(c["mapRunArn"] == run and c["stateMachineArn"] == arn + "/M" for c in children)
    failed = sfn.list_executions(mapRunArn=run, statusFilter="FAILED")["executions"]
    assert [c["name"] for c in failed] == [children[7]["name"]]
    assert all(c["stopDate"] >= c["startDate"] for c in children)

    # the history: MapRunStarted after MapStateStarted, MapRunSucceeded before MapStateSucceeded
    events = sfn.get_execution_history(executionArn=execution, maxResults=1000)["events"]
    types = [e["type"] for e in events]
    started = [e for e in events if e["type"] == "MapRunStarted"]
    assert [e["mapRunStartedEventDetails"]["mapRunArn"] for e in started] == [r["mapRunArn"] for r in runs]
    first = types.index("MapRunStarted")
    assert types[first - 1] == "MapStateStarted" and events[first]["previousEventId"] == events[first - 1]["id"]
    ended = types.index("MapRunSucceeded")
    assert types[ended + 1] == "MapStateSucceeded" and events[ended + 1]["previousEventId"] == events[ended]["id"]
    assert types.count("MapRunSucceeded") == 2 and "MapRunFailed" not in types


def test_a_map_run_over_its_tolerated_failures_fails(sfn: Any) -> None:
    arn = sfn.create_state_machine(name="strict", definition=machine(10, wait=0), roleArn=ROLE)["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=start_input([3, 7, 11]))["executionArn"]
    assert wait_ended(sfn, execution, timeout=90)["status"] == "FAILED"
    run = first_run(sfn, execution)
    described = sfn.describe_map_run(mapRunArn=run)
    assert described["status"] == "FAILED" and described["itemCounts"]["failed"] == 3
    assert described["itemCounts"]["succeeded"] + described["itemCounts"]["failed"] == ITEMS
    types = [e["type"] for e in sfn.get_execution_history(executionArn=execution, maxResults=1000)["events"]]
    assert types.count("MapRunStarted") == 1 and types.index("MapRunFailed") + 1 == types.index("MapStateFailed")


def test_update_map_run_keeps_the_values_it_has_and_refuses_changes(sfn: Any) -> None:
    arn = sfn.create_state_machine(name="upd", definition=machine(10, wait=0), roleArn=ROLE)["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=start_input([]))["executionArn"]
    run = first_run(sfn, execution)
    assert sfn.update_map_run(mapRunArn=run, maxConcurrency=5, toleratedFailurePercentage=10.0)
    assert error_code(sfn.update_map_run, mapRunArn=run, maxConcurrency=2) == "ValidationException"
    assert error_code(sfn.update_map_run, mapRunArn=run, toleratedFailureCount=3) == "ValidationException"
    assert wait_ended(sfn, execution, timeout=90)["status"] == "SUCCEEDED"
    assert sfn.describe_map_run(mapRunArn=run)["maxConcurrency"] == 5


def test_unknown_and_malformed_map_run_arns(sfn: Any) -> None:
    arn = sfn.create_state_machine(name="inline", roleArn=ROLE, definition=json.dumps({
        "StartAt": "M", "States": {"M": {"Type": "Map", "End": True, "ItemsPath": "$.two", "ItemProcessor": {
            "StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}}}}))["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=start_input([]))["executionArn"]
    assert wait_ended(sfn, execution)["status"] == "SUCCEEDED"
    assert sfn.list_map_runs(executionArn=execution)["mapRuns"] == []  # an inline Map has no Map Run
    unknown = f"arn:aws:states:us-east-1:123456789012:mapRun:inline/M:{execution.rsplit(':', 1)[1]}:0123456789abcdef"
    assert error_code(sfn.describe_map_run, mapRunArn=unknown) == "ResourceNotFound"
    assert error_code(sfn.update_map_run, mapRunArn=unknown, maxConcurrency=1) == "ResourceNotFound"
    assert error_code(sfn.list_executions, mapRunArn=unknown) == "ResourceNotFound"
    nowhere = "arn:aws:states:us-east-1:123456789012:mapRun:nope/M:nope:0123456789abcdef"
    aws_shaped = "arn:aws:states:us-east-1:123456789012:mapRun:inline/M:ad9b5f27-090b-3ac6-9beb-243cd77144a7"
    assert error_code(sfn.describe_map_run, mapRunArn=aws_shaped) == "ResourceNotFound"
    assert error_code(sfn.describe_map_run, mapRunArn=nowhere) == "ResourceNotFound"
    assert error_code(sfn.describe_map_run, mapRunArn="arn:aws:states:us-east-1:123456789012:mapRun:x") == "InvalidArn"
    assert error_code(sfn.describe_map_run, mapRunArn=execution) == "InvalidArn"
    assert error_code(sfn.list_map_runs, executionArn=execution + "x") == "ExecutionDoesNotExist"


def test_a_stopped_execution_aborts_its_running_map_run(sfn: Any) -> None:
    arn = sfn.create_state_machine(name="stop", definition=machine(10, wait=600), roleArn=ROLE)["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=start_input([]))["executionArn"]
    run = first_run(sfn, execution)
    deadline = time.monotonic() + 30
    while sfn.describe_map_run(mapRunArn=run)["itemCounts"]["running"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    children = sfn.list_executions(mapRunArn=run)["executions"]
    assert children and {c["status"] for c in children} == {"RUNNING"}
    # a child execution is listed, not described: its events are in the parent's history
    assert error_code(sfn.describe_execution, executionArn=children[0]["executionArn"]) == "ExecutionDoesNotExist"
    sfn.stop_execution(executionArn=execution)
    ended = wait_ended(sfn, execution)
    assert ended["status"] == "ABORTED"
    described = sfn.describe_map_run(mapRunArn=run)
    assert described["status"] == "ABORTED" and described["stopDate"] == ended["stopDate"]
    counts = described["itemCounts"]
    assert (counts["aborted"], counts["running"], counts["pending"], counts["total"]) == (ITEMS, 0, 0, ITEMS)
    assert {c["status"] for c in sfn.list_executions(mapRunArn=run)["executions"]} == {"ABORTED"}


def test_batched_items_are_counted_as_items_and_each_batch_is_one_child_execution(sfn: Any) -> None:
    arn = sfn.create_state_machine(name="batched", roleArn=ROLE, definition=json.dumps({
        "StartAt": "M", "States": {"M": {"Type": "Map", "End": True, "ItemsPath": "$.items",
                                         "ItemBatcher": {"MaxItemsPerBatch": 6}, "ItemProcessor": {
            "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
            "StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}}}}))["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=start_input([]))["executionArn"]
    assert wait_ended(sfn, execution)["status"] == "SUCCEEDED"
    described = sfn.describe_map_run(mapRunArn=first_run(sfn, execution))
    assert (described["itemCounts"]["succeeded"], described["itemCounts"]["total"]) == (ITEMS, ITEMS)
    assert (described["executionCounts"]["succeeded"], described["executionCounts"]["total"]) == (4, 4)
    children = sfn.list_executions(mapRunArn=described["mapRunArn"])["executions"]
    assert [c["itemCount"] for c in children] == [6, 6, 6, 2]


def test_limits_given_by_paths_are_described_as_the_run_resolved_them(sfn: Any) -> None:
    arn = sfn.create_state_machine(name="paths", roleArn=ROLE, definition=json.dumps({
        "StartAt": "M", "States": {"M": {"Type": "Map", "End": True, "ItemsPath": "$.items",
                                         "MaxConcurrencyPath": "$.limits.mc", "ToleratedFailureCountPath": "$.limits.n",
                                         "ToleratedFailurePercentagePath": "$.limits.pct", "ItemProcessor": {
            "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
            "StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}}}}))["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps(
        {**json.loads(start_input([])), "limits": {"mc": 3, "n": 2, "pct": 12.5}}))["executionArn"]
    assert wait_ended(sfn, execution)["status"] == "SUCCEEDED"
    run = first_run(sfn, execution)
    described = sfn.describe_map_run(mapRunArn=run)
    assert (described["maxConcurrency"], described["toleratedFailureCount"], described["toleratedFailurePercentage"]) \
        == (3, 2, 12.5)
    assert sfn.update_map_run(mapRunArn=run, maxConcurrency=3, toleratedFailureCount=2)
    assert error_code(sfn.update_map_run, mapRunArn=run, toleratedFailurePercentage=50.0) == "ValidationException"
