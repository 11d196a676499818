"""The stop of a run, one rule for `python -m builder stop` and the web console's Stop.

The stop is decided by the store (unum_entry.outcome.stop_workflow: a create-if-absent claim of
the workflow's root result record, which every result write yields to, then its failure record
marked stopped): the first ending wins, so a workflow that has already ended is not changed
whatever instant its last result lands at, and two stops at once stop it once (docs/history.md,
"Stop")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from unum_entry.errors import UnumError

from builder.runs.start_record import UnknownWorkflow

if TYPE_CHECKING:
    from unum_entry.stores.base import Store


def stop(store: Store, workflow: str, *, error: str | None = None, cause: str | None = None,
         where: str = "this store") -> None:
    """Stop `workflow` (the CLI's and the web console's stop): raises UnknownWorkflow when the
    store holds nothing of it, UnumError naming how it ended when it had ended. Whether it
    had is decided by the store within `stop_workflow`, never by the read made here (which
    only tells an unknown id from a known one)."""
    from unum_entry.outcome import WorkflowStatus, read_outcome, stop_workflow

    if read_outcome(store, workflow).status is WorkflowStatus.UNKNOWN:
        raise UnknownWorkflow(f"no workflow {workflow!r} in {where} (mistyped, another --store, or expired "
                              "and collected)")
    # a stop that died between its two writes reads stopped: stop_workflow completes it
    if not stop_workflow(store, workflow, error=error, cause=cause):
        raise UnumError(f"workflow {workflow} has already ended ({read_outcome(store, workflow).status}): "
                        "nothing to stop")
