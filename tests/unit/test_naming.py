"""Names: deterministic, fixed length, unique per invocation."""

from __future__ import annotations

import itertools
import sys
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unum_entry import naming
from unum_entry.envelope import Frame

pytestmark = pytest.mark.unit

frames_st = st.lists(st.builds(lambda i, extra, it: Frame(i, i + 1 + extra, it),
                               st.integers(0, 50), st.integers(0, 5), st.integers(0, 5)), max_size=3)


@given(wf=st.text(min_size=1, max_size=20), fn=st.text(min_size=1, max_size=10), frames=frames_st)
def test_deterministic_and_fixed_length(wf, fn, frames):
    frames = (Frame(), *frames)
    a = naming.checkpoint_key(wf, fn, frames)
    assert a == naming.checkpoint_key(wf, fn, frames)
    assert len(a) == 34 and a.startswith("c-")
    for key in (naming.fan_in_set_key(wf, fn, frames, 3), naming.set_shard_key(a, 0, 3), naming.result_key(wf, frames),
                naming.failure_key(wf)):
        assert len(key) == 34


def test_every_invocation_of_a_workflow_gets_its_own_name():
    invocations = set()
    names = set()
    for fn, index, size, iteration, depth in itertools.product(["A", "B"], range(4), [4, 5], range(3), [1, 2]):
        frames = (Frame(),) * (depth - 1) + (Frame(index, size, iteration),)
        invocations.add((fn, frames))
        names.add(naming.checkpoint_key("wf", fn, frames))
    names.add(naming.checkpoint_key("wf2", "A", (Frame(),)))
    assert len(names) == len(invocations) + 1


def test_kinds_never_collide():
    frames = (Frame(), Frame(1, 3, 0))
    keys = {naming.checkpoint_key("w", "F", frames), naming.fan_in_set_key("w", "F", frames, 3),
            naming.result_key("w", frames), naming.failure_key("w")}
    assert len(keys) == 4


def test_result_key_ignores_function_and_iteration():
    # A late duplicate that takes another branch or loops differently lands on the same result.
    assert naming.result_key("w", (Frame(0, 1, 0),)) == naming.result_key("w", (Frame(0, 1, 7),))
    assert naming.result_key("w", (Frame(), Frame(2, 3, 0))) != naming.result_key("w", (Frame(), Frame(1, 3, 0)))


deep_frames_st = st.lists(st.builds(Frame, st.integers(0, 2**40), st.integers(1, 2**40), st.integers(0, 300)),
                          min_size=0, max_size=20)  # past 15 frames the list's msgpack header is 3 bytes


@given(calls=st.lists(st.tuples(st.sampled_from(["wf-a", "wf-b", "ü" * 40]), deep_frames_st,
                                st.integers(0, 2**33), st.integers(0, 9)), min_size=1, max_size=12))
def test_checkpoint_names_are_checkpoint_keys_whatever_came_before(calls):
    """`CheckpointNames` keeps the hasher of the last name's parent frames: every name it makes,
    in any order of workflows and parents (the same parent again, another, one frame only), is
    `checkpoint_key`'s."""
    names = naming.CheckpointNames("F")
    for workflow, parent, index, iteration in calls:
        frames = (Frame(), *parent, Frame(index, index + 1, iteration))
        assert names.key(workflow, frames) == naming.checkpoint_key(workflow, "F", frames)
        assert names.key(workflow, frames[:1]) == naming.checkpoint_key(workflow, "F", frames[:1])


def test_checkpoint_names_from_threads_that_name_other_workflows_at_once():
    names = naming.CheckpointNames("F")
    wrong: list[tuple[str, int]] = []

    def name_all(workflow: str) -> None:
        for i in range(3000):
            frames = (Frame(), Frame(i, 3000, 0))
            if names.key(workflow, frames) != naming.checkpoint_key(workflow, "F", frames):
                wrong.append((workflow, i))

    threads = [threading.Thread(target=name_all, args=(f"wf-{k}",)) for k in range(4)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between any two bytecodes, nearly
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        sys.setswitchinterval(old)
    assert wrong == []
