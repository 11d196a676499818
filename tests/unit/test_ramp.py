"""unum_entry.ramp.pick_version: deterministic per workflow id, a binomial split over 1,000 ids
at several weights, the edges 0 and 1, and bad weights refused."""

from __future__ import annotations

import math
import uuid

import pytest

from unum_entry.ramp import RampWeightError, id_fraction, pick_version


@pytest.mark.parametrize("weight", [0.1, 0.5, 0.9])
def test_split_within_binomial_bounds(weight: float) -> None:
    ids = [f"wf-{i}" for i in range(1000)]
    ramped = sum(pick_version(i, "v1", "v2", weight) == "v2" for i in ids)
    sigma = math.sqrt(1000 * weight * (1 - weight))
    assert abs(ramped - 1000 * weight) <= 4 * sigma, ramped


def test_a_duplicate_start_picks_the_same_version() -> None:
    for _ in range(1000):
        workflow_id = str(uuid.uuid4())
        first = pick_version(workflow_id, "v1", "v2", 0.5)
        assert all(pick_version(workflow_id, "v1", "v2", 0.5) == first for _ in range(3))
    assert id_fraction("abc") == id_fraction("abc") and 0.0 <= id_fraction("abc") < 1.0


def test_edges_and_no_ramp() -> None:
    ids = [f"wf-{i}" for i in range(1000)]
    assert {pick_version(i, "v1", "v2", 0.0) for i in ids} == {"v1"}
    assert {pick_version(i, "v1", "v2", 1) for i in ids} == {"v2"}
    assert {pick_version(i, "v1", None, 0.7) for i in ids} == {"v1"}


@pytest.mark.parametrize("weight", [-0.01, 1.01, float("nan"), True, "0.5"])
def test_bad_weight_is_refused(weight: object) -> None:
    with pytest.raises(RampWeightError, match="outside 0.0-1.0"):
        pick_version("wf", "v1", "v2", weight)  # type: ignore[arg-type]
