"""One durable execution's checkpoint log over unum's store: numbered entries, each written once.

Entry `n` of the execution `invocation` (the unum invocation running the durable handler; its
checkpoint name) is the store key `naming.durable_log_key(invocation, n)`, written with
create-if-absent. Appending is consensus per slot: a writer that loses slot `n` gets the
winner's entry back from the same request, folds it (unum_entry.durable_functions.service) and re-checks
its own updates before it tries `n + 1`, so every reader folds the same entries in the same
order and the first outcome of each operation wins. A fault-free checkpoint costs one
conditional write and no read; reading a log of n entries costs about log2(n) batch reads.
Entries expire as steps do (`Ledger.expires_at(Kind.STEP)`, unum_entry.retention).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import Any

from unum_entry import naming
from unum_entry.durable_functions.service import Conflict, Folded, admit, fold, view
from unum_entry.errors import StoreError
from unum_entry.retention import Ledger
from unum_entry.stores.base import Kind, Store

READ_BATCH = 16
MAX_APPEND_TRIES = 64  # slots lost in a row before giving up (the platform redelivers)


def _now_ms(clock: Callable[[], float]) -> int:
    return int(clock() * 1000)


class ExecutionLog:
    """The log of one execution and its folded state, as far as this reader has read it."""

    def __init__(self, store: Store, invocation: str, ledger: Ledger, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.invocation = invocation
        self.ledger = ledger
        self.clock = clock
        self.state = Folded(invocation)
        self.length = 0  # entries folded so far
        self._mine = False  # whether the last `_append` won its slot

    def now_ms(self) -> int:
        return _now_ms(self.clock)

    def key(self, n: int) -> str:
        return naming.durable_log_key(self.invocation, n)

    def catch_up(self) -> list[str]:
        """Fold every entry written since the last read; returns the changed operation ids. Reads
        in batches that double (2, 2, 4, 8, … up to READ_BATCH): a log of n entries costs about
        log2(n) batch reads, and at most about n/2 keys read past its end."""
        changed: list[str] = []
        while True:
            batch = max(2, min(READ_BATCH, self.length))
            keys = [self.key(n) for n in range(self.length, self.length + batch)]
            found = self.store.get_many(keys)
            for key in keys:
                raw = found.get(key)
                if raw is None:
                    return changed
                changed += self.state.apply(json.loads(raw))
                self.length += 1

    def begin(self, meta: dict[str, Any]) -> None:
        """Write the first entry (the execution's input and where it runs) unless it exists;
        the first writer's input is the execution's. Call after `catch_up`."""
        if self.length == 0:
            self._append({"t": self.now_ms(), "x": meta})

    def append_updates(self, updates: Iterable[Any]) -> list[str]:
        """Append the updates an execution checkpoints (OperationUpdates) at the next slot.
        Repeats of what the log holds are dropped; raises Conflict, writing nothing, when an
        update contradicts it. No read on the way: a lost slot's create answers with the winner's
        entry, which is folded before the updates are checked again for the next slot."""
        pending = list(updates)
        changed: list[str] = []
        for _ in range(MAX_APPEND_TRIES):
            ops = view(self.state, self.now_ms())
            kept = [update for update in pending if admit(ops, update)]
            if not kept:
                return changed
            entry: dict[str, Any] = {"t": self.now_ms(), "u": [self._raw(u) for u in kept]}
            changed += self._append(entry)
            if self._mine:
                return changed
        raise StoreError(f"durable execution {self.invocation}: lost {MAX_APPEND_TRIES} log slots in a row")

    def append_completion(self, completion: dict[str, Any]) -> bool:
        """Record an operation's outcome from outside the handler (a callback, a timeout, an
        invoked function's result). Returns False when the operation already has one (first
        wins). Reads the log to its end first (the caller may know nothing of it)."""
        from unum_entry.durable_functions.service import TERMINAL

        self.catch_up()
        for _ in range(MAX_APPEND_TRIES):
            op = self.state.ops.get(completion["Id"])
            if op is None or op.status in TERMINAL:
                return False
            self._append({"t": self.now_ms(), "c": [completion]})
            if self._mine:
                return True
        raise StoreError(f"durable execution {self.invocation}: lost {MAX_APPEND_TRIES} log slots in a row")

    def time_out_callbacks(self) -> None:
        """Give every waiting callback past its timeout or heartbeat timeout (as of now, on the
        log as read) its TIMED_OUT outcome in the log: first wins against a completion racing it."""
        from aws_durable_execution_sdk_python.lambda_service import OperationStatus, OperationType

        from unum_entry.durable_functions.service import callback_due

        now = self.now_ms()
        for op_id, op in list(self.state.ops.items()):
            if op.operation_type is not OperationType.CALLBACK or op.status is not OperationStatus.STARTED:
                continue
            due = callback_due(self.state, op_id)
            if due is not None and now >= due[0]:
                message = "Callback timed out" if due[1] == "Callback.Timeout" else "Callback heartbeat timed out"
                self.append_completion({"Id": op_id, "Status": "TIMED_OUT", "Result": None,
                                        "Error": {"ErrorType": due[1], "ErrorMessage": message}})

    def append_heartbeat(self, operation_id: str) -> bool:
        """Record a heartbeat of a waiting callback (its heartbeat timeout starts again).
        Returns False when the callback is no longer waiting."""
        from aws_durable_execution_sdk_python.lambda_service import OperationStatus

        self.catch_up()
        self.time_out_callbacks()  # a heartbeat after the timeout does not revive the callback
        for _ in range(MAX_APPEND_TRIES):
            op = self.state.ops.get(operation_id)
            if op is None or op.status is not OperationStatus.STARTED:
                return False
            self._append({"t": self.now_ms(), "h": [operation_id]})
            if self._mine:
                return True
        raise StoreError(f"durable execution {self.invocation}: lost {MAX_APPEND_TRIES} log slots in a row")

    # ---- helpers -------------------------------------------------------------------------

    @staticmethod
    def _raw(update: Any) -> dict[str, Any]:
        raw = dict(update.to_dict())
        if raw.get("Type") == "CALLBACK" and raw.get("Action") == "START":
            import secrets  # the callback id's unguessable part; the winner's is the id

            raw["Nonce"] = secrets.token_urlsafe(16)
        return raw

    def _append(self, entry: dict[str, Any]) -> list[str]:
        """Create entry number `length` holding `entry`, or fold the entry that won the slot;
        `_mine` tells which. Returns the changed operation ids."""
        stored, self._mine = self.ledger.create(self.store, self.key(self.length), json.dumps(entry).encode(),
                                                kind=Kind.STEP)
        changed = self.state.apply(entry if self._mine else json.loads(stored))
        self.length += 1
        return changed


__all__ = ["Conflict", "ExecutionLog", "fold"]
