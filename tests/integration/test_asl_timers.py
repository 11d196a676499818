"""Step Functions time on durable timers, through the real CLI (`python -m builder run`,
`task-success`, `task-heartbeat`) on the embedded engine, time-scaled with UNUM_ASL_TIME_SCALE:
a two-hour Wait commits a wait and resumes from its timer; a waiting Task's HeartbeatSeconds
run out once the heartbeats stop (Catch takes States.HeartbeatTimeout); a task-success before
the TimeoutSeconds timer fires wins, `run` does not wait for the timer then, and the timer, when
it fires, changes nothing (the other order is in test_task_tokens.py); and timers the platform
delivers early, twice and late change nothing."""

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

from unum_entry.codec import decode
from unum_entry.local.runs import queue_path
from unum_entry.stores import open_store
from unum_entry.stores.base import Kind
from unum_entry.timers import TIMER

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
AWS = "arn:aws:states:::"
SCALE = "0.001"
ASK = '''import os
def handler(event, context):
    with open(os.path.join(os.environ["TOKEN_DIR"], "token"), "w") as f:
        f.write(event["token"])
    return {"asked": True}
'''


def cli(*args: Any, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "UNUM_ASL_TIME_SCALE": SCALE, **(env or {})})


def background(*args: Any, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "UNUM_ASL_TIME_SCALE": SCALE, **env})


def machine(tmp_path: Path, states: dict[str, Any], start: str) -> Path:
    (tmp_path / "functions" / "Ask").mkdir(parents=True)
    (tmp_path / "functions" / "Ask" / "app.py").write_text(ASK)
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps({"StartAt": start, "States": states}))
    return path


def wait_for_token(tmp_path: Path, proc: subprocess.Popen[str], timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (tmp_path / "token").is_file() and (tmp_path / "token").read_text():
            return (tmp_path / "token").read_text()
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the waiting Task never sent its token")


def wait_decisions(store_path: Path) -> list[dict[str, Any]]:
    """The wait decisions committed in the store (checkpoints holding `__wait__`)."""
    store = open_store(str(store_path))
    try:
        found = []
        for record in store.records():
            if record.kind is Kind.CHECKPOINT and record.value is not None:
                value = decode(record.value)
                if isinstance(value, dict) and value.get("__next__") == "__wait__":
                    found.append(value["wait"])
        return found
    finally:
        store.close()


def test_a_two_hour_wait_commits_a_wait_decision_and_resumes_from_its_timer(tmp_path: Path) -> None:
    path = machine(tmp_path, {
        "Before": {"Type": "Pass", "Parameters": {"id.$": "$.id"}, "Next": "TwoHours"},
        "TwoHours": {"Type": "Wait", "Seconds": 7200, "Next": "After"},
        "After": {"Type": "Pass", "Parameters": {"id.$": "$.id", "waited": "2h"}, "End": True}}, "Before")
    began = time.monotonic()
    proc = cli("run", path, "--input", '{"id": 9}', "--store", tmp_path / "store", "--compact")

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"id": 9, "waited": "2h"}
    assert time.monotonic() - began >= 7.2  # 7200 s x 0.001
    [wait] = wait_decisions(tmp_path / "store")  # the function stopped at the Wait: its decision
    assert wait["timer"] == "wait" and wait["state"] == "TwoHours"
    assert "2 invocations" in proc.stderr  # the waiting one and its continuation (the timer's)


def test_heartbeats_keep_a_task_alive_until_they_stop_then_it_times_out(tmp_path: Path) -> None:
    path = machine(tmp_path, {
        "Ask": {"Type": "Task", "Resource": f"{AWS}lambda:invoke.waitForTaskToken",
                "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token"}},
                # TimeoutSeconds only has to outlast the beats: each must land within 3 s of the last (a
                # `task-heartbeat` subprocess on a loaded machine can take over a second to start); they
                # stop once 4 s have passed, so the HeartbeatTimeout comes about 4 + 3 + 3 s after the task
                # starts; `run` also waits for this timer (30 s).
                "HeartbeatSeconds": 3000, "TimeoutSeconds": 30000, "End": True,
                "Catch": [{"ErrorEquals": ["States.HeartbeatTimeout"], "ResultPath": "$.error", "Next": "Lost"}]},
        "Lost": {"Type": "Pass", "Parameters": {"error.$": "$.error.Error"}, "End": True}}, "Ask")
    env = {"TOKEN_DIR": str(tmp_path)}
    store = tmp_path / "store"
    began = time.monotonic()
    run = background("run", path, "--input", "{}", "--store", store, "--compact", env=env)
    try:
        token = wait_for_token(tmp_path, run)
        first = time.monotonic()
        beats = 0
        while time.monotonic() - first < 4.0:  # beats for 4 s: longer than the 3 s HeartbeatSeconds
            beat = cli("task-heartbeat", token, "--store", store)
            assert beat.returncode == 0, beat.stderr
            assert json.loads(beat.stdout)["function"] == "Ask"
            beats += 1
            time.sleep(0.5)
        assert beats >= 2
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 0, err
    assert json.loads(out) == {"error": "States.HeartbeatTimeout"}
    assert time.monotonic() - began >= 4.0 + 3.0  # alive while it beat, timed out 3 s after the last
    late = cli("task-heartbeat", token, "--store", store)
    assert late.returncode == 2 and "timed out" in late.stderr and "Traceback" not in late.stderr


SUCCESS_OR_TIMEOUT = {
    "Ask": {"Type": "Task", "Resource": f"{AWS}lambda:invoke.waitForTaskToken",
            "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token"}},
            "TimeoutSeconds": 3000, "ResultPath": "$.answer", "End": True,
            "Catch": [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "Late"}]},
    "Late": {"Type": "Pass", "Result": "timed out", "End": True}}


def test_a_task_success_before_the_timeout_wins_and_run_does_not_wait_for_the_moot_timer(tmp_path: Path) -> None:
    path = machine(tmp_path, SUCCESS_OR_TIMEOUT, "Ask")
    env = {"TOKEN_DIR": str(tmp_path)}
    store = tmp_path / "store"
    run = background("run", path, "--input", '{"id": 1}', "--store", store, "--compact", env=env)
    try:
        token = wait_for_token(tmp_path, run)
        done = cli("task-success", token, "--output", '"approved"', "--store", store, "--workflow", path,
                   "--compact", env=env)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"id": 1, "answer": "approved"}
        out, err = run.communicate(timeout=60)  # `run` holds the timeout timer, moot once the workflow ended
    finally:
        run.kill()
    assert run.returncode == 0, err
    assert json.loads(out) == {"id": 1, "answer": "approved"}
    with sqlite3.connect(queue_path(open_store(str(store)))) as journal:  # the ended workflow's timers are
        assert journal.execute("SELECT count(*) FROM unum_queue").fetchone()[0] == 0  # dropped, not queued for ever
    again = cli("task-success", token, "--output", '"twice"', "--store", store, "--workflow", path, env=env)
    assert again.returncode == 2 and "already completed" in again.stderr


def test_a_timeout_timer_that_fires_after_the_task_success_changes_nothing(tmp_path: Path, monkeypatch) -> None:
    """The timer delivered after the success (the embedded platform waits for it here, as a
    platform that does not know the workflow ended would): it finds the callback's record."""
    from unum_entry.asl.callbacks import task_success
    from unum_entry.local.platform import LocalPlatform
    from unum_entry.workflow import load_workflow

    from builder.commands.callback_commands import Submit
    from builder.runs.folders import runnable_workflow

    monkeypatch.setenv("UNUM_ASL_TIME_SCALE", SCALE)
    monkeypatch.setenv("TOKEN_DIR", str(tmp_path))
    workflow = load_workflow(runnable_workflow(str(machine(tmp_path, SUCCESS_OR_TIMEOUT, "Ask"))))
    store = open_store(str(tmp_path / "store"))
    try:
        with LocalPlatform(workflow, store, workers=2) as platform:
            workflow_id = platform.start({"id": 1})
            deadline = time.monotonic() + 30
            while not ((tmp_path / "token").is_file() and (tmp_path / "token").read_text()):
                assert time.monotonic() < deadline, "no task token after 30 s"
                time.sleep(0.02)
            platform.wait_idle(30, until=time.time())  # the Ask delivery is done; its timeout timer queued
            assert platform.next_timer() is not None
            task_success((tmp_path / "token").read_text(), "approved", store=store, invoker=Submit(platform))
            platform.wait_idle(30)  # every timer due within 30 s: the timeout's (at 3 s) fires
            assert platform.next_timer() is None
            outcome = platform.outcome(workflow_id)
        assert outcome.failure is None and outcome.results == [{"id": 1, "answer": "approved"}]
    finally:
        store.close()


def test_timers_delivered_early_twice_and_late_change_nothing(tmp_path: Path, monkeypatch) -> None:
    from unum_entry.local.platform import LocalPlatform
    from unum_entry.workflow import load_workflow

    from builder.runs.folders import runnable_workflow

    class Unpunctual(LocalPlatform):
        """Every ASL timer is delivered on time and 0.3 s late; each first one also at once (early;
        a re-armed one is not, or an early delivery would re-arm for ever). Others (the deadline
        watchdog's) are left alone."""

        def submit_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
            value = (payload.get("inputs") or [{}])[0].get("value")
            if not (isinstance(value, dict) and TIMER in value):
                super().submit_at(when, function, payload, name=name)
                return
            if value[TIMER]["round"] == 0:
                self.submit(function, payload)
            super().submit_at(when, function, payload, name=name)
            super().submit_at(when + 0.3, function, payload, name=name)

    # x 0.0005: the 2 h Wait is 3.6 s, the 1 h timeout 1.8 s - each still far longer than the 0.3 s lateness and
    # than the time an at-once (early) delivery takes to arrive, so both early ones are still dropped as stale.
    monkeypatch.setenv("UNUM_ASL_TIME_SCALE", "0.0005")
    example = REPO / "images" / "asl-wait"
    workflow = load_workflow(runnable_workflow(str(example)))
    store = open_store(str(tmp_path / "store"))
    try:
        with Unpunctual(workflow, store, workers=4) as platform:
            outcome = platform.run(json.loads((example / "input.json").read_text()), timeout=60)
            early = platform.stats["stale"]
        assert outcome.result == json.loads((example / "expected.json").read_text())
        assert len(outcome.results) == 1 and outcome.failure is None
        assert early >= 2  # at least the Wait's and the timeout's early deliveries were dropped
    finally:
        store.close()


FLAKY = '''import os
def handler(event, context):
    path = os.path.join(os.environ["FLAKY_DIR"], "count-%s" % event["k"])
    n = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(n + 1))
    if n < 1:
        raise RuntimeError("the first call fails")
    return {"k": event["k"], "calls": n + 1}
'''


def test_long_retry_back_offs_of_a_task_and_a_parallel_wait_on_timers(tmp_path: Path) -> None:
    (tmp_path / "functions" / "Flaky").mkdir(parents=True)
    (tmp_path / "functions" / "Flaky" / "app.py").write_text(FLAKY)
    flaky = "arn:aws:lambda:us-east-1:123456789012:function:Flaky"
    path = tmp_path / "statemachine.json"
    path.write_text(json.dumps({"StartAt": "T", "States": {
        "T": {"Type": "Task", "Resource": flaky, "Parameters": {"k": 1}, "ResultPath": "$.t", "Next": "P",
              "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 2000, "MaxAttempts": 2}]},
        "P": {"Type": "Parallel", "ResultPath": "$.p", "End": True,
              "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 3000, "MaxAttempts": 1}],
              "Branches": [{"StartAt": "B", "States": {
                  "B": {"Type": "Task", "Resource": flaky, "Parameters": {"k": 2}, "End": True}}}]}}}))
    began = time.monotonic()
    proc = cli("run", path, "--input", "{}", "--store", tmp_path / "store", "--compact",
               env={"FLAKY_DIR": str(tmp_path)})

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"t": {"k": 1, "calls": 2}, "p": [{"k": 2, "calls": 2}]}
    assert time.monotonic() - began >= 5.0  # 2000 s + 3000 s back-offs x 0.001
    retries = sorted(w["state"] for w in wait_decisions(tmp_path / "store") if w["timer"] == "retry")
    assert retries == ["P", "T"]  # each back-off was a committed retry wait, not a sleep


@pytest.mark.parametrize("seed", range(4))
def test_crashes_duplicates_and_delays_around_timers_change_nothing(tmp_path: Path, monkeypatch, seed: int) -> None:
    """Crashes at every step boundary (between arming a timer and committing its wait too),
    duplicated and delayed deliveries (timers included): the result is the fault-free one."""
    from unum_entry.hooks import FaultPoint, StepPoint
    from unum_entry.local.faults import FaultInjector, FaultRates
    from unum_entry.local.platform import LocalPlatform
    from unum_entry.workflow import load_workflow

    from builder.runs.folders import runnable_workflow

    # x 0.0002: the 2 h Wait is 1.44 s, the 1 h timeout 0.72 s - still long beside the 0.05 s delays, and the
    # faults land on the same step boundaries around the same timers (only the wait between them is shorter).
    monkeypatch.setenv("UNUM_ASL_TIME_SCALE", "0.0002")
    example = REPO / "images" / "asl-wait"
    rates = FaultRates(crash={point: 0.2 for point in (*FaultPoint, *StepPoint)}, duplicate=0.5,
                       concurrent_duplicate=0.2, delay=0.5, max_delay=0.05, max_crashes=12)
    # Which faults a seed draws depends on thread timing too (a run may draw no crash): every
    # schedule is checked in full, and further seeds run until one has injected a crash.
    crashes = 0
    for attempt, schedule_seed in enumerate(range(seed, seed + 16, 4)):
        faults = FaultInjector(rates, schedule_seed)
        store = open_store(str(tmp_path / f"store{attempt}"))
        try:
            with LocalPlatform(load_workflow(runnable_workflow(str(example))), store, workers=4,
                               faults=faults) as platform:
                outcome = platform.run(json.loads((example / "input.json").read_text()), timeout=90)
            assert outcome.failure is None, outcome.failure
            assert outcome.result == json.loads((example / "expected.json").read_text())
            crashes = faults.injected["crash"]
        finally:
            store.close()
        if crashes:
            break
    assert crashes > 0, "four schedules drew no crash"


def test_waiting_tasks_in_map_iterations_time_out_each_on_its_own_timer_in_item_order(tmp_path: Path) -> None:
    path = machine(tmp_path, {"Each": {"Type": "Map", "ItemsPath": "$.items", "End": True, "ItemProcessor": {
        "StartAt": "Ask", "States": {
            "Ask": {"Type": "Task", "Resource": f"{AWS}lambda:invoke.waitForTaskToken",
                    "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token"}},
                    "TimeoutSecondsPath": "$.t", "End": True,
                    "Catch": [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.err", "Next": "Late"}]},
            "Late": {"Type": "Pass", "Parameters": {"i.$": "$.i", "e.$": "$.err.Error"}, "End": True}}}}}, "Each")
    items = [{"i": 1, "t": 2000}, {"i": 2, "t": 1000}, {"i": 3, "t": 3000}]  # x 0.001: 2 s, 1 s, 3 s
    began = time.monotonic()
    proc = cli("run", path, "--input", json.dumps({"items": items}), "--store", tmp_path / "store", "--compact",
               env={"TOKEN_DIR": str(tmp_path)})

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [{"i": i, "e": "States.Timeout"} for i in (1, 2, 3)]
    assert time.monotonic() - began >= 3.0
