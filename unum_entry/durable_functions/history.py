"""What `python -m builder inspect WF --history` shows of a workflow's durable executions: every
operation of every execution, folded from its log (unum_entry.durable_functions.log), in log order. For
tools, never the runtime: one pass over the workflow's records."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from unum_entry.stores.base import Kind, Store

if TYPE_CHECKING:
    from unum_entry.durable_functions.log import ExecutionLog


def durable_operations(store: Store, workflow: str) -> list[dict[str, Any]]:
    """One dict per operation (the executions themselves left out): the function, the
    operation's type, subtype, name, parent, status, attempt, start and end (epoch ms) and its
    result or error as recorded; [] when the workflow ran no durable function."""
    from unum_entry.durable_functions.service import view

    out: list[dict[str, Any]] = []
    for meta, log in retained_logs(store, workflow):
        for op in view(log.state, log.now_ms()).values():  # a wait whose end passed reads SUCCEEDED
            if op.operation_type.value == "EXECUTION":
                continue
            details = op.step_details or op.callback_details or op.context_details or op.chained_invoke_details
            error = getattr(details, "error", None)
            out.append({
                "function": meta.get("Function"), "id": op.operation_id[:12],
                "parent": op.parent_id[:12] if op.parent_id else None,
                "type": op.operation_type.value, "subType": op.sub_type, "name": op.name,
                "status": op.status.value,
                "attempt": op.step_details.attempt if op.step_details else None,
                "started": int(op.start_timestamp.timestamp() * 1000) if op.start_timestamp else None,
                "ended": int(op.end_timestamp.timestamp() * 1000) if op.end_timestamp else None,
                "result": getattr(details, "result", None),
                "error": error.to_dict() if error is not None else None})
    return out


def retained_logs(store: Store, workflow: str) -> Iterator[tuple[dict[str, Any], ExecutionLog]]:
    """Every durable execution of `workflow` whose log the store retains, read only: its first
    record's metadata (`Function`, `Invocation`) and its log, caught up. One pass over the
    workflow's records; records of other kinds or shapes are skipped."""
    from unum_entry.durable_functions.log import ExecutionLog
    from unum_entry.retention import Ledger, store_retention

    retention = store_retention(store)
    for record in store.records(workflow):
        if record.kind is not Kind.STEP or not record.key.startswith("d-") or record.value is None:
            continue
        try:
            first = json.loads(record.value)
        except ValueError:
            continue
        meta = first.get("x") if isinstance(first, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("Invocation"), str) or not meta["Invocation"]:
            continue
        log = ExecutionLog(store, meta["Invocation"], Ledger.bounded(workflow, None, retention))
        log.catch_up()
        yield meta, log
