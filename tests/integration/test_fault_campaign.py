"""The fault campaign over the example workflows (tests/support/campaign.py), short and
deterministic: fixed (example, fault mix, seed) schedules on the file store and on DynamoDB
(a serialized moto server). Each schedule checks that the outcome equals the fault-free run's,
that every invocation's sink entry (a transactional step every handler runs first) exists
exactly once — compensated once, in reverse completion order, after an abort — that the
example's own application state is right, that no key is created twice, and that a late copy
of every delivery changes nothing.

Long runs: `python -m tests.support.campaign --store file|dynamodb --schedules N --budget S`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.campaign import EXAMPLES, MIXES, Schedule, run_schedule, store_maker
from unum_entry.errors import StoreError
from unum_entry.stores.file import FileStore

pytestmark = pytest.mark.integration

NAMES = sorted(EXAMPLES)
# Every example, every mix: example i mod 9 under mix i mod 7 (co-prime: 21 schedules cover
# every mix three times and every example twice or three times).
FILE_SCHEDULES = [Schedule(NAMES[i % len(NAMES)], i % len(MIXES), 100 + i) for i in range(21)]
DYNAMODB_SCHEDULES = [Schedule(NAMES[(2 * i + 1) % len(NAMES)], i % len(MIXES), 200 + i) for i in range(7)]


@pytest.fixture(scope="module")
def dynamodb(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    with store_maker("dynamodb", tmp_path_factory.mktemp("campaign")) as make:
        yield make


@pytest.mark.parametrize("schedule", FILE_SCHEDULES, ids=lambda s: s.key)
def test_campaign_on_the_file_store(schedule: Schedule, tmp_path: Path) -> None:
    injected = run_schedule(schedule, FileStore(tmp_path / "store"), tmp_path)
    assert injected["late_duplicate"] >= 1


@pytest.mark.parametrize("schedule", DYNAMODB_SCHEDULES, ids=lambda s: s.key)
def test_campaign_on_dynamodb(schedule: Schedule, dynamodb, tmp_path: Path) -> None:
    injected = run_schedule(schedule, dynamodb(), tmp_path, timeout=120)
    assert injected["late_duplicate"] >= 1


def test_the_campaign_catches_an_effect_outside_steps(tmp_path: Path) -> None:
    """The sink check can fail: the same sink entry written outside any step is counted once
    per execution, and duplicate deliveries (mix 4) run handlers more than once."""
    with pytest.raises(AssertionError, match="sink entries"):
        run_schedule(Schedule("map-aggregate", 4, 7), FileStore(tmp_path / "store"), tmp_path,
                     effects_outside_steps=True)


class _HalfAppliedWrites(FileStore):
    """A file store whose first `failures` step transactions with two or more application writes
    fail half-way: after the step record committed and the first write landed, before the rest
    (a StoreError, as a dying disk or a killed process would leave it)."""

    def __init__(self, root: Path, failures: int) -> None:
        super().__init__(root)
        self.failures = failures
        self.half_applied = 0

    def _apply(self, writes: list[list]) -> None:
        if len(writes) < 2 or self.half_applied >= self.failures:
            super()._apply(writes)
            return
        self.half_applied += 1
        super()._apply(writes[:1])
        raise StoreError("injected: the store failed half-way through a multi-key write")


@pytest.mark.parametrize("example", ["money-transfer", "money-transfer-abort"])
def test_a_store_error_half_way_through_a_multi_key_write(example: str, tmp_path: Path) -> None:
    """Debit's "open accounts" step writes two accounts in one transaction, compensations write
    the balance and the undo log: each of the first three such writes stops after its first
    item. The redelivery (or the next reader) finds the step committed and the rest of its
    writes applied: balances, sink and undo log as in a fault-free run."""
    store = _HalfAppliedWrites(tmp_path / "store", failures=3)
    run_schedule(Schedule(example, 1, 11), store, tmp_path)
    assert store.half_applied >= 1

