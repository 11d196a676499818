"""`DurableServiceClient` over unum's store: the two calls the SDK makes to Lambda's durable
service (`checkpoint`, `get_execution_state`), answered from the execution's log
(unum_entry.durable_functions.log) instead of a service.

`checkpoint` appends the batch (first outcome of each operation wins) and answers with every
operation whose state changed since this client last answered — the batch's own, other
executions' entries folded meanwhile, waits whose end passed, callbacks that timed out. When an
update contradicts the log (a duplicate execution's outcome won), it answers without a
checkpoint token: the SDK then stops and reports PENDING ("token revoked"), and the adapter
replays the handler from the log, so this execution continues with the winner's results.
"""

from __future__ import annotations

from typing import Any

from aws_durable_execution_sdk_python.lambda_service import (CheckpointOutput, CheckpointUpdatedExecutionState,
                                                             Operation, StateOutput)

from unum_entry.durable_functions.log import ExecutionLog
from unum_entry.durable_functions.service import Conflict, view


class StoreServiceClient:
    """One handler run's service client (one per replay: its view starts empty)."""

    def __init__(self, log: ExecutionLog) -> None:
        self.log = log
        self.revoked = False
        self._sent: dict[str, dict[str, Any]] = {}
        self._tokens = 0
        self.viewed_at = 0  # epoch ms of the last state this client handed the SDK

    def initial_operations(self) -> list[Operation]:
        """Every operation of the execution as far as the log was read (the invocation's
        InitialExecutionState)."""
        return self._changes()

    def checkpoint(self, durable_execution_arn: str, checkpoint_token: str, updates: list[Any],
                   client_token: str | None) -> CheckpointOutput:
        if self.revoked:
            return CheckpointOutput(checkpoint_token=None, new_execution_state=CheckpointUpdatedExecutionState())
        try:
            if updates:
                self.log.append_updates(updates)
            else:  # the SDK polls (an empty checkpoint): read what others wrote meanwhile
                self.log.catch_up()
        except Conflict:
            self.revoked = True
            return CheckpointOutput(checkpoint_token=None, new_execution_state=CheckpointUpdatedExecutionState())
        self._tokens += 1
        return CheckpointOutput(checkpoint_token=f"{self.log.invocation}:{self._tokens}",
                                new_execution_state=CheckpointUpdatedExecutionState(operations=self._changes()))

    def get_execution_state(self, durable_execution_arn: str, checkpoint_token: str, next_marker: str,
                            max_items: int = 1000) -> StateOutput:
        """Never paginated: every operation comes with the invocation and each checkpoint."""
        return StateOutput(operations=[], next_marker=None)

    def _changes(self) -> list[Operation]:
        self.log.time_out_callbacks()
        changed = []
        self.viewed_at = self.log.now_ms()
        for op_id, op in view(self.log.state, self.viewed_at).items():
            form = dict(op.to_json_dict())
            if self._sent.get(op_id) != form:
                self._sent[op_id] = form
                changed.append(op)
        return changed
