"""Durable timers through the local AWS stack, end to end: function images in Lambda containers
arm EventBridge Scheduler schedules on moto, and the stack's firing loop delivers them back
into the containers through the local Invoke endpoint.

- Starting a workflow arms its deadline watchdog: one one-time schedule in the stack's group,
  named `timer_name(wf, "watchdog")`, targeting the entry function, delete-after-completion.
- A timer delivered early is absorbed: the watchdog's envelope scheduled *now* reaches the entry
  container, which finds it early and re-arms (a second schedule, the next name), leaving the
  finished workflow's outcome unchanged.
- images/asl-wait (a 2-hour Wait and a waiting Task that times out), time-scaled, runs to its
  expected result with both waits on schedules.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from builder.local_stack.aws_stack import LocalLambdaStack
from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint
from builder.local_stack.process import wait_until
from tests.e2e.aws.conftest import FAST_RETRY, LambdaFunctionContainer
from unum_entry.invokers.eventbridge_scheduler import at_expression, parse_at_expression
from unum_entry.naming import timer_name
from unum_entry.outcome import read_outcome
from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.e2e

IMAGES = Path(__file__).resolve().parents[3] / "images"


def _schedules(stack) -> dict[str, dict]:
    client = stack.timers.scheduler
    names = [s["Name"] for s in client.list_schedules(GroupName=stack.schedule_group)["Schedules"]]
    return {name: client.get_schedule(Name=name, GroupName=stack.schedule_group) for name in names}


def test_a_workflow_arms_its_watchdog_and_an_early_firing_rearms_it(lambda_stack) -> None:
    stack = lambda_stack(IMAGES / "chain")
    workflow_id = "wf-e2e-timers-watchdog"
    outcome = stack.run({"name": "timers"}, workflow_id=workflow_id)
    assert outcome.failure is None, outcome.failure

    first = timer_name(workflow_id, "watchdog")
    schedules = _schedules(stack)
    assert first in schedules, sorted(schedules)
    watchdog = schedules[first]
    assert watchdog["Target"]["Arn"].endswith(":function:" + stack.workflow.entry)
    assert watchdog["ActionAfterCompletion"] == "DELETE" and watchdog["FlexibleTimeWindow"] == {"Mode": "OFF"}
    envelope = json.loads(watchdog["Target"]["Input"])
    assert envelope["workflow"] == workflow_id and envelope.get("watchdog") is True
    assert parse_at_expression(watchdog["ScheduleExpression"]) > time.time()  # at deadline - margin

    # Deliver the same timer early (a scheduler may): a copy due now, under another name.
    early = timer_name(workflow_id, "test-early")
    stack.timers.scheduler.create_schedule(
        Name=early, GroupName=stack.schedule_group, ScheduleExpression=at_expression(time.time()),
        FlexibleTimeWindow={"Mode": "OFF"}, ActionAfterCompletion="DELETE",
        Target={"Arn": watchdog["Target"]["Arn"], "RoleArn": watchdog["Target"]["RoleArn"],
                "Input": watchdog["Target"]["Input"]})
    wait_until(lambda: (early, watchdog["Target"]["Arn"]) in stack.timers.fired, timeout=30,
               what="the early copy firing", describe=lambda: str(stack.timers.stats))
    assert stack.endpoint.wait_idle(60)
    rearmed = timer_name(workflow_id, "watchdog", 1)
    wait_until(lambda: rearmed in _schedules(stack), timeout=10, what="the watchdog re-armed",
               describe=lambda: str(sorted(_schedules(stack))))
    assert early not in _schedules(stack)  # fired once, then deleted (ActionAfterCompletion)
    assert _schedules(stack)[rearmed]["ScheduleExpression"] == watchdog["ScheduleExpression"]
    again = read_outcome(stack.store, workflow_id)  # the finished workflow is unchanged by the timer
    assert again.failure is None and again.result == outcome.result


def test_a_two_hour_wait_and_a_task_timeout_run_on_scheduler_timers(tmp_path, built_images, aws_moto) -> None:
    """images/asl-wait (a 2-hour Wait, a Wait until a timestamp, a `.waitForTaskToken` Task whose
    1-hour `TimeoutSeconds` elapses) compiled with the real CLI, in Lambda containers at
    UNUM_ASL_TIME_SCALE=0.001: each Wait and the timeout are EventBridge Scheduler schedules on
    moto, fired by the stack's loop - the functions stop while waiting (no delivery in flight)."""
    folder = tmp_path / "asl-wait"
    compiled = subprocess.run([sys.executable, "-m", "builder", "compile", str(IMAGES / "asl-wait" / "statemachine.json"),
                               "--out", str(folder)], cwd=IMAGES.parent, capture_output=True, text=True, timeout=60)
    assert compiled.returncode == 0, compiled.stderr
    workflow = load_workflow(folder)
    table = f"unum-e2e-asl-wait-{uuid.uuid4().hex[:8]}"
    with AsyncInvokeEndpoint(retry=FAST_RETRY) as endpoint, LocalLambdaStack(
            workflow, built_images(folder), endpoint=endpoint,
            store_url=f"dynamodb://{table}?endpoint={aws_moto.endpoint}&region=us-east-1",
            start_container=lambda config: LambdaFunctionContainer(config).start(),
            environment={"UNUM_ASL_TIME_SCALE": "0.001", "UNUM_RETRY_BASE_DELAY": "0.05"},
            scheduler_endpoint=aws_moto.endpoint, scheduler_interval=0.2) as stack:
        input_value = json.loads((IMAGES / "asl-wait" / "input.json").read_text())
        started = time.monotonic()
        outcome = stack.run(input_value, workflow_id="wf-e2e-asl-wait", timeout=180)
        took = time.monotonic() - started
        assert stack.timers is not None
        fired = [arn.rsplit(":", 1)[1] for _, arn in stack.timers.fired]
        attempts = [a for a in endpoint.attempts if a.outcome != "ok"]

    assert outcome.failure is None, outcome.failure
    assert outcome.result == json.loads((IMAGES / "asl-wait" / "expected.json").read_text())
    # The 2-hour Wait and the Task's timeout each came back through a fired schedule (the Wait
    # until a past timestamp needs none), after at least their scaled 7.2 s + 3.6 s.
    assert len(fired) >= 2 and set(fired) <= set(workflow.functions), fired
    assert took >= 7.2 + 3.6, took
    assert attempts == [], attempts


def test_local_aws_cli_runs_the_wait_example_on_timers(tmp_path, built_images, aws_moto) -> None:
    """docs/aws.md's commands, read from the page: `compile` the state machine as written, then
    `UNUM_ASL_TIME_SCALE=0.001 python -m builder local-aws FOLDER --input @input.json` as written
    plus this session's images and moto (the variable reaches the containers)."""
    import os
    import shlex

    from tests.e2e.conftest import E2E_TAG_PREFIX
    from tests.support.doc_commands import doc_command

    (tmp_path / "images").symlink_to(IMAGES)
    compile_line = doc_command("docs/aws.md", "python -m builder compile images/asl-wait/").text
    compiled = subprocess.run([sys.executable, *shlex.split(compile_line)[1:]], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
    assert compiled.returncode == 0, compiled.stderr
    variable, python, *command = shlex.split(doc_command("docs/aws.md", "UNUM_ASL_TIME_SCALE=0.001 python ").text)
    assert python == "python" and command[:3] == ["-m", "builder", "local-aws"], command
    built_images(tmp_path / command[3])
    name, _, value = variable.partition("=")
    proc = subprocess.run([sys.executable, *command, "--no-build", "--tag-prefix", E2E_TAG_PREFIX,
                           "--moto-endpoint", aws_moto.endpoint, "--compact", "--timeout", "120"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=240, env={**os.environ, name: value})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert json.loads(proc.stdout) == json.loads((IMAGES / "asl-wait" / "expected.json").read_text())
