"""Exactly-once transactional effects inside a durable function's step:

    from unum_entry.durable_functions import transact

    def debit(tx, account, amount):              # runs inside one store transaction
        item = tx.get("accounts", account)
        tx.put("accounts", account, {**item, "balance": item["balance"] - amount})
        return item["balance"] - amount

    balance = context.step(lambda step: transact(step, "debit", debit, "ana", 5), name="pay")

`transact(step_context, name, fn, *args, **kwargs)` runs `fn(tx, *args, **kwargs)`; its
`tx.get/put/delete` on application tables commit in one store transaction together with a record
keyed by (invocation, the step's operation id, `name`). Every later execution of that step — a
concurrent duplicate, a retry attempt, a replay after a lost race — finds the record and gets the
first result without writing anything: the effect is committed exactly once, as `ctx.transact`
of unum's own steps (docs/steps.md). `fn` may run again on a write conflict, so it must act only
through `tx`. The store must have multi-item transactions (SQLite, file, DynamoDB, Firestore);
otherwise StoreError.

The running executions are registered here by the adapter (`running`), under the execution ARN
the SDK puts in the step's logger context, together with the operation id.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from unum_entry import naming
from unum_entry.codec import UnencodableValue, decode, encode
from unum_entry.errors import StepError, TransactionConflict
from unum_entry.retention import Ledger
from unum_entry.steps.transaction import Transaction
from unum_entry.stores.base import Store

_ATTEMPTS = 50  # write conflicts with other transactions before giving up (each re-runs `fn`)


@dataclass(frozen=True)
class _Execution:
    store: Store
    ledger: Ledger
    invocation: str


_lock = threading.Lock()
_running: dict[str, tuple[_Execution, int]] = {}  # execution ARN -> (execution, executions running it here)


@contextmanager
def running(arn: str, store: Store, ledger: Ledger, invocation: str) -> Iterator[None]:
    """Make `transact` find this execution's store while the SDK runs its handler (the SDK's
    map/parallel branches run in other threads, so this is not a context variable)."""
    with _lock:
        _, count = _running.get(arn, (None, 0))
        _running[arn] = (_Execution(store, ledger, invocation), count + 1)
    try:
        yield
    finally:
        with _lock:
            execution, count = _running[arn]
            if count <= 1:
                del _running[arn]
            else:
                _running[arn] = (execution, count - 1)


def transact(step_context: Any, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Run `fn(tx, *args, **kwargs)` as this step's exactly-once transactional effect named
    `name` (module docstring) and return its result — the first committed one in every
    execution. `step_context` is the StepContext the SDK passes to the step function."""
    extra = getattr(getattr(step_context, "logger", None), "_default_extra", None) or {}
    arn, op_id = extra.get("executionArn"), extra.get("operationId")
    with _lock:
        found = _running.get(str(arn))
    if found is None or not op_id:
        raise StepError(f"transact({name!r}): call it inside a durable step (context.step) of a function "
                        "running on unum, with the step's context as its first argument")
    execution = found[0]
    key = naming.durable_effect_key(execution.invocation, str(op_id), name)
    stored = execution.store.get(key)
    attempt = 0
    while stored is None:
        tx = Transaction(execution.store)
        result = fn(tx, *args, **kwargs)
        try:
            value = encode({"n": name, "r": result})
        except UnencodableValue as exc:
            raise StepError(f"transact({name!r}): its result cannot be recorded: {exc}") from exc
        try:
            stored = execution.ledger.transact(execution.store, key, value, tx.ops())[0]
        except TransactionConflict:
            attempt += 1
            if attempt >= _ATTEMPTS:
                raise
            time.sleep(0.002 * attempt)
            stored = execution.store.get(key)  # a duplicate's commit: take its result, run nothing
    return decode(stored)["r"]


__all__ = ["running", "transact"]
