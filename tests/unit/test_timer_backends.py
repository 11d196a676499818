"""The pure parts of the platform timer backends: EventBridge Scheduler's `at(...)` expressions
(never early), function ARNs from the scheduler role, and Cloud Tasks' chaining of timers
beyond its 30-day horizon (hop times and task ids) - no I/O."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unum_entry.errors import ConfigurationError
from unum_entry.invokers.cloud_tasks import CHAIN_MARGIN, MAX_SCHEDULE_AHEAD, CloudTasksTimers, hop
from unum_entry.invokers.eventbridge_scheduler import EventBridgeTimers, at_expression, parse_at_expression

pytestmark = pytest.mark.unit

AHEAD = MAX_SCHEDULE_AHEAD - CHAIN_MARGIN


@given(st.floats(min_value=1e9, max_value=4e9, allow_nan=False))
def test_at_expression_is_never_early_and_at_most_a_second_late(when: float) -> None:
    fired = parse_at_expression(at_expression(when))
    assert fired is not None and when <= fired < when + 1


def test_function_arn_comes_from_the_role_and_region() -> None:
    timers = EventBridgeTimers(role_arn="arn:aws-cn:iam::123456789012:role/path/sched", prefix="stack-",
                               region="cn-north-1", invoke_now=lambda f, p: None)
    assert timers.function_arn("Wait") == "arn:aws-cn:lambda:cn-north-1:123456789012:function:stack-Wait"
    with pytest.raises(ConfigurationError, match="schedule_role"):
        EventBridgeTimers(role_arn="arn:aws:iam::12:role/x", prefix="", region="us-east-1", invoke_now=lambda f, p: None)


@given(st.floats(min_value=0, max_value=400 * 86400), st.floats(min_value=1e9, max_value=2e9))
def test_every_hop_is_within_the_horizon_and_the_chain_ends_at_when(delay: float, now: float) -> None:
    when = now + delay
    at, remaining = hop(when, now)
    assert at - now <= AHEAD + 1e-6
    assert math.isclose(at + remaining * AHEAD, when, rel_tol=0, abs_tol=1e-3)
    if remaining:
        assert at > now  # progress: every hop moves forward
        assert remaining == hop(when, at)[1] + 1  # re-armed at the hop, one fewer to go


def test_chained_hops_are_tasks_named_by_the_hops_left(monkeypatch) -> None:
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)  # an earlier test's emulator must not change the URL
    now = 1_800_000_000.0
    timers = CloudTasksTimers(queue="projects/p/locations/l/queues/q", project="p", service_account="sa@p.iam",
                              topic=lambda f: f"t-{f}", message=lambda payload, workflow: b"\x81\xa1a\x01",
                              publish_now=lambda f, p: None, clock=lambda: now)
    when = now + 75 * 86400
    first = timers.task(when, "Wait", {"workflow": "wf"}, name="m-abc")
    assert first.name == "projects/p/locations/l/queues/q/tasks/m-abc-2"
    assert first.schedule_time.timestamp() == pytest.approx(when - 2 * AHEAD, abs=1e-3)
    assert first.http_request.oauth_token.service_account_email == "sa@p.iam"
    assert first.http_request.url == "https://pubsub.googleapis.com/v1/projects/p/topics/t-Wait:publish"
    near = timers.task(now + 3600, "Wait", {"workflow": "wf"}, name="m-abc")
    assert near.name.endswith("/tasks/m-abc")


def test_a_queue_without_a_service_account_is_refused_outside_the_emulator(monkeypatch) -> None:
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST", raising=False)
    with pytest.raises(ConfigurationError, match="tasks_sa="):
        CloudTasksTimers(queue="projects/p/locations/l/queues/q", project="p", topic=str,
                         message=lambda payload, workflow: b"", publish_now=lambda f, p: None)
