"""The runner's decisions on durable timers (unum_entry/asl/timing.py), with a settable clock,
the memory store and an invoker that records what it is asked: a long Wait commits a timer wait
and stops; its timer's delivery continues after the Wait, re-arms itself when early (or before
the wait is committed), and continues the same way when delivered twice; a long Retry back-off
re-runs the Task from its timer; a waiting Task's TimeoutSeconds and HeartbeatSeconds timers race
its callback through the one callback record (exactly one wins, both orders)."""

from __future__ import annotations

from typing import Any

import pytest

from unum_entry import naming
from unum_entry.asl import callbacks
from unum_entry.asl import timing
from unum_entry.asl.runner import Fragment, Services, run
from unum_entry.codec import encode
from unum_entry.context import InvocationContext
from unum_entry.envelope import Envelope, Frame
from unum_entry.stores.base import Kind
from unum_entry.stores.memory import MemoryStore
from unum_entry.timers import TIMER, TimerNotDue, Timers

pytestmark = pytest.mark.unit

WF = "wf-timers"
T0 = 1_800_000_000.0
DEADLINE = int(T0) + 7 * 24 * 3600


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Armed:
    """An invoker that records timers (and plain invokes) instead of delivering them."""

    def __init__(self) -> None:
        self.timers: list[tuple[float, str, dict[str, Any], str]] = []
        self.invokes: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.invokes.append((function, payload))

    def invoke_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        self.timers.append((when, function, payload, name))


class World:
    """One function of a state machine, run invocation by invocation as the runtime would."""

    def __init__(self, states: dict[str, Any], head: str, task: str | None = None, *, scale: float = 1.0) -> None:
        self.clock = Clock()
        self.store = MemoryStore(clock=self.clock)
        self.invoker = Armed()
        self.fragment = Fragment(function="F", head=head, join=False, in_branch=False, states=states, task=task)
        self.scale = scale
        self.slept: list[float] = []
        self.calls: list[Any] = []

    def handler(self, event: Any, ctx: Any) -> Any:
        self.calls.append(event)
        if isinstance(event, dict) and event.get("fail"):
            raise RuntimeError("boom")
        return {"handled": event}

    def run(self, event: Any, iteration: int = 0) -> dict[str, Any]:
        """Run the invocation at `iteration` on `event`; commit its decision like the runtime."""
        frames = (Frame(0, 1, iteration),)
        env = Envelope(workflow=WF, frames=frames, deadline=DEADLINE)
        invocation = naming.checkpoint_key(WF, "F", frames)
        timers = Timers(store=self.store, invoker=self.invoker, function="F", envelope=env, clock=self.clock,
                        latest=DEADLINE - 900)
        ctx = InvocationContext(WF, "F", invocation, 0, 0, 1, iteration, DEADLINE, timers=timers)
        services = Services(sleep=self.slept.append, now=_datetime(self.clock), time_scale=self.scale)
        decision = run(self.fragment, self.handler, event, ctx, services)
        self.store.create(invocation, encode(decision), workflow=WF, expires_at=DEADLINE)
        return decision

    def fire(self, index: int = -1) -> tuple[dict[str, Any], int]:
        """The event of armed timer `index` and the iteration it delivers to."""
        _, function, payload, _ = self.invoker.timers[index]
        env = Envelope.from_wire(payload)
        assert function == "F"
        return env.inputs[0].value, env.top.iteration


def _datetime(clock: Clock) -> Any:
    from datetime import datetime, timezone
    return lambda: datetime.fromtimestamp(clock(), tz=timezone.utc)


WAIT_MACHINE = {
    "W": {"Type": "Wait", "Seconds": 7200, "Next": "After"},
    "After": {"Type": "Pass", "Parameters": {"v.$": "$.v", "after": True}, "End": True},
}


def test_a_long_wait_commits_a_timer_wait_and_arms_one_timer_at_the_next_invocation() -> None:
    world = World(WAIT_MACHINE, head="W")
    decision = world.run({"v": 1})

    assert decision["__next__"] == "__wait__" and decision["wait"]["timer"] == "wait"
    assert decision["wait"]["until"] == T0 + 7200 and world.slept == []  # nobody sleeps
    [(when, _, _, name)] = world.invoker.timers
    event, iteration = world.fire()
    assert when == T0 + 7200 and iteration == 1
    assert event[TIMER]["purpose"] == "wait" and name == naming.timer_name(WF, "wait", event[TIMER]["waiting"], 0)


def test_the_timer_continues_after_the_wait_once_due_and_a_second_delivery_decides_the_same() -> None:
    world = World(WAIT_MACHINE, head="W")
    world.run({"v": 1})
    event, iteration = world.fire()
    world.clock.now = T0 + 7200.5  # late is fine

    first = world.run(event, iteration)
    again = run(world.fragment, world.handler, event, _ctx(world, iteration), Services(sleep=world.slept.append))
    assert first == again == {"__next__": "__end__", "output": {"v": 1, "after": True}}


def _ctx(world: World, iteration: int) -> InvocationContext:
    frames = (Frame(0, 1, iteration),)
    env = Envelope(workflow=WF, frames=frames, deadline=DEADLINE)
    timers = Timers(store=world.store, invoker=world.invoker, function="F", envelope=env, clock=world.clock,
                    latest=DEADLINE - 900)
    return InvocationContext(WF, "F", naming.checkpoint_key(WF, "F", frames), 0, 0, 1, iteration, DEADLINE,
                             timers=timers)


def test_an_early_delivery_re_arms_itself_at_the_same_invocation_and_commits_nothing() -> None:
    world = World(WAIT_MACHINE, head="W")
    world.run({"v": 1})
    event, iteration = world.fire()
    world.clock.now = T0 + 10

    with pytest.raises(TimerNotDue):
        run(world.fragment, world.handler, event, _ctx(world, iteration), Services(sleep=world.slept.append))
    when, _, payload, name = world.invoker.timers[-1]
    rearmed = Envelope.from_wire(payload)
    assert when == T0 + 7200 and rearmed.top.iteration == iteration  # the same continuation, a new name
    assert rearmed.inputs[0].value[TIMER]["round"] == 1 and name != world.invoker.timers[0][3]


def test_a_timer_delivered_before_its_wait_is_committed_looks_again_shortly() -> None:
    world = World(WAIT_MACHINE, head="W")
    ctx = _ctx(world, 0)
    run(world.fragment, world.handler, {"v": 1}, ctx, Services(sleep=world.slept.append))  # armed, never committed
    event, iteration = world.fire()

    with pytest.raises(TimerNotDue):
        run(world.fragment, world.handler, event, _ctx(world, iteration), Services(sleep=world.slept.append))
    assert world.invoker.timers[-1][0] == T0 + timing.UNCOMMITTED_BACKOFF


def test_a_short_wait_sleeps_in_the_function_and_a_scaled_one_too() -> None:
    short = World({**WAIT_MACHINE, "W": {"Type": "Wait", "Seconds": 1, "Next": "After"}}, head="W")
    assert short.run({"v": 2})["__next__"] == "__end__" and short.slept == [1.0] and short.invoker.timers == []
    scaled = World(WAIT_MACHINE, head="W", scale=0.0001)  # 7200 s x 0.0001 = 0.72 s: in the function
    assert scaled.run({"v": 2})["__next__"] == "__end__" and scaled.invoker.timers == []


def test_timestamp_and_seconds_path_waits_use_timers() -> None:
    world = World({**WAIT_MACHINE, "W": {"Type": "Wait", "TimestampPath": "$.at", "Next": "After"}}, head="W")
    decision = world.run({"v": 3, "at": "2027-01-15T08:00:10Z"})  # T0 is 2027-01-15T08:00:00Z
    assert decision["wait"]["until"] == T0 + 10
    path = World({**WAIT_MACHINE, "W": {"Type": "Wait", "SecondsPath": "$.s", "Next": "After"}}, head="W", scale=0.5)
    assert path.run({"v": 3, "s": 60})["wait"]["until"] == T0 + 30


def test_a_wait_past_the_retention_fails_at_once_naming_the_state() -> None:
    world = World({**WAIT_MACHINE, "W": {"Type": "Wait", "Seconds": 8 * 24 * 3600, "Next": "After"}}, head="W")
    decision = world.run({"v": 4})
    assert decision["__next__"] == "__fail__" and decision["error"]["Error"] == "Unum.RetentionExpired"
    assert "'W'" in decision["error"]["Cause"] and world.invoker.timers == []


RETRY_MACHINE = {
    "T": {"Type": "Task", "Resource": "arn:aws:lambda:::function:F", "End": True,
          "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 60, "MaxAttempts": 2}],
          "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}]},
    "Caught": {"Type": "Pass", "Result": "caught", "End": True},
}


def test_a_long_retry_back_off_commits_a_retry_wait_and_the_timer_reruns_the_task() -> None:
    world = World(RETRY_MACHINE, head="T", task="T")
    decision = world.run({"fail": True})
    assert decision["wait"]["timer"] == "retry" and decision["wait"]["retries"] == [1]
    assert world.invoker.timers[0][0] == T0 + 60 and len(world.calls) == 1
    event, iteration = world.fire()
    world.clock.now = T0 + 60

    second = world.run(event, iteration)  # ran the Task again, failed again: back-off 120 s
    assert len(world.calls) == 2 and second["wait"]["retries"] == [2] and world.invoker.timers[-1][0] == T0 + 180
    event, iteration = world.fire()
    world.clock.now = T0 + 180
    assert world.run(event, iteration) == {"__next__": "__end__", "output": "caught"}  # MaxAttempts used: Catch


WAITING_TASK = {
    "Ask": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
            "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token"}},
            "TimeoutSeconds": 3600, "HeartbeatSeconds": 600, "ResultPath": "$.answer", "Next": "Done",
            "Catch": [{"ErrorEquals": ["States.Timeout", "States.HeartbeatTimeout"], "ResultPath": "$.error",
                       "Next": "TimedOut"}]},
    "Done": {"Type": "Pass", "End": True},
    "TimedOut": {"Type": "Pass", "Parameters": {"error.$": "$.error.Error"}, "End": True},
}


def waiting_world() -> tuple[World, str, dict[str, tuple[dict[str, Any], int]]]:
    world = World(WAITING_TASK, head="Ask", task="Ask")
    decision = world.run({"n": 1})
    assert decision["__next__"] == "__wait__"
    token = decision["wait"]["token"]
    armed = {Envelope.from_wire(p).inputs[0].value[TIMER]["purpose"]: world.fire(i)
             for i, (_, _, p, _) in enumerate(world.invoker.timers)}
    assert sorted(armed) == ["heartbeat", "timeout"]
    assert {w for w, *_ in world.invoker.timers} == {T0 + 3600, T0 + 600}
    return world, token, armed


def test_the_timeout_timer_wins_and_a_later_callback_is_refused_with_task_timed_out() -> None:
    world, token, armed = waiting_world()
    for _ in range(5):  # heartbeats keep the heartbeat timer re-arming until the timeout
        world.clock.now += 500
        callbacks.task_heartbeat(token, store=world.store)
    world.clock.now = T0 + 3600
    event, iteration = armed["timeout"]
    assert world.run(event, iteration) == {"__next__": "__end__", "output": {"error": "States.Timeout"}}

    with pytest.raises(callbacks.TaskTimedOut):
        callbacks.task_success(token, {"late": True}, store=world.store, invoker=world.invoker)
    with pytest.raises(callbacks.TaskTimedOut):
        callbacks.task_heartbeat(token, store=world.store)


def test_a_callback_first_wins_and_the_timer_then_continues_with_its_outcome() -> None:
    world, token, armed = waiting_world()
    world.clock.now = T0 + 100
    callbacks.task_success(token, {"ok": 1}, store=world.store, invoker=world.invoker)
    [(_, continuation)] = world.invoker.invokes
    world.clock.now = T0 + 3600
    event, iteration = armed["timeout"]

    via_timer = world.run(event, iteration)
    via_callback = run(world.fragment, world.handler, Envelope.from_wire(continuation).inputs[0].value,
                       _ctx(world, iteration), Services(sleep=world.slept.append))
    assert via_timer == via_callback == {"__next__": "__end__", "output": {"n": 1, "answer": {"ok": 1}}}


def test_an_early_timeout_timer_re_arms_and_a_callback_still_wins() -> None:
    world, token, armed = waiting_world()
    world.clock.now = T0 + 5
    event, iteration = armed["timeout"]
    with pytest.raises(TimerNotDue):
        world.run(event, iteration)
    assert world.invoker.timers[-1][0] == T0 + 3600
    callbacks.task_success(token, "yes", store=world.store, invoker=world.invoker)  # not refused


def test_heartbeats_defer_the_heartbeat_timeout_never_early_at_most_a_quarter_late() -> None:
    world, token, armed = waiting_world()
    event, iteration = armed["heartbeat"]
    world.clock.now = T0 + 550
    callbacks.task_heartbeat(token, store=world.store)
    world.clock.now = T0 + 600
    with pytest.raises(TimerNotDue):  # a heartbeat 50 s ago: the timer re-arms
        world.run(event, iteration)
    when = world.invoker.timers[-1][0]
    assert T0 + 550 + 600 <= when <= T0 + 550 + 600 + 600 / callbacks.HEARTBEAT_BUCKETS
    rearmed = Envelope.from_wire(world.invoker.timers[-1][2]).inputs[0].value
    world.clock.now = when
    assert world.run(rearmed, iteration) == {"__next__": "__end__", "output": {"error": "States.HeartbeatTimeout"}}
    with pytest.raises(callbacks.TaskTimedOut):
        callbacks.task_success(token, "too late", store=world.store, invoker=world.invoker)


def test_a_heartbeat_for_an_unknown_token_is_refused() -> None:
    world, token, _ = waiting_world()
    real = callbacks.Token.parse(token)
    forged = callbacks.Token(real.workflow, real.function, real.frames, "0" * 32).text()
    with pytest.raises(callbacks.InvalidToken):
        callbacks.task_heartbeat(forged, store=world.store)
    assert not [r for r in world.store.records(WF) if r.kind is Kind.MARKER]


def test_the_path_forms_of_timeout_and_heartbeat_seconds_arm_their_timers_scaled() -> None:
    states = {**WAITING_TASK, "Ask": {k: v for k, v in WAITING_TASK["Ask"].items()
                                      if k not in ("TimeoutSeconds", "HeartbeatSeconds")}}
    states["Ask"].update(TimeoutSecondsPath="$.limits.timeout", HeartbeatSecondsPath="$.limits.beat")
    world = World(states, head="Ask", task="Ask", scale=0.01)
    wait = world.run({"limits": {"timeout": 50_000, "beat": 2_000}})["wait"]

    assert wait["timeout_at"] == T0 + 500 and wait["heartbeat_span"] == 20
    assert sorted(w for w, *_ in world.invoker.timers) == [T0 + 20, T0 + 500]
    bad = World(states, head="Ask", task="Ask").run({"limits": {"timeout": -1, "beat": 2}})
    assert bad["__next__"] == "__fail__" and bad["error"]["Error"] == "States.Runtime"
    assert "TimeoutSecondsPath must be a positive number" in bad["error"]["Cause"]


def test_a_timer_whose_wait_lost_to_another_decision_is_dropped_without_re_arming() -> None:
    world = World(WAIT_MACHINE, head="W")
    run(world.fragment, world.handler, {"v": 1}, _ctx(world, 0), Services(sleep=world.slept.append))  # armed
    invocation = naming.checkpoint_key(WF, "F", (Frame(0, 1, 0),))
    world.store.create(invocation, encode({"__next__": "__end__", "output": 1}), workflow=WF, expires_at=DEADLINE)
    event, iteration = world.fire()
    world.clock.now = T0 + 7200

    with pytest.raises(TimerNotDue):
        world.run(event, iteration)
    assert len(world.invoker.timers) == 1  # not re-armed
