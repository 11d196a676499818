"""`plan.Program`, the precompiled fast path, against the IR interpreter (`plan.plan`) it stands
beside: for any program and any envelope and output, it plans exactly what the interpreter
plans (the chain-hop shortcut `hop_call`, the fan-in branch's `branch_plan` and its remembered
join-set name included). Both stay because the shortcut buys >= 10 % of a chain hop's CPU
(bench/fastpaths-report.txt)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unum_entry.codec import encode
from unum_entry.envelope import DataRef, Envelope, Frame
from unum_entry.errors import UnumError
from unum_entry.ir import parse_ir
from unum_entry.plan import Committed, Plan, Program, plan

pytestmark = pytest.mark.unit

CONDITION = {"Variable": "$.n", "NumericGreaterThan": 1}

single = st.sampled_from([
    {"op": "invoke", "function": "G"},
    {"op": "invoke", "function": "G", "path": "$.n"},
    {"op": "invoke", "function": "G", "when": CONDITION},
    {"op": "fan_in", "function": "Sum"},
    {"op": "fan_in", "function": "Sum", "when": CONDITION},
    {"op": "fan_in", "function": "Fold", "shape": "neighbour", "slot": 1, "offset": 1},
    {"op": "fan_in", "function": "Fold", "shape": "neighbour", "slot": 0, "offset": 0},
])
programs = st.one_of(st.lists(single, min_size=1, max_size=1),  # the shapes the shortcut takes
                     st.lists(single, min_size=2, max_size=3),  # and ones it leaves to the interpreter
                     st.just([]))
frames = st.lists(st.tuples(st.integers(0, 4), st.integers(1, 5), st.integers(0, 2))
                  .filter(lambda f: f[0] < f[1]), min_size=0, max_size=2)
values = st.one_of(st.integers(-3, 3), st.fixed_dictionaries({"n": st.integers(-1, 3)}),
                   st.fixed_dictionaries({"n": st.text(max_size=40)}))


def _plan_or_error(make: Any) -> Plan | tuple[str, str]:
    try:
        return make()
    except UnumError as exc:  # the same error, with the same message, from both
        return (type(exc).__name__, str(exc))


@settings(max_examples=300, deadline=None)
@given(instructions=programs, nested=frames, value=values, checkpoint=st.sampled_from(["c-origin", None]),
       limit=st.sampled_from([0, 16, 1024]), workflow=st.sampled_from(["wf-1", "wf-2"]))
def test_a_program_plans_what_the_interpreter_plans(instructions, nested, value, checkpoint, limit, workflow):
    ir = parse_ir({"unum_ir": 1, "function": "F", "handler": "app.handler", "instructions": instructions})
    program = Program(ir)
    env = Envelope(workflow=workflow, frames=(Frame(), *(Frame(*f) for f in nested)),
                   inputs=(DataRef(ref="c-in", value=1),), deadline=1_700_000_000)
    out = Committed(value, len(encode(value)), checkpoint)
    top = env.frames[-1]
    sibling = Envelope(workflow=workflow, frames=(*env.frames[:-1], Frame(top.index, top.size + 1, top.iteration)),
                       inputs=env.inputs, deadline=env.deadline)
    for env in (env, env, sibling, env):  # again: the remembered join-set name; a sibling's: not it
        expected = _plan_or_error(lambda: plan(ir, env, out, invocation="c-origin", inline_limit=limit))
        assert _plan_or_error(lambda: program.plan(env, out, invocation="c-origin", inline_limit=limit)) == expected
        if program.hop is not None:
            hop = _plan_or_error(lambda: Plan(calls=(program.hop_call(env, out.value, out.encoded_size,
                                                                      out.checkpoint, limit),)))
            assert hop == expected
        branched = _plan_or_error(lambda: program.branch_plan(env))
        if program.branch is not None and len(env.frames) > 1:
            assert branched == expected
        else:
            assert branched is None
