"""Names: deterministic, fixed length, unique per invocation."""

from __future__ import annotations

import itertools

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


def test_names_are_the_stored_ones():
    """Names are stored, so they never change: these are the names every earlier version made
    (the hasher-prefix fast path removed in issue 46 made the same bytes)."""
    frames = (Frame(), Frame(1, 4, 2), Frame(200, 300, 0))
    assert naming.checkpoint_key("wf-1", "F", frames) == "c-aa746a8038d36411a4134b14707612f1"
    assert naming.checkpoint_key("wf-1", "F", (Frame(),)) == "c-3b26585f7e74e5badadb468c56078591"
    assert naming.result_key("wf-1", frames) == "r-6a141e2533ce2741a2defe0ec9d2c750"
    assert naming.set_shard_key("s-x", 1, 17) == "s-9d7846e587423a521d6444b51275bc13"
