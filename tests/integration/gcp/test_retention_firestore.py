"""The retention ledger's time-edge schedules (tests/support/retention_schedules.py) on the
Firestore store, through Google's Firestore emulator: late duplicates at `deadline - margin` of
every example shape (with `"checkpoint": false` functions and per-branch results too), `gc` from a
host with a fast clock during a join, a repeat of a function without checkpoint, and a
task-token callback after the deadline in a Parallel and in a Map."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.retention_schedules import (SHAPES, Clock, MakeStore, callback_after_the_deadline,
                                               gc_from_a_fast_clock_during_a_join, late_duplicates_past_the_margin,
                                               repeat_without_checkpoint)
from unum_entry.outcome import WorkflowStatus
from unum_entry.stores.base import Store
from unum_entry.stores.firestore import FirestoreStore

pytestmark = pytest.mark.integration

MARGIN = 15 * 60


@pytest.fixture
def make_store(firestore_emulator) -> Iterator[MakeStore]:
    opened: list[Store] = []

    def make(clock: Clock) -> Store:
        store = FirestoreStore.from_url(f"firestore://unum-{uuid.uuid4().hex[:12]}?project={firestore_emulator.project}",
                                        clock=clock)
        opened.append(store)
        return store
    yield make
    for store in opened:
        store.close()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_late_duplicates_at_the_deadline_edge_change_nothing(make_store, shape: str, tmp_path: Path) -> None:
    delivered = late_duplicates_past_the_margin(make_store, tmp_path, shape)
    assert all(n >= 2 for n in delivered.values()), delivered


def test_gc_from_a_fast_clock_keeps_a_running_join(make_store, tmp_path: Path) -> None:
    outcome = gc_from_a_fast_clock_during_a_join(make_store, tmp_path, joins_before_deadline=MARGIN + 60,
                                                 fast_by=MARGIN + 120)
    assert outcome.status is WorkflowStatus.SUCCEEDED and outcome.result == 201, outcome


def test_gc_without_a_margin_would_sweep_the_running_join(make_store, tmp_path: Path) -> None:
    gc_from_a_fast_clock_during_a_join(make_store, tmp_path, joins_before_deadline=60, fast_by=120, skew_margin=0)


def test_a_repeat_of_a_function_without_checkpoint_does_not_rerun_committed_successors(make_store,
                                                                                      tmp_path: Path) -> None:
    assert repeat_without_checkpoint(make_store, tmp_path) == {"A": 1, "B": 2, "C": 1}


@pytest.mark.parametrize("shape", ["parallel", "map"])
def test_a_callback_after_the_deadline_ends_the_workflow(make_store, shape: str, tmp_path: Path) -> None:
    outcome, _ = callback_after_the_deadline(make_store, tmp_path, shape)
    assert outcome.status is WorkflowStatus.FAILED
