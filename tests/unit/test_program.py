"""The precompiled plan (unum_entry.plan.Program) and the hot names (unum_entry.naming): the
shortcuts of the hot path answer exactly what the reference code answers."""

from __future__ import annotations

import hashlib

import msgpack  # type: ignore[import-untyped]
import pytest
from hypothesis import given
from hypothesis import strategies as st

from unum_entry import naming
from unum_entry.codec import encode
from unum_entry.envelope import ROOT, DataRef, Envelope, Frame
from unum_entry.ir import parse_ir
from unum_entry.errors import PlanError
from unum_entry.plan import Committed, Program, plan

pytestmark = pytest.mark.unit


def reference(domain: str, *parts: object) -> str:
    """A name's digest as naming has always computed it (names are stored: they must not change)."""
    return hashlib.blake2b(msgpack.packb([domain, *parts], use_bin_type=True), digest_size=16).hexdigest()


frames_st = st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 2**40), st.integers(0, 2**32)),
                     min_size=1, max_size=5).map(
    lambda fs: tuple(Frame(min(i, s - 1) if s else 0, max(s, 1), it) for i, s, it in fs))


@given(st.text(min_size=1, max_size=300), st.text(min_size=1, max_size=80), frames_st,
       st.integers(0, 30), st.integers(0, 2**62))
def test_the_hot_names_are_the_reference_digests_byte_for_byte(workflow, function, frames, level, index):
    rows = [[f.index, f.size, f.iteration] for f in frames]
    assert naming.checkpoint_key(workflow, function, frames) == "c-" + reference("checkpoint", workflow, function, rows)
    assert naming.result_key(workflow, frames) == "r-" + reference("result", workflow, [f.index for f in frames[1:]])
    assert naming.set_shard_key(workflow, level, index) == "s-" + reference("shard", workflow, level, index)


def make(instructions):
    return parse_ir({"unum_ir": 1, "function": "F", "handler": "app.handler", "instructions": instructions})


PROGRAMS = [
    [{"op": "invoke", "function": "G"}],                                   # a chain hop: the shortcut
    [{"op": "invoke", "function": "G", "path": "$.a"}],
    [{"op": "fan_in", "function": "Sum", "shape": "aggregate"}],           # a map branch: the shortcut
    [{"op": "fan_in", "function": "Fold", "shape": "neighbour"}],
    [{"op": "invoke", "function": "G", "when": {"Variable": "$.a", "NumericEquals": 1}}],  # the interpreter
    [{"op": "pop"}, {"op": "fan_in", "function": "Sum", "shape": "aggregate"}],
    [],
]


@pytest.mark.parametrize("instructions", PROGRAMS)
@pytest.mark.parametrize("frames", [(*ROOT, Frame(0, 3, 0)), (*ROOT, Frame(2, 3, 0)), (*ROOT, Frame(1, 2, 0), Frame(4, 5, 1))])
@pytest.mark.parametrize("limit", [1, 1024])
def test_a_program_plans_what_the_interpreter_plans(instructions, frames, limit):
    ir = make(instructions)
    program = Program(ir)
    for workflow in ("wf-1", "wf-2", "wf-1"):  # a join set's name is remembered per fan-out, never mixed up
        env = Envelope(workflow=workflow, frames=frames, inputs=(DataRef(value=None),), deadline=99)
        value = {"a": 1}
        out = Committed(value, len(encode(value)), "c-origin")
        assert outcome(lambda: program.plan(env, out, invocation="c-x", inline_limit=limit)) == \
            outcome(lambda: plan(ir, env, out, invocation="c-x", inline_limit=limit))


def outcome(planning):
    """The plan, or the error planning raised (a pop to the root then a fan-in: the same PlanError)."""
    try:
        return planning()
    except PlanError as exc:
        return repr(exc)


@pytest.mark.parametrize("instructions", PROGRAMS)
@pytest.mark.parametrize("frames", [(*ROOT, Frame(0, 3, 0)), (*ROOT, Frame(2, 3, 0)), (*ROOT, Frame(1, 2, 0), Frame(4, 5, 1))])
def test_a_branch_plan_is_the_plan_of_its_envelope_whatever_the_output(instructions, frames):
    """`branch_plan` of a fan-in branch's envelope, built before its output exists, is what
    `plan` answers for that envelope, whatever the output; every other envelope's plan (another
    branch, another workflow) is its own."""
    ir = make(instructions)
    program = Program(ir)
    value = {"a": 1}
    out = Committed(value, len(encode(value)), "c-origin")
    envs = [Envelope(workflow=workflow, frames=frames[:-1] + (Frame(index, frames[-1].size, 0),),
                     inputs=(DataRef(value=None),), deadline=99)
            for workflow in ("wf-1", "wf-2") for index in range(frames[-1].size)]
    for env in envs:
        expected = outcome(lambda: plan(ir, env, out, invocation="c-x", inline_limit=1024))
        assert outcome(lambda: program.plan(env, out, invocation="c-x", inline_limit=1024)) == expected
        branch = outcome(lambda: program.branch_plan(env))
        if program.branch is None:
            assert branch is None
        else:
            assert branch == expected  # (egress plans a fan-in branch with it: `egress.egress`)
