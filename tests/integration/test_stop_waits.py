"""Stop against every kind of wait (issue 45): a workflow waiting on a durable timer (a Wait
state, a Retry back-off) or on a Task's token is stopped, and the timer fires or the callback
arrives after the stop, twice, late, or between the stop's two writes (its claim of the root
result record, then its failure record: unum_entry.outcome.end_workflow). Judged by the
contract: one ending (STOPPED), the next state never runs after the stop (each function's side
effect is a file), nothing left running, no timer left queued; a late callback is refused with
TaskTimedOut (AWS: "Provided task does not exist anymore") and sends nothing. Timers are scaled
with UNUM_ASL_TIME_SCALE; every wait is bounded."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from unum_entry.errors import TaskAlreadyCompleted, TaskTimedOut
from unum_entry.local.runs import queue_path
from unum_entry.outcome import WorkflowStatus, claim_result, failure_record, read_outcome, stop_workflow
from unum_entry.stores import open_store
from unum_entry.timers import TIMER

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MARK = "arn:aws:lambda:us-east-1:123456789012:function:Mark"
MARK_CODE = '''import os
def handler(event, context):
    with open(os.path.join(os.environ["MARK_DIR"], "mark-" + str(event["step"])), "a") as f:
        f.write("x")
    if event.get("fail_first") and os.path.getsize(os.path.join(os.environ["MARK_DIR"], "mark-" + str(event["step"]))) == 1:
        raise RuntimeError("the first call fails")
    return {"step": event["step"]}
'''
ASK_CODE = '''import os
def handler(event, context):
    with open(os.path.join(os.environ["MARK_DIR"], "token"), "w") as f:
        f.write(event["token"])
    return {"asked": True}
'''
WAIT = {"StartAt": "Before", "States": {
    "Before": {"Type": "Task", "Resource": MARK, "Parameters": {"step": "before"}, "Next": "Long"},
    "Long": {"Type": "Wait", "Seconds": 10000, "Next": "After"},  # x 0.0003: 3 s
    "After": {"Type": "Task", "Resource": MARK, "Parameters": {"step": "after"}, "End": True}}}
RETRY = {"StartAt": "Flaky", "States": {
    "Flaky": {"Type": "Task", "Resource": MARK, "Parameters": {"step": "flaky", "fail_first": True}, "Next": "After",
              "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 10000, "MaxAttempts": 2}]},
    "After": {"Type": "Task", "Resource": MARK, "Parameters": {"step": "after"}, "End": True}}}
TOKEN = {"StartAt": "Ask", "States": {
    "Ask": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
            "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token"}},
            "TimeoutSeconds": 10000, "ResultPath": "$.answer", "Next": "After"},
    "After": {"Type": "Task", "Resource": MARK, "Parameters": {"step": "after"}, "End": True}}}


def machine(tmp_path: Path, definition: dict[str, Any]) -> Path:
    for name, code in (("Mark", MARK_CODE), ("Ask", ASK_CODE)):
        (tmp_path / "functions" / name).mkdir(parents=True, exist_ok=True)
        (tmp_path / "functions" / name / "app.py").write_text(code)
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps(definition))
    return path


def marks(tmp_path: Path, step: str) -> int:
    """How many times the Task of `step` ran its handler."""
    path = tmp_path / f"mark-{step}"
    return len(path.read_text()) if path.is_file() else 0


def cli(*args: Any, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **env})


def wait_until(check: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} after {timeout} s"
        time.sleep(0.05)


class Unpunctual:
    """A LocalPlatform whose ASL timers are each delivered on time and again 0.3 s late (twice)."""

    @staticmethod
    def make(workflow: Any, store: Any) -> Any:
        from unum_entry.local.platform import LocalPlatform

        class _Platform(LocalPlatform):
            def submit_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
                value = (payload.get("inputs") or [{}])[0].get("value")
                super().submit_at(when, function, payload, name=name)
                if isinstance(value, dict) and TIMER in value:
                    super().submit_at(when + 0.3, function, payload, name=name + "-late")

        return _Platform(workflow, store, workers=2)


def _platform_run(tmp_path: Path, monkeypatch: Any, definition: dict[str, Any], between: bool) -> None:
    """Stop the workflow while it waits on its timer (or, `between`, make only the stop's claim),
    let every timer fire (on time and late), then finish the stop; judge."""
    from unum_entry.workflow import load_workflow

    from builder.runs.folders import runnable_workflow

    monkeypatch.setenv("UNUM_ASL_TIME_SCALE", "0.0003")
    monkeypatch.setenv("MARK_DIR", str(tmp_path))
    workflow = load_workflow(runnable_workflow(str(machine(tmp_path, definition))))
    store = open_store(str(tmp_path / "unum.db"))
    try:
        with Unpunctual.make(workflow, store) as platform:
            workflow_id = platform.start({})
            platform.wait_idle(30, until=time.time())  # it waits: its timer queued, nothing else to do
            assert platform.next_timer() is not None and marks(tmp_path, "after") == 0
            if between:  # the stop's first write only: the timers fire while it is half-way
                record = failure_record("Unum.Stopped", "stopped by request", function="", invocation="", attempts=0)
                assert claim_result(store, workflow_id, {**record, "Stopped": True})
            else:
                assert stop_workflow(store, workflow_id)
            platform.wait_idle(30)  # every timer fires (3 s, and 0.3 s late)
            assert platform.next_timer() is None  # none left queued, none re-armed
            assert platform.stats["stale"] >= 2  # the on-time and the late delivery, each dropped
            assert stop_workflow(store, workflow_id) is between  # a half-way stop is completed by the next
            outcome = read_outcome(store, workflow_id)
        assert outcome.status is WorkflowStatus.STOPPED and outcome.results == []
        assert marks(tmp_path, "after") == 0  # the timer never ran the next state
    finally:
        store.close()


@pytest.mark.parametrize("between", [False, True], ids=["after-stop", "between-stop-writes"])
def test_a_wait_timer_firing_after_a_stop_late_and_twice_runs_nothing(tmp_path: Path, monkeypatch: Any,
                                                                       between: bool) -> None:
    _platform_run(tmp_path, monkeypatch, WAIT, between)
    assert marks(tmp_path, "before") == 1


@pytest.mark.parametrize("between", [False, True], ids=["after-stop", "between-stop-writes"])
def test_a_retry_back_off_timer_firing_after_a_stop_does_not_rerun_the_task(tmp_path: Path, monkeypatch: Any,
                                                                          between: bool) -> None:
    _platform_run(tmp_path, monkeypatch, RETRY, between)
    assert marks(tmp_path, "flaky") == 1  # its first (failing) attempt only: the retry never ran


def test_stop_of_a_run_waiting_on_a_wait_state_through_the_cli(tmp_path: Path) -> None:
    """`run` in the background waits on a Wait; `stop`: run reports the stop (exit 1) without
    waiting for the timer, the next state never runs, the journal keeps no timer, and inspect
    says stopped."""
    path = machine(tmp_path, WAIT)
    env = {"UNUM_ASL_TIME_SCALE": "0.001", "MARK_DIR": str(tmp_path)}  # the Wait: 10 s
    store = tmp_path / "store"
    began = time.monotonic()
    run = subprocess.Popen([sys.executable, "-m", "builder", "run", str(path), "--input", "{}", "--store",
                            str(store), "--workflow-id", "wf-wait", "--compact"], cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env={**os.environ, **env})
    try:
        wait_until(lambda: marks(tmp_path, "before") == 1 and (store / "queue.db").exists(), "no Before")
        time.sleep(0.5)  # its wait decision commits right after its handler
        stopped = cli("stop", "wf-wait", "--store", store, env=env)
        assert stopped.returncode == 0, stopped.stderr
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 1 and "was stopped" in err, err
    assert time.monotonic() - began < 30
    assert marks(tmp_path, "after") == 0
    with sqlite3.connect(queue_path(open_store(str(store)))) as journal:
        assert journal.execute("SELECT count(*) FROM unum_queue WHERE background = 0").fetchone()[0] == 0
    inspect = cli("inspect", "wf-wait", "--store", store, env=env)
    assert inspect.returncode == 1 and json.loads(inspect.stdout)["status"] == "stopped"


class Recording:
    """An invoker that keeps what it was asked to send (a callback's continuation)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.sent.append((function, payload))


@pytest.mark.parametrize("at", ["before-stop", "between-stop-writes", "after-stop"])
def test_a_task_success_against_a_stop_one_ending_and_a_late_callback_is_refused(tmp_path: Path, monkeypatch: Any,
                                                                                  at: str) -> None:
    from unum_entry.asl.callbacks import task_heartbeat, task_success
    from unum_entry.workflow import load_workflow

    from builder.runs.folders import runnable_workflow

    monkeypatch.setenv("UNUM_ASL_TIME_SCALE", "0.0003")
    monkeypatch.setenv("MARK_DIR", str(tmp_path))
    workflow = load_workflow(runnable_workflow(str(machine(tmp_path, TOKEN))))
    store = open_store(str(tmp_path / "unum.db"))
    record = {**failure_record("Unum.Stopped", "stopped by request", function="", invocation="", attempts=0),
              "Stopped": True}
    try:
        with Unpunctual.make(workflow, store) as platform:
            workflow_id = platform.start({})
            platform.wait_idle(30, until=time.time())
            token = (tmp_path / "token").read_text()
            sent = Recording()
            if at == "before-stop":
                task_success(token, "ok", store=store, invoker=sent)  # accepted: its continuation is sent
                assert len(sent.sent) == 1
                assert stop_workflow(store, workflow_id)
            else:
                if at == "between-stop-writes":
                    assert claim_result(store, workflow_id, record)
                else:
                    assert stop_workflow(store, workflow_id)
                with pytest.raises(TaskTimedOut, match="has ended \\(stopped\\)"):
                    task_success(token, "late", store=store, invoker=sent)
                with pytest.raises(TaskTimedOut, match="has ended"):
                    task_heartbeat(token, store=store)
                assert sent.sent == []  # a refused callback sends nothing
                assert stop_workflow(store, workflow_id) is (at == "between-stop-writes")
            for function, payload in sent.sent:  # the accepted continuation is delivered (it drains)
                platform.submit(function, payload)
            platform.wait_idle(30)  # the Task's timeout timer fires too (3 s, and late): dropped
            assert platform.next_timer() is None
            later = TaskAlreadyCompleted if at == "before-stop" else TaskTimedOut  # any later callback
            with pytest.raises(later):
                task_success(token, "again", store=store, invoker=Recording())
            outcome = read_outcome(store, workflow_id)
        assert outcome.status is WorkflowStatus.STOPPED and outcome.results == [], outcome
        if at != "before-stop":
            assert marks(tmp_path, "after") == 0
    finally:
        store.close()


def test_task_success_after_a_stop_through_the_cli_is_one_line_exit_2(tmp_path: Path) -> None:
    path = machine(tmp_path, TOKEN)
    env = {"UNUM_ASL_TIME_SCALE": "0.001", "MARK_DIR": str(tmp_path)}
    store = tmp_path / "store"
    run = subprocess.Popen([sys.executable, "-m", "builder", "run", str(path), "--input", "{}", "--store",
                            str(store), "--workflow-id", "wf-token", "--compact"], cwd=REPO, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env={**os.environ, **env})
    try:
        wait_until(lambda: (tmp_path / "token").is_file() and (tmp_path / "token").read_text(), "no token")
        time.sleep(0.5)
        stopped = cli("stop", "wf-token", "--store", store, env=env)
        assert stopped.returncode == 0, stopped.stderr
        late = cli("task-success", (tmp_path / "token").read_text(), "--output", '"ok"', "--store", store,
                   "--workflow", path, env=env)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert late.returncode == 2 and "has ended (stopped)" in late.stderr and "Traceback" not in late.stderr
    assert run.returncode == 1 and "was stopped" in err, err
    assert marks(tmp_path, "after") == 0


NESTED = {"StartAt": "Run", "States": {"Run": {
    "Type": "Task", "Resource": "arn:aws:states:::states:startExecution.sync:2",
    "Parameters": {"StateMachineArn": "Child", "Input": {}}, "Next": "After"},
    "After": {"Type": "Task", "Resource": MARK, "Parameters": {"step": "after"}, "End": True}}}
CHILD = {"StartAt": "Long", "States": {
    "Long": {"Type": "Wait", "Seconds": 10000, "Next": "Inner"},
    "Inner": {"Type": "Task", "Resource": MARK, "Parameters": {"step": "child"}, "End": True}}}


@pytest.mark.parametrize("between", [False, True], ids=["after-stop", "between-stop-writes"])
def test_a_stopped_parent_stops_its_nested_sync_child_waiting_on_a_timer(tmp_path: Path, monkeypatch: Any,
                                                                        between: bool) -> None:
    """A `.sync` child runs under its parent's workflow id: the parent's stop is the child's, and
    the child's Wait timer, fired after it (on time and late), runs neither the child's next state
    nor the parent's."""
    (tmp_path / "Child.asl.json").write_text(json.dumps(CHILD))
    _platform_run(tmp_path, monkeypatch, NESTED, between)
    assert marks(tmp_path, "child") == 0
