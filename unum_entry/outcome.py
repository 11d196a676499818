"""What a workflow left in the store: its results, its failure, anything else still there."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from unum_entry.codec import decode
from unum_entry.stores.base import Kind, Store


@dataclass(frozen=True)
class RunResult:
    """Results (ordered by fan-out position), the failure record if any, and how many other
    objects (checkpoints, sets, the start marker) the workflow still has, by kind."""

    workflow_id: str
    results: list[Any]
    failure: dict[str, Any] | None
    pending: dict[str, int] = field(default_factory=dict)

    @property
    def result(self) -> Any:
        """The single result of a workflow with one output (a list when there are several)."""
        return self.results[0] if len(self.results) == 1 else self.results

    @property
    def status(self) -> str:
        if self.failure is not None:
            return "failed"
        in_flight = {kind: n for kind, n in self.pending.items() if kind != Kind.MARKER.value}
        if self.results and not in_flight:
            return "succeeded"  # a branch-only workflow keeps its start marker (README: Garbage)
        return "running" if self.pending else "unknown"


def read_outcome(store: Store, workflow_id: str) -> RunResult:
    """Scan the store for one workflow's objects (O(table) on DynamoDB: for tools, not runtime)."""
    results: list[dict[str, Any]] = []
    failure = None
    pending: Counter[str] = Counter()
    for record in store.records(workflow_id):
        if record.kind is Kind.RESULT and record.value is not None:
            results.append(decode(record.value))
        elif record.kind is Kind.FAILURE and record.value is not None:
            failure = decode(record.value)
        else:
            pending[record.kind.value] += 1
    results.sort(key=lambda r: r["at"])
    return RunResult(workflow_id=workflow_id, results=[r["value"] for r in results], failure=failure,
                     pending=dict(pending))
