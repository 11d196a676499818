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

The running executions are registered here by the adapter (`running`), under their execution
ARN. The step's own identity (execution ARN, operation id) has no public accessor in the SDK: a
`StepContext` carries only `logger` and `attempt`. `step_identity` is the one place that reads it
from the step logger's default context (`executionArn`, `operationId`: what the SDK adds to each
of the step's log records); the SDK version it was checked against is `SDK_CHECKED` (pinned in
constraints.txt, and a unit test fails when the installed version differs), and a version that
moved it fails `transact` with one line saying so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
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
SDK_DISTRIBUTION = "aws-durable-execution-sdk-python"
SDK_CHECKED = "3.0.0"  # the SDK whose step logger `step_identity` reads (tests/unit/test_durable_step_identity.py)


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
    identity = step_identity(step_context, what=f"transact({name!r})")
    with _lock:
        found = _running.get(identity[0]) if identity is not None else None
    if found is None or identity is None:
        raise StepError(f"transact({name!r}): call it inside a durable step (context.step) of a function "
                        "running on unum, with the step's context as its first argument")
    execution, op_id = found[0], identity[1]
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


def step_identity(step_context: Any, *, what: str = "transact") -> tuple[str, str] | None:
    """(execution ARN, operation id) of the step whose context the SDK passed as `step_context`;
    None when it is not a step's context. Raises StepError (one line naming the SDK version) when
    it is one but the installed SDK no longer carries the identity where `SDK_CHECKED` did."""
    logger = getattr(step_context, "logger", None)
    if logger is None or not hasattr(step_context, "attempt"):
        return None  # not a StepContext (None, the handler's DurableContext, a user's object)
    extra = getattr(logger, "_default_extra", None)  # the private read (module docstring)
    if isinstance(extra, Mapping) and extra.get("executionArn") and extra.get("operationId"):
        return str(extra["executionArn"]), str(extra["operationId"])
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version(SDK_DISTRIBUTION)
    except PackageNotFoundError:
        installed = "unknown"
    raise StepError(f"{what}: the installed {SDK_DISTRIBUTION} {installed} no longer gives a step's operation id "
                    f"where unum reads it (its step logger's executionArn/operationId, as in {SDK_CHECKED}): "
                    f"install {SDK_DISTRIBUTION}=={SDK_CHECKED} (constraints.txt)")


__all__ = ["SDK_CHECKED", "running", "step_identity", "transact"]
