"""The one ending a stop race leaves, as every reader and AWS's own API report it (issue 45):
executions of a state machine whose Task waits for its task token are started through
`python -m builder serve`'s Step Functions API (boto3 StartExecution); the token is completed
through the API too (SendTaskSuccess, then the execution runs on to its end in serve's engine)
right before each store operation of a stop in turn, and after its last
(tests/support/interleaving_store.py; the stop is `stop_workflow` on serve's own store, as
StopExecution makes it). Afterwards DescribeExecution (boto3), read_outcome, `inspect`, `list`,
the history and the console's JSON and page must all say the same for every execution
(tests/support/readers.py), and it must be one ending: SUCCEEDED with the callback's output, or
ABORTED/stopped with the late SendTaskSuccess refused (TaskTimedOut)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.interleaving_store import InterleavingStore
from tests.support.readers import every_reader
from tests.support.serve import ROLE, client, serving, wait_ended
from unum_entry.outcome import stop_workflow
from unum_entry.stores.base import Store

pytestmark = pytest.mark.integration

BOUND = 30.0  # seconds any wait below may take
ASK = '''import os
def handler(event, context):
    with open(os.path.join(event["sink"], "token"), "w") as f:
        f.write(event["token"])
    return {}
'''
MACHINE = {"StartAt": "Ask", "States": {
    "Ask": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
            "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token", "sink.$": "$.sink"}},
            "TimeoutSeconds": 3600, "Next": "Done"},
    "Done": {"Type": "Pass", "End": True}}}


def _until(check: Any, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not check():
        assert time.monotonic() < deadline, f"{what} not within {BOUND} s"
        time.sleep(0.02)


def test_every_reader_and_describe_execution_report_the_one_ending_of_a_callback_stop_race(tmp_path: Path) -> None:
    from botocore.exceptions import ClientError

    functions = tmp_path / "functions"
    (functions / "Ask").mkdir(parents=True)
    (functions / "Ask" / "app.py").write_text(ASK)
    with serving(tmp_path, functions=functions) as server:
        sfn = client(server.url)
        machine = sfn.create_state_machine(name="ask", definition=json.dumps(MACHINE), roleArn=ROLE)["stateMachineArn"]
        store: Store = server.store

        def start(name: str) -> tuple[str, str, Path]:
            sink = tmp_path / f"sink-{name}"
            sink.mkdir()
            arn = sfn.start_execution(stateMachineArn=machine, name=name, input=json.dumps({"sink": str(sink)}))
            _until(lambda: (sink / "token").is_file() and (sink / "token").read_text(), f"{name} asking")
            workflow = server.states._execution(arn["executionArn"]).workflow
            return arn["executionArn"], workflow, sink

        def answer(execution: str, sink: Path) -> str:
            """SendTaskSuccess until its wait is committed: 'accepted' (the execution then runs to
            its end) or 'refused' (TaskTimedOut: the workflow has ended)."""
            deadline = time.monotonic() + BOUND
            while True:
                try:
                    sfn.send_task_success(taskToken=(sink / "token").read_text(), output=json.dumps({"ok": True}))
                except ClientError as exc:
                    code = exc.response["Error"]["Code"]
                    if code == "TaskTimedOut":
                        return "refused"
                    assert code == "TaskDoesNotExist" and time.monotonic() < deadline, code
                    time.sleep(0.05)
                    continue
                assert wait_ended(sfn, execution, BOUND)["status"] == "SUCCEEDED"
                return "accepted"

        _, dry_workflow, _ = start("dry")
        dry = InterleavingStore(store)
        assert stop_workflow(dry, dry_workflow)
        runs = []
        for at in range(len(dry.ops) + 1):
            execution, workflow, sink = start(f"race-{at}")
            landed: list[str] = []
            wrapped = InterleavingStore(store, lambda inner, e=execution, s=sink: landed.append(answer(e, s)), at)
            stopped = stop_workflow(wrapped, workflow)
            wrapped.finish()
            runs.append((execution, workflow, stopped, landed[0]))
        arns = {workflow: execution for execution, workflow, *_ in runs}
        with every_reader(store, str(tmp_path / "unum.db")) as readers:
            said = readers.says(list(arns), arns, sfn)
        endings = set()
        for execution, workflow, stopped, landed in runs:
            words = said[workflow]
            assert set(words) >= {"DescribeExecution", "inspect", "list", "history", "console-json", "console-page"}
            assert len(set(words.values())) == 1, f"readers disagree on {workflow}: {words}"
            described = sfn.describe_execution(executionArn=execution)
            if landed == "accepted" and not stopped:
                assert words["DescribeExecution"] == "succeeded" and json.loads(described["output"]) == {"ok": True}
            else:
                assert stopped and landed == "refused" and words["DescribeExecution"] == "stopped", (workflow, words)
                assert described["status"] == "ABORTED" and described.get("output") is None
            endings.add(words["DescribeExecution"])
        assert endings == {"succeeded", "stopped"}, endings
