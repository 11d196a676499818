"""What a workflow left in the store: its results, its failure, anything else still there."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from unum_entry.codec import decode
from unum_entry.stores.base import Kind, Store


@dataclass(frozen=True)
class RunResult:
    """Results (ordered by fan-out position), the failure record if any, how many other objects
    (checkpoints, set shards, step records) the store retains for the workflow, by kind, and
    when the last of them expires (unum_entry.retention)."""

    workflow_id: str
    results: list[Any]
    failure: dict[str, Any] | None
    pending: dict[str, int] = field(default_factory=dict)
    complete: bool = False  # the results cover every position of the fan-out tree
    retained_until: int | None = None

    @property
    def result(self) -> Any:
        """The single result of a workflow with one output (a list when there are several)."""
        return self.results[0] if len(self.results) == 1 else self.results

    @property
    def status(self) -> str:
        if self.failure is not None:
            return "failed"
        if self.complete:
            return "succeeded"
        return "running" if self.pending or self.results else "unknown"


def read_outcome(store: Store, workflow_id: str) -> RunResult:
    """Scan the store for one workflow's objects (O(table) on DynamoDB: for tools, not runtime)."""
    results: list[dict[str, Any]] = []
    failure = None
    pending: Counter[str] = Counter()
    retained_until: int | None = None
    for record in store.records(workflow_id):
        retained_until = max(retained_until or 0, record.expires_at)
        if record.kind is Kind.RESULT and record.value is not None:
            results.append(decode(record.value))
        elif record.kind is Kind.FAILURE and record.value is not None:
            failure = decode(record.value)
        else:
            pending[record.kind.value] += 1
    results.sort(key=lambda r: r["at"])
    return RunResult(workflow_id=workflow_id, results=[r["value"] for r in results], failure=failure,
                     pending=dict(pending), complete=_covers_every_position(results), retained_until=retained_until)


def _covers_every_position(results: list[dict[str, Any]]) -> bool:
    """Whether the results cover the whole fan-out tree: a result at fan-out position
    (i1 of n1, i2 of n2, …) covers 1/(n1·n2·…) of it, and positions are unique (one result
    record per position), so the workflow has ended exactly when the shares add up to 1."""
    share = sum((Fraction(1, _product(r.get("of", [1] * len(r["at"])))) for r in results), Fraction(0))
    return share == 1


def _product(sizes: list[int]) -> int:
    total = 1
    for size in sizes:
        total *= size
    return total
