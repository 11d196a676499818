"""Durable timers on AWS, over the wire: `LambdaInvoker.invoke_at` creates EventBridge Scheduler
one-time schedules on moto's scheduler API (name, time, target, role, input, delete after
completion, idempotent by name), and the local stack's firing loop invokes each due schedule's
target once through the local Lambda Invoke endpoint, then deletes it."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry
from builder.local_stack.scheduler_loop import SchedulerFiringLoop
from tests.integration.test_lambda_endpoint import FakeRie
from unum_entry.errors import ConfigurationError
from unum_entry.invokers import open_invoker
from unum_entry.invokers.aws_lambda import build_client
from unum_entry.invokers.eventbridge_scheduler import at_expression, parse_at_expression
from unum_entry.naming import timer_name

pytestmark = pytest.mark.integration

ROLE = "arn:aws:iam::123456789012:role/unum-scheduler"


@pytest.fixture
def scheduler(moto_server):
    client = build_client(endpoint=moto_server.endpoint, region="us-east-1", service="scheduler")
    group = f"unum-test-{uuid.uuid4().hex[:8]}"
    client.create_schedule_group(Name=group)
    try:
        yield client, group
    finally:
        client.delete_schedule_group(Name=group)  # deletes its schedules too


@pytest.fixture
def rie():
    """A function behind the endpoint that records what it is sent (register its url)."""
    fake = FakeRie()
    yield fake
    fake.close()


@pytest.fixture
def endpoint():
    with AsyncInvokeEndpoint(retry=LambdaRetry(delays=(0.05,), unavailable_delay=0.05)) as running:
        yield running


def _invoker(moto_server, endpoint, group, prefix="stack-", store=None, limit=None):
    url = (f"lambda://?prefix={prefix}&endpoint={endpoint.endpoint}&scheduler_endpoint={moto_server.endpoint}"
           f"&schedule_role={ROLE}&schedule_group={group}" + (f"&limit={limit}" if limit else ""))
    return open_invoker(url, store=store)


def _envelope(workflow: str, value: object = "x") -> dict:
    return {"unum": 1, "workflow": workflow, "function": "Later", "value": value}


def test_invoke_at_creates_one_named_schedule(moto_server, scheduler, endpoint) -> None:
    client, group = scheduler
    invoker = _invoker(moto_server, endpoint, group)
    when = time.time() + 3600.4
    name = timer_name("wf-1", "wait", "Later", 0)
    payload = _envelope("wf-1")
    invoker.invoke_at(when, "Later", payload, name=name)
    invoker.invoke_at(when, "Later", payload, name=name)  # already armed: not an error, no second schedule

    names = [s["Name"] for s in client.list_schedules(GroupName=group)["Schedules"]]
    assert names == [name]
    schedule = client.get_schedule(Name=name, GroupName=group)
    assert schedule["ScheduleExpression"] == at_expression(when)
    assert parse_at_expression(schedule["ScheduleExpression"]) == float(int(when) + 1)  # rounded up, never early
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["Target"]["Arn"] == "arn:aws:lambda:us-east-1:123456789012:function:stack-Later"
    assert schedule["Target"]["RoleArn"] == ROLE
    assert json.loads(schedule["Target"]["Input"]) == payload


def test_firing_loop_delivers_each_due_timer_once(moto_server, scheduler, endpoint, rie) -> None:
    client, group = scheduler
    endpoint.register("Later", rie.url)
    invoker = _invoker(moto_server, endpoint, group, prefix="")
    soon, late = _envelope("wf-soon", 1), _envelope("wf-late", 2)
    invoker.invoke_at(time.time() + 2, "Later", soon, name=timer_name("wf-soon", "wait"))
    invoker.invoke_at(time.time() + 3600, "Later", late, name=timer_name("wf-late", "wait"))
    lambda_client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
    with SchedulerFiringLoop(client, lambda_client, interval=0.1) as loop:
        deadline = time.monotonic() + 20
        while not loop.fired and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # ten more polls: nothing fires twice, the late one stays armed
    assert endpoint.wait_idle(10)
    assert [name for name, _ in loop.fired] == [timer_name("wf-soon", "wait")]
    assert rie.bodies == [soon]
    left = [s["Name"] for s in client.list_schedules(GroupName=group)["Schedules"]]
    assert left == [timer_name("wf-late", "wait")]  # the fired one deleted itself


def test_a_due_timer_is_a_plain_invoke(moto_server, scheduler, endpoint, rie) -> None:
    client, group = scheduler
    endpoint.register("Now", rie.url)
    invoker = _invoker(moto_server, endpoint, group, prefix="")
    invoker.invoke_at(time.time() - 5, "Now", _envelope("wf-now"), name=timer_name("wf-now", "retry"))
    assert endpoint.wait_idle(10)
    assert rie.bodies == [_envelope("wf-now")]
    assert client.list_schedules(GroupName=group)["Schedules"] == []


def test_oversized_envelope_is_scheduled_by_reference(moto_server, scheduler, endpoint, dynamodb_store) -> None:
    client, group = scheduler
    invoker = _invoker(moto_server, endpoint, group, store=dynamodb_store, limit=2000)
    name = timer_name("wf-big", "wait")
    invoker.invoke_at(time.time() + 600, "Later", _envelope("wf-big", "y" * 5000), name=name)
    event = json.loads(client.get_schedule(Name=name, GroupName=group)["Target"]["Input"])
    assert set(event) == {"unum_envelope_ref", "workflow"} and event["workflow"] == "wf-big"
    assert dynamodb_store.get(event["unum_envelope_ref"]) is not None


def test_timer_configuration_errors_are_one_line() -> None:
    plain = open_invoker("lambda://?endpoint=http://127.0.0.1:9&region=us-east-1")
    with pytest.raises(ConfigurationError, match="no scheduler role .*schedule_role="):
        plain.invoke_at(time.time() + 60, "F", _envelope("wf"), name=timer_name("wf", "wait"))
    with pytest.raises(ConfigurationError, match="schedule_role: expected an IAM role ARN"):
        open_invoker("lambda://?endpoint=http://127.0.0.1:9&schedule_role=nope")
    with pytest.raises(ConfigurationError, match="schedule_group"):
        open_invoker(f"lambda://?endpoint=http://127.0.0.1:9&schedule_role={ROLE}&schedule_group=a/b")


def test_a_target_that_refuses_is_retried_until_it_takes_the_timer(moto_server, scheduler, endpoint, rie) -> None:
    client, group = scheduler
    invoker = _invoker(moto_server, endpoint, group, prefix="")
    name = timer_name("wf-retry", "wait")
    invoker.invoke_at(time.time() + 1.5, "Later", _envelope("wf-retry"), name=name)
    lambda_client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
    with SchedulerFiringLoop(client, lambda_client, group=group, interval=0.1) as loop:
        deadline = time.monotonic() + 20
        while loop.stats["invoke_errors"] < 3 and time.monotonic() < deadline:
            time.sleep(0.1)  # "Later" is not deployed yet: the endpoint answers 404
        assert loop.stats["invoke_errors"] >= 3 and loop.fired == []
        assert [s["Name"] for s in client.list_schedules(GroupName=group)["Schedules"]] == [name]
        endpoint.register("Later", rie.url)
        while not loop.fired and time.monotonic() < deadline:
            time.sleep(0.1)
    assert endpoint.wait_idle(10)
    assert rie.bodies == [_envelope("wf-retry")]
    assert client.list_schedules(GroupName=group)["Schedules"] == []
