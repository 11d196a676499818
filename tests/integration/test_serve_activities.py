"""Activity workers run unchanged against `serve`: an activity Task waits for a worker, whose
GetActivityTask long poll hands it the Task's input and token exactly once (two workers at
once: one gets it), and SendTaskSuccess / SendTaskFailure / SendTaskHeartbeat complete it as
they complete any task token."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.serve import ROLE, client, serving, wait_ended

pytestmark = pytest.mark.integration


@pytest.fixture
def sfn(tmp_path: Path) -> Iterator[Any]:
    with serving(tmp_path) as server:
        server.states.activity_poll = 2.0  # a short long poll: the empty answer comes quickly
        yield client(server.url)


def machine(sfn: Any, activity: str) -> str:
    definition = {"StartAt": "Review", "States": {
        "Review": {"Type": "Task", "Resource": activity, "Parameters": {"doc.$": "$.doc"}, "HeartbeatSeconds": 600,
                   "ResultPath": "$.review", "Next": "Done",
                   "Catch": [{"ErrorEquals": ["Rejected"], "ResultPath": "$.error", "Next": "Done"}]},
        "Done": {"Type": "Pass", "End": True}}}
    arn: str = sfn.create_state_machine(name="review", definition=json.dumps(definition), roleArn=ROLE)["stateMachineArn"]
    return arn


def test_a_worker_polls_the_input_and_completes_the_task(sfn: Any) -> None:
    activity = sfn.create_activity(name="review")["activityArn"]
    arn = machine(sfn, activity)
    assert sfn.get_activity_task(activityArn=activity, workerName="w").get("taskToken") is None  # nothing waits
    first = sfn.start_execution(stateMachineArn=arn, name="one", input=json.dumps({"doc": "a"}))["executionArn"]
    second = sfn.start_execution(stateMachineArn=arn, name="two", input=json.dumps({"doc": "b"}))["executionArn"]
    tasks = []
    for _ in range(2):
        task = sfn.get_activity_task(activityArn=activity, workerName="w")
        tasks.append((json.loads(task["input"]), task["taskToken"]))
    assert sorted(t[0]["doc"] for t in tasks) == ["a", "b"]  # each handed out once
    assert sfn.get_activity_task(activityArn=activity, workerName="w").get("taskToken") is None
    by_doc = {t[0]["doc"]: t[1] for t in tasks}
    sfn.send_task_heartbeat(taskToken=by_doc["a"])
    sfn.send_task_success(taskToken=by_doc["a"], output=json.dumps({"ok": True}))
    sfn.send_task_failure(taskToken=by_doc["b"], error="Rejected", cause="not good enough")
    assert json.loads(wait_ended(sfn, first)["output"]) == {"doc": "a", "review": {"ok": True}}
    caught = json.loads(wait_ended(sfn, second)["output"])
    assert caught["error"] == {"Error": "Rejected", "Cause": "not good enough"}
    with pytest.raises(ClientError) as again:
        sfn.send_task_success(taskToken=by_doc["a"], output="{}")
    assert again.value.response["Error"]["Code"] == "TaskTimedOut"
    events = sfn.get_execution_history(executionArn=first)["events"]
    assert events[0]["type"] == "ExecutionStarted" and events[-1]["type"] == "ExecutionSucceeded"


def test_two_workers_polling_at_once_never_get_the_same_task(sfn: Any) -> None:
    activity = sfn.create_activity(name="review")["activityArn"]
    arn = machine(sfn, activity)
    sfn.start_execution(stateMachineArn=arn, name="only", input=json.dumps({"doc": "x"}))
    got: list[dict[str, Any]] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        mine = client(sfn.meta.endpoint_url)
        barrier.wait()
        got.append(mine.get_activity_task(activityArn=activity, workerName=threading.current_thread().name))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sum(1 for answer in got if answer.get("taskToken")) == 1, got


def test_an_unknown_activity_is_refused(sfn: Any) -> None:
    with pytest.raises(ClientError) as refused:
        sfn.get_activity_task(activityArn="arn:aws:states:us-east-1:123456789012:activity:nope")
    assert refused.value.response["Error"]["Code"] == "ActivityDoesNotExist"
