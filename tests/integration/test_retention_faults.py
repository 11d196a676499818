"""The retention ledger at the time edges of a workflow (tests/support/retention_schedules.py),
on the file store, the SQLite store and DynamoDB (a serialized moto server; Firestore:
tests/integration/gcp/test_retention_firestore.py): late duplicates at
`deadline - margin` of every example shape (also with `"checkpoint": false` functions, and with
per-branch results only) change nothing; `gc` from a host whose clock runs fast keeps its
clock-skew margin during a join; a task-token callback after the deadline inside a Parallel or a
Map ends the workflow with `Unum.RetentionExpired` instead of leaving it running."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.campaign import ensure_app_tables
from tests.support.retention_schedules import (SHAPES, Clock, MakeStore, callback_after_the_deadline,
                                               gc_from_a_fast_clock_during_a_join, late_duplicates_past_the_margin,
                                               repeat_without_checkpoint)
from unum_entry.outcome import WorkflowStatus
from unum_entry.stores import open_store
from unum_entry.stores.base import Store
from unum_entry.stores.file import FileStore

pytestmark = pytest.mark.integration

@pytest.fixture(params=["file", "sqlite", "dynamodb"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    opened: list[Store] = []
    if request.param == "file":
        def make(clock: Clock) -> Store:
            store = FileStore(tmp_path / f"store-{len(opened)}", clock=clock)
            opened.append(store)
            return store
    elif request.param == "sqlite":
        def make(clock: Clock) -> Store:
            store = open_store(str(tmp_path / f"unum-{len(opened)}.db"), clock=clock)
            opened.append(store)
            return store
    else:
        moto = request.getfixturevalue("moto_server")

        def make(clock: Clock) -> Store:
            store = open_store(f"dynamodb://unum-{uuid.uuid4().hex[:12]}?endpoint={moto.endpoint}&create=1",
                               clock=clock)
            ensure_app_tables(store)  # money-transfer's accounts and outbox
            opened.append(store)
            return store
    make.kind = request.param  # type: ignore[attr-defined]
    yield make
    for store in opened:
        store.close()


@pytest.fixture(scope="module")
def moto_server() -> Iterator:
    from builder.local_stack.process import MotoServer

    with MotoServer(serialized=True) as moto:
        yield moto


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_late_duplicates_at_the_deadline_edge_change_nothing(make_store, shape: str, tmp_path: Path) -> None:
    delivered = late_duplicates_past_the_margin(make_store, tmp_path, shape)
    assert all(n >= 2 for n in delivered.values()), delivered


MARGIN = 15 * 60  # the default retention margin (the stores' TTL is the default 7 days)


def test_gc_from_a_fast_clock_keeps_a_running_join(make_store, tmp_path: Path) -> None:
    """The host is 17 min fast, the last branch joins 16 min before the deadline: with the
    default margin (5 min) gc keeps the shard, the join runs, the workflow succeeds."""
    outcome = gc_from_a_fast_clock_during_a_join(make_store, tmp_path, joins_before_deadline=MARGIN + 60,
                                                 fast_by=MARGIN + 120)
    assert outcome.status is WorkflowStatus.SUCCEEDED and outcome.result == 201, outcome


def test_a_join_inside_the_last_margin_ends_the_workflow_instead_of_stalling(make_store, tmp_path: Path) -> None:
    """Two minutes fast, a minute before the deadline: the shard is kept, the join completes, and
    its target (which may not start inside the margin) records Unum.RetentionExpired."""
    outcome = gc_from_a_fast_clock_during_a_join(make_store, tmp_path, joins_before_deadline=60, fast_by=120)
    assert outcome.status is WorkflowStatus.FAILED, outcome
    assert outcome.failure["Error"] == "Unum.RetentionExpired" and outcome.failure["Function"] == "C", outcome


@pytest.mark.parametrize("skew_margin", [0, 60])
def test_gc_without_enough_margin_would_sweep_the_running_join(make_store, tmp_path: Path, skew_margin: int) -> None:
    """The checks above can fail: the same fast host with too small a margin deletes the shard."""
    gc_from_a_fast_clock_during_a_join(make_store, tmp_path, joins_before_deadline=60, fast_by=120,
                                       skew_margin=skew_margin)


@pytest.mark.parametrize("shape", ["parallel", "map"])
def test_a_callback_after_the_deadline_ends_the_workflow(make_store, shape: str, tmp_path: Path) -> None:
    outcome, _ = callback_after_the_deadline(make_store, tmp_path, shape)
    assert outcome.status is WorkflowStatus.FAILED


def test_a_repeat_of_a_function_without_checkpoint_does_not_rerun_committed_successors(make_store,
                                                                                      tmp_path: Path) -> None:
    runs = repeat_without_checkpoint(make_store, tmp_path)
    assert runs == {"A": 1, "B": 2, "C": 1}, runs  # B (no checkpoint) ran again; C was not re-invoked
