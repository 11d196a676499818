"""The shortcuts of a delivery's hot path answer what the plain code answers: the handler's
context (its timers built on first use, through the real Runtime, with and without the steps
layer), the envelopes a plan builds, the remembered ledger, the written-out Record."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from unum_entry.context import InvocationContext
from unum_entry.envelope import ROOT, DataRef, Envelope, Frame
from unum_entry.ir import parse_ir
from unum_entry.plan import _successor
from unum_entry.retention import Ledger, Retention
from unum_entry.runtime import Runtime, RuntimeConfig, new_workflow
from unum_entry.steps import StepContext, StepsLayer, durable
from unum_entry.stores.base import Kind, Record
from unum_entry.stores.memory import MemoryStore
from unum_entry.timers import Timers

pytestmark = pytest.mark.unit

T0, TTL, MARGIN = 1_800_000_000.0, 1000, 100


class Recording:
    def __init__(self) -> None:
        self.invoked: list[tuple[str, dict[str, Any]]] = []
        self.timers: list[tuple[float, str, dict[str, Any], str]] = []

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.invoked.append((function, payload))

    def invoke_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        self.timers.append((when, function, payload, name))


def runtime(handler: Any, *, layer: Any = None) -> tuple[Runtime, Recording]:
    clock = lambda: T0  # noqa: E731
    invoker = Recording()
    ir = parse_ir({"unum_ir": 1, "function": "F", "handler": "app.handler",
                   "instructions": [{"op": "invoke", "function": "G"}]}, source="ir")
    config = RuntimeConfig(retention=Retention(ttl_seconds=TTL, margin_seconds=MARGIN, clock=clock), watchdog=False)
    extra = {"layer": layer} if layer is not None else {}
    return Runtime(ir, handler, MemoryStore(ttl_seconds=TTL, clock=clock), invoker, config=config, **extra), invoker


@pytest.mark.parametrize("layer", [None, StepsLayer], ids=["plain", "steps"])
def test_a_handler_that_arms_a_timer_gets_the_timers_of_its_delivery(layer: Any) -> None:
    seen: list[Any] = []

    def handler(event: Any, ctx: InvocationContext) -> Any:
        assert ctx.timers is ctx.timers  # built once
        ctx.timers.arm(T0 + 5, {"tick": 1}, name=ctx.timers.name("wait", ctx.invocation))
        seen.append(ctx)
        return event

    rt, invoker = runtime(handler, layer=layer)
    try:
        rt.handle(new_workflow({"n": 1}, "wf-timers"))
    finally:
        rt.close()
    [ctx] = seen
    assert isinstance(ctx, StepContext if layer else InvocationContext)
    timers = ctx.timers
    assert isinstance(timers, Timers) and timers.store is rt.store and timers.function == "F"
    assert timers.envelope.workflow == "wf-timers" and timers.latest == ctx.deadline - MARGIN
    assert ctx.deadline == int(T0) + TTL and (ctx.workflow_id, ctx.function_name, ctx.attempt) == ("wf-timers", "F", 0)
    [(when, function, payload, _)] = invoker.timers
    assert (when, function) == (T0 + 5, "F") and Envelope.from_wire(payload).inputs[0].value == {"tick": 1}
    assert len(invoker.invoked) == 1  # and the delivery went on: G invoked


@pytest.mark.parametrize("layer", [None, StepsLayer], ids=["plain", "steps"])
def test_a_handler_that_never_reads_its_timers_does_not_build_them(layer: Any) -> None:
    seen: list[Any] = []
    rt, _ = runtime(lambda event, ctx: seen.append(ctx) or event, layer=layer)
    try:
        rt.handle(new_workflow(1, "wf-lazy"))
    finally:
        rt.close()
    [ctx] = seen
    slot = InvocationContext.__dict__["timers"]  # the field's own slot: unset until the timers are built
    with pytest.raises(AttributeError):
        slot.__get__(ctx)
    assert isinstance(ctx.timers, Timers) and slot.__get__(ctx) is ctx.timers  # built when read, once
    with pytest.raises(AttributeError, match="no attribute 'timerz'"):
        ctx.timerz  # noqa: B018  # any other missing attribute is missing


def test_a_durable_handler_steps_and_sees_the_same_identity() -> None:
    @durable
    def handler(event: Any, ctx: StepContext) -> Any:
        return ctx.step("one", lambda: event + 1)

    rt, invoker = runtime(handler, layer=StepsLayer)
    try:
        report = rt.handle(new_workflow(1, "wf-steps"))
    finally:
        rt.close()
    assert report is not None and report.value == 2 and len(invoker.invoked) == 1


def test_a_context_still_copies_and_compares_as_a_value() -> None:
    seen: list[Any] = []
    rt, _ = runtime(lambda event, ctx: seen.append(ctx) or event)
    try:
        rt.handle(new_workflow(1, "wf-copy"))
    finally:
        rt.close()
    [ctx] = seen
    copy = replace(ctx, attempt=3)
    assert copy.attempt == 3 and copy.invocation == ctx.invocation and isinstance(copy.timers, Timers)
    assert replace(ctx) == ctx and "timers" not in repr(ctx)


@pytest.mark.parametrize("frames", [ROOT, (*ROOT, Frame(3, 8, 1))])
def test_a_planned_envelope_is_the_one_the_constructor_builds(frames: tuple[Frame, ...]) -> None:
    inputs = (DataRef(ref="c-1", value={"a": [1]}),)
    built = _successor("wf", frames, inputs, 1234)
    assert built == Envelope(workflow="wf", frames=frames, inputs=inputs, deadline=1234)
    assert built.to_wire() == Envelope(workflow="wf", frames=frames, inputs=inputs, deadline=1234).to_wire()


def test_ledger_of_is_always_the_envelopes_own() -> None:
    one, two = Retention(clock=lambda: T0), Retention(clock=lambda: T0)
    for workflow, deadline, retention in [("a", 5, one), ("a", 5, one), ("b", 5, one), ("b", 6, one), ("b", 6, two)]:
        ledger = Ledger.of(Envelope(workflow=workflow, deadline=deadline), retention)
        assert (ledger.workflow, ledger.deadline, ledger.retention) == (workflow, deadline, retention)
        assert ledger.retention is retention


def test_a_record_is_built_as_the_dataclass_built_it() -> None:
    record = Record("k", Kind.SET, "wf", 7, size=3)
    assert (record.value, record.size, record.members) == (None, 3, {})
    # A record built without members shares one read-only empty mapping (not a dict per record).
    shared = Record("k", Kind.CHECKPOINT, "wf", 7).members
    assert shared is Record("j", Kind.SET, "wf", 7).members
    with pytest.raises(TypeError):
        shared[0] = "m"  # type: ignore[index]
    assert replace(record, value=b"x") == Record(key="k", kind=Kind.SET, workflow="wf", expires_at=7, value=b"x",
                                                 size=3, members={})
    # (read-only by type, not at run time: tests/unit/test_read_only.py has mypy refuse a write)


def test_a_plain_handler_under_the_steps_layer_gets_the_context_the_layer_would_build() -> None:
    """The runtime builds a plain handler's step context itself (`Layer.plain_context`) and calls
    the handler directly (`Layer.wraps_calls`): the context is the one `StepsLayer.context`
    builds (same class, same fields, no journal), and a step in it still explains itself."""
    from unum_entry.context import DeliveryContext
    from unum_entry.errors import StepError

    seen: list[Any] = []
    rt, _ = runtime(lambda event, ctx: seen.append(ctx) or event, layer=StepsLayer)
    try:
        rt.handle(new_workflow(1, "wf-plain"))
        [ctx] = seen
        fields = (ctx.workflow_id, ctx.function_name, ctx.invocation, ctx.attempt, ctx.index, ctx.size, ctx.iteration,
                  ctx.deadline, ctx.timers)
        built = rt.layer.context(DeliveryContext(*fields), new_workflow(1, "wf-plain"), ctx.invocation)
        assert (rt.layer.plain_context, rt.layer.wraps_calls) == (type(built), False)
        assert type(ctx) is type(built) and ctx == built and ctx._journal is None
        with pytest.raises(StepError, match="steps need the handler declared with @unum_entry.steps.durable"):
            ctx.step("a", lambda: 1)
    finally:
        rt.close()


def test_a_durable_handler_runs_through_the_layer() -> None:
    @durable
    def handler(event: Any, ctx: StepContext) -> Any:
        return event

    rt, _ = runtime(handler, layer=StepsLayer)
    try:
        assert (rt.layer.plain_context, rt.layer.wraps_calls) == (None, True)
    finally:
        rt.close()


def test_a_branch_joins_with_its_own_workflows_ledger_after_another_workflows_branch() -> None:
    """The runtime keeps the last fan-in branch's ledger (`_leaf_join`): a branch of another
    workflow, or of the same id with another deadline, joins with a ledger of its own."""
    clock = lambda: T0  # noqa: E731
    ir = parse_ir({"unum_ir": 1, "function": "F", "handler": "app.handler",
                   "instructions": [{"op": "fan_in", "function": "Sum"}]}, source="ir")
    config = RuntimeConfig(retention=Retention(ttl_seconds=TTL, margin_seconds=MARGIN, clock=clock), watchdog=False)
    store = MemoryStore(ttl_seconds=TTL, clock=clock)
    rt = Runtime(ir, lambda event, ctx: event, store, Recording(), config=config)
    branches = [("wf-a", 1), ("wf-a", 2), ("wf-b", 1), ("wf-a", 3), ("wf-c", 4), ("wf-c", 20)]  # (20: a shard of its own)
    deadlines = {"wf-a": int(T0) + 500, "wf-b": int(T0) + 700, "wf-c": int(T0) + 900}
    try:
        for workflow, index in branches:
            deadline = deadlines[workflow] + (index if workflow == "wf-c" else 0)  # wf-c: a deadline per branch
            rt.handle(Envelope(workflow=workflow, frames=(*ROOT, Frame(index, 40, 0)), deadline=deadline,
                               inputs=(DataRef(value=index),)))
    finally:
        rt.close()
    shards = {(record.workflow, record.expires_at, tuple(sorted(record.members)))
              for record in store.records() if record.kind is Kind.SET}
    assert shards == {("wf-a", deadlines["wf-a"], (1, 2, 3)), ("wf-b", deadlines["wf-b"], (1,)),
                      ("wf-c", deadlines["wf-c"] + 4, (4,)), ("wf-c", deadlines["wf-c"] + 20, (4,))}
