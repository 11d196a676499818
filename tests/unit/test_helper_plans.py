"""The plan cache of helper processes (unum_entry.local.helpers._kept): the engine and the
helper apply one rule to the same sequence of batches, so the engine sends a fan-out's origin
exactly when the helper no longer keeps its plan."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from unum_entry.local import helpers

pytestmark = pytest.mark.unit


def test_the_engines_and_the_helpers_caches_agree_on_every_batch() -> None:
    engine: OrderedDict[int, None] = OrderedDict()
    helper: OrderedDict[int, str] = OrderedDict()
    sequence = [1, 2, 1, *range(3, 3 + helpers.PLANS_KEPT), 1, 2, 2, 40, 1]
    sent_origin = []
    for fan_out in sequence:
        with_origin = not helpers._kept(engine, fan_out)
        sent_origin.append(with_origin)
        if with_origin:  # the helper plans it again and keeps it
            helpers._kept(helper, fan_out, f"plan-{fan_out}")
        else:  # the helper must still have it
            assert helpers._kept(helper, fan_out), fan_out
        assert list(engine) == list(helper)
    assert len(engine) == helpers.PLANS_KEPT
    # PLANS_KEPT new fan-outs push 1 and 2 out: each is sent with its origin again, once.
    assert sent_origin[:3] == [True, True, False]
    assert sent_origin[3 + helpers.PLANS_KEPT:] == [True, True, False, True, False]
