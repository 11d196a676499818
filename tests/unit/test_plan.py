"""Egress planning: the pure function from (IR, envelope, committed output) to actions."""

from __future__ import annotations

import pytest

from unum_entry import naming
from unum_entry.codec import encode
from unum_entry.envelope import ROOT, DataRef, Envelope, Frame, Gather
from unum_entry.ir import parse_ir
from unum_entry.plan import Committed, PlanError, continuation, plan

pytestmark = pytest.mark.unit

CKPT = "c-origin"


def make(instructions, **ir_fields):
    return parse_ir({"unum_ir": 1, "function": "F", "handler": "app.handler", "instructions": instructions, **ir_fields})


def run(ir, value, env=None, limit=1024, checkpoint=CKPT):
    env = env or Envelope(workflow="wf", inputs=(DataRef(value=None),))
    return plan(ir, env, Committed(value, len(encode(value)), checkpoint), invocation=CKPT, inline_limit=limit)


def test_chain_passes_value_inline_with_its_reference_and_the_deadline():
    env = Envelope(workflow="wf", inputs=(DataRef(value=None),), deadline=1234)
    p = run(make([{"op": "invoke", "function": "G"}]), {"x": 1}, env)
    (call,) = p.calls
    assert call.function == "G"
    assert call.envelope.inputs == (DataRef(ref=CKPT, value={"x": 1}),)
    assert call.envelope.deadline == 1234 and not call.envelope.redelivered
    assert call.envelope.frames == ROOT and not p.terminal


def test_large_values_travel_by_reference_only():
    (call,) = run(make([{"op": "invoke", "function": "G"}]), "x" * 5000, limit=100).calls
    assert call.envelope.inputs == (DataRef(ref=CKPT),)


def test_first_transition_whose_condition_holds_fires():
    ir = make([{"op": "invoke", "function": "Big", "when": {"Variable": "$.n", "NumericGreaterThan": 10}},
               {"op": "invoke", "function": "Small"}])
    assert run(ir, {"n": 11}).calls[0].function == "Big"
    assert run(ir, {"n": 3}).calls[0].function == "Small"


def test_nothing_fires_means_terminal():
    ir = make([{"op": "invoke", "function": "G", "when": {"Variable": "$.go", "BooleanEquals": True}}])
    assert run(ir, {"go": False}).terminal


def test_conditions_see_the_invocations_identity_but_never_its_attempt():
    with pytest.raises(Exception, match=r"instructions\[0\]\.when\.Variable: conditions cannot use \$\$\.Attempt"):
        make([{"op": "invoke", "function": "G", "when": {"Variable": "$$.Attempt", "NumericEquals": 0}}])
    with pytest.raises(Exception, match=r"\.when: a condition needs \"checkpoint\": true"):
        make([{"op": "invoke", "function": "G", "when": {"Variable": "$.x", "NumericEquals": 0}}], checkpoint=False)


def test_conditions_see_request_metadata():
    ir = make([{"op": "invoke", "function": "Last", "when": {"Variable": "$$.Fanout.Index", "NumericEquals": 2}}])
    env = Envelope(workflow="wf", frames=(Frame(), Frame(2, 3, 0)), inputs=(DataRef(value=1),))
    assert run(ir, 1, env).calls[0].function == "Last"


def test_map_pushes_frames_and_sends_each_item_by_its_position():
    ir = make([{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "W", "items": "$.xs"}])
    p = run(ir, {"xs": [10, 20, 30]})
    for i, call in enumerate(p.calls):
        assert call.envelope.frames == (Frame(), Frame(i, 3, 0))
        assert call.envelope.inputs == (DataRef(ref=CKPT, value=[10, 20, 30][i], item=i, path="$.xs"),)


def test_neighbour_joins_hold_one_slot_for_the_first_index_and_two_after():
    ir = make([{"op": "fan_in", "function": "Fold", "shape": "neighbour", "slot": 0}])
    widths = []
    for i in range(3):
        env = Envelope(workflow="wf", frames=(Frame(), Frame(i, 3, 0)), inputs=(DataRef(value=1),))
        join = run(ir, 1, env).join
        assert join.set_key == naming.fan_in_set_key("wf", "Fold", (Frame(), Frame(i, 3, 0)), 3)
        widths.append(join.width)
    assert widths == [1, 2, 2]


def test_fan_out_gives_every_branch_the_whole_output():
    p = run(make([{"op": "fan_out", "branches": ["A", "B"]}]), {"v": 1})
    assert [c.function for c in p.calls] == ["A", "B"]
    assert all(c.envelope.inputs == (DataRef(ref=CKPT, value={"v": 1}),) for c in p.calls)


def test_aggregate_fan_in_pops_the_frame_and_uses_the_index_as_slot():
    env = Envelope(workflow="wf", frames=(Frame(), Frame(1, 4, 0)), inputs=(DataRef(value=1),))
    join = run(make([{"op": "fan_in", "function": "Sum"}]), 1, env).join
    assert join.slot == 1 and join.width == 4 and join.target_frames == ROOT
    assert join.set_key == naming.fan_in_set_key("wf", "Sum", ROOT, 4)
    target = join.target_call(env)
    assert target.function == "Sum" and target.envelope.gathered and target.envelope.inputs == ()
    assert target.envelope.gather == Gather(join.set_key, 4)


def test_neighbour_fan_in_past_the_last_index_falls_through():
    ir = make([{"op": "fan_in", "function": "Fold", "shape": "neighbour", "slot": 1, "offset": 1},
               {"op": "pop"}, {"op": "invoke", "function": "Final"}])
    middle = Envelope(workflow="wf", frames=(Frame(), Frame(1, 3, 0)), inputs=(DataRef(value=1),))
    last = Envelope(workflow="wf", frames=(Frame(), Frame(2, 3, 0)), inputs=(DataRef(value=1),))
    assert run(ir, 1, middle).join.target_frames == (Frame(), Frame(2, 3, 0))
    p = run(ir, 1, last)
    assert p.join is None and p.calls[0].function == "Final" and p.calls[0].envelope.frames == ROOT


def test_next_increments_the_iteration_for_what_follows():
    ir = make([{"op": "next"}, {"op": "invoke", "function": "F"}])
    env = Envelope(workflow="wf", frames=(Frame(0, 1, 4),), inputs=(DataRef(value=1),))
    assert run(ir, 1, env).calls[0].envelope.frames == (Frame(0, 1, 5),)


def test_empty_map_calls_the_aggregate_target_with_nothing():
    ir = make([{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "W"}])
    (call,) = run(ir, []).calls
    assert call.function == "Sum" and call.envelope.gathered and call.envelope.inputs == ()
    assert call.envelope.gather is None


@pytest.mark.parametrize("instructions, value, env, words", [
    ([{"op": "pop"}], 1, None, "pop at the root"),
    ([{"op": "map", "function": "W"}], {"not": "a list"}, None, "needs a list"),
    ([{"op": "fan_in", "function": "J"}], 1, None, "outside any fan-out"),
    ([{"op": "create_set", "function": "F", "shape": "neighbour"}, {"op": "map", "function": "W"}], [], None,
     "neighbour join"),
])
def test_outputs_that_do_not_fit_the_ir_are_plan_errors(instructions, value, env, words):
    with pytest.raises(PlanError, match=words):
        run(make(instructions), value, env)


def test_without_a_checkpoint_values_go_inline():
    ir = make([{"op": "invoke", "function": "G"}], checkpoint=False)
    env = Envelope(workflow="wf", inputs=(DataRef(ref="c-prev", value=1),))
    (call,) = run(ir, "x" * 5000, env, limit=10, checkpoint=None).calls
    assert call.envelope.inputs == (DataRef(value="x" * 5000),)


def test_map_with_max_concurrency_invokes_the_first_lanes_and_each_item_passes_its_lane_on():
    ir = make([{"op": "create_set", "function": "Sum"}, {"op": "map", "function": "W", "items": "$.xs", "max_concurrency": 2}])
    p = run(ir, {"xs": [10, 20, 30, 40, 50]})
    assert [c.envelope.top.index for c in p.calls] == [0, 1]
    assert all(c.envelope.lanes == 2 for c in p.calls)
    item_ir = make([{"op": "fan_in", "function": "Sum"}])
    first = p.calls[1].envelope
    nxt = continuation(item_ir, first)
    assert nxt.function == "F"  # the map item's own function
    assert nxt.envelope.frames == (Frame(), Frame(3, 5, 0))
    assert nxt.envelope.inputs == (DataRef(ref=CKPT, item=3, path="$.xs"),)  # by reference: 1 holds only its item
    assert nxt.envelope.lanes == 2
    assert continuation(item_ir, nxt.envelope) is None  # 3 + 2 is past the end
    assert continuation(item_ir, Envelope(workflow="wf", inputs=(DataRef(value=1),))) is None


@pytest.mark.parametrize("limit, value, calls", [(0, {"xs": [1, 2, 3]}, 3), (9, {"xs": [1, 2, 3]}, 3),
                                                 ("$.k", {"xs": [1, 2, 3], "k": 1}, 1)])
def test_max_concurrency_zero_or_at_least_the_items_is_no_limit_and_a_path_reads_the_output(limit, value, calls):
    ir = make([{"op": "map", "function": "W", "items": "$.xs", "max_concurrency": limit}])
    assert len(run(ir, value).calls) == calls


def test_max_concurrency_path_must_hold_a_count():
    ir = make([{"op": "map", "function": "W", "items": "$.xs", "max_concurrency": "$.k"}])
    with pytest.raises(PlanError, match="max_concurrency at \\$.k must be an integer >= 0"):
        run(ir, {"xs": [1], "k": "two"})
