"""The durable replay check of `python -m builder upgrade` (docs/versions.md): does a durable
handler's NEW code produce the same operations (name, type, order) as the retained operation log
of an execution, up to where the execution stands?

The new handler runs once, unchanged, in replay mode: the SDK is handed every operation of the
log (unum_entry.durable_functions.service's fold, as the adapter hands it) through a service
client that writes nothing (`_ReplayClient`: any checkpoint is answered without a token, so the
SDK stops). The SDK itself compares each operation the code reaches with the log's operation of
the same id (its ids are positions: `blake2b(parent-n)`), and stops with
NonDeterministicExecutionError naming both identities at the first one that differs. So that
nothing of the new code runs past where the execution stands, the log is served with:
- a **frontier** operation at the next free position of every context (the root, each child
  context; a map or parallel in flight: its next `FRONTIER_SLACK` free positions), whose identity
  never matches: the code reaching it stops there, before the operation's START (a step's body
  never runs);
- every step not yet ended (started, due for a retry) served as waiting for a retry far ahead,
  so the SDK suspends on it instead of running its body again.

The outcome: the SDK stops at a frontier, or suspends where the execution waits (a wait, a
callback, an invoke, an unfinished step): the same operations -> None. It stops at an operation of
the log: that operation diverges. It ends (SUCCEEDED) before the log's operations are reached
(the new code has fewer): the first one it no longer reaches diverges (found by replaying the
root's operations one prefix at a time). It fails otherwise (the code raised): refused too,
unless the log recorded the same failure. A replay that does not end within `timeout` seconds
is refused. Not covered: an item of a map in flight beyond its next FRONTIER_SLACK positions.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from unum_entry.stores.base import Store

FRONTIER = "unum-replay-frontier"  # the name and subtype of a frontier operation (never an SDK one)
FRONTIER_SLACK = 1000  # free positions covered in a map or parallel in flight
POSITION_SEARCH = 10_000  # positions tried when numbering an operation
FAR = datetime.datetime(9999, 1, 1, tzinfo=datetime.UTC)
_NONDETERMINISTIC = "NonDeterministicExecutionError"
_MISMATCH = re.compile(r"(type|subtype|name|parent_id) checkpoint=(.*?) current=(.*?)"
                       r"(?=, (?:type|subtype|name|parent_id) checkpoint=|$)")
_ID = re.compile(r"id='([0-9a-f]+)'")
_KINDS = {"STEP": "step", "WAIT": "wait", "CALLBACK": "callback", "CHAINED_INVOKE": "invoke", "CONTEXT": "context"}
_SUBTYPES = {"Map": "map", "MapIteration": "map item", "Parallel": "parallel", "ParallelBranch": "parallel branch",
             "RunInChildContext": "child context", "WaitForCallback": "wait_for_callback",
             "WaitForCondition": "wait_for_condition"}


@dataclass(frozen=True, slots=True)
class Execution:
    """One durable execution a workflow retains: the function that ran it, its invocation (the
    log's name) and its folded log (unum_entry.durable_functions.service.Folded)."""

    function: str
    invocation: str
    state: Any


def executions(store: Store, workflow: str) -> list[Execution]:
    """Every durable execution of `workflow` whose log the store retains (read only), in a
    stable order."""
    from unum_entry.durable_functions.history import retained_logs

    found: dict[str, Execution] = {}
    for meta, log in retained_logs(store, workflow):
        found[meta["Invocation"]] = Execution(str(meta.get("Function") or "?"), meta["Invocation"], log.state)
    return [found[k] for k in sorted(found)]


def describe(operation_type: str, sub_type: str | None, name: str | None) -> str:
    """An operation as a message names it: `step 'charge'`, `wait 'cool-off'`, `map 'lines'`."""
    kind = _SUBTYPES.get(sub_type or "", "") or _KINDS.get(operation_type, operation_type.lower())
    return f"{kind} {name!r}" if name else f"an unnamed {kind}"


def check(sdk_handler: Callable[[Any, Any], Any], execution: Execution, *, now_ms: int,
          timeout: float = 30.0) -> str | None:
    """None when `sdk_handler` (the SDK-decorated handler of the new version) replays
    `execution` with the same operations up to where it stands, else the first divergence, one
    line naming the operation (`operation 3 of handler 'Order' was step 'charge' in the old
    version, wait 'cool-off' in the new one`). Writes nothing, runs no step body of the log."""
    ops = _operations(execution.state, now_ms)
    numbers = _numbers(ops)
    out = _replay(sdk_handler, execution, _served(ops, numbers), timeout)
    who = f"handler {execution.function!r}"
    if out is None:
        return f"{who} did not finish its replay within {timeout:g} s (a loop outside its operations?)"
    status = out.get("Status")
    if status == "PENDING":
        return None  # suspended where the execution waits, or stopped at a frontier's checkpoint
    if status == "FAILED":
        error = out.get("Error") or {}
        kind, message = str(error.get("ErrorType") or ""), str(error.get("ErrorMessage") or "")
        if kind.rsplit(".", 1)[-1] == _NONDETERMINISTIC:
            return _diverged(who, message, ops, numbers)
        recorded = execution.state.meta.get("Error") or {}
        if recorded and recorded.get("ErrorType") == error.get("ErrorType") \
                and recorded.get("ErrorMessage") == error.get("ErrorMessage"):
            return None  # the execution failed so in the old version too
        return f"{who} raised {kind.rsplit('.', 1)[-1] or 'an error'} in its replay: {message.splitlines()[0] if message else ''}".rstrip(": ")
    if execution.state.meta.get("Result") is not None or has_ended(execution):
        return None  # the execution had ended in the old version as well
    return _ends_early(sdk_handler, execution, ops, numbers, who, timeout)


# ---- what the SDK is served -----------------------------------------------------------------

def _operations(state: Any, now_ms: int) -> dict[str, Any]:
    """The log's operations as the handler would see them now (a wait whose end passed reads
    SUCCEEDED), each step not yet ended served as waiting for a retry far ahead."""
    from aws_durable_execution_sdk_python.lambda_service import OperationStatus, OperationType, StepDetails

    from unum_entry.durable_functions.service import TERMINAL, view

    out: dict[str, Any] = {}
    for op_id, op in view(state, now_ms).items():
        if op.operation_type is OperationType.STEP and op.status not in TERMINAL:
            details = op.step_details or StepDetails()
            op = replace(op, status=OperationStatus.PENDING, step_details=replace(details, next_attempt_timestamp=FAR))
        out[op_id] = op
    return out


def _position_id(parent: str | None, n: int) -> str:
    """The SDK's operation id of position `n` in the context `parent` (None: the root)
    (aws_durable_execution_sdk_python.identifier.OperationIdNamespace)."""
    step = f"{parent}-{n}" if parent else str(n)
    return hashlib.blake2b(step.encode()).hexdigest()[:64]


def _numbers(ops: dict[str, Any]) -> dict[str, tuple[str | None, int]]:
    """Per operation id (the execution left out): its context and position there."""
    from aws_durable_execution_sdk_python.lambda_service import OperationType

    by_parent: dict[str | None, set[str]] = {}
    for op_id, op in ops.items():
        if op.operation_type is not OperationType.EXECUTION:
            by_parent.setdefault(op.parent_id or None, set()).add(op_id)
    numbers: dict[str, tuple[str | None, int]] = {}
    for parent, ids in by_parent.items():
        left = set(ids)
        for n in range(POSITION_SEARCH):
            if not left:
                break
            op_id = _position_id(parent, n)
            if op_id in left:
                numbers[op_id] = (parent, n)
                left.discard(op_id)
    return numbers


def _path(op_id: str, numbers: dict[str, tuple[str | None, int]]) -> str:
    """An operation's number as messages give it: `3` in the root, `3.2` inside operation 3."""
    parts: list[str] = []
    current: str | None = op_id
    for _ in range(64):
        if current is None or current not in numbers:
            break
        parent, n = numbers[current]
        parts.append(str(n))
        current = parent
    return ".".join(reversed(parts)) if parts else op_id[:12]


def _frontiers(ops: dict[str, Any], numbers: dict[str, tuple[str | None, int]]) -> Iterable[str]:
    """The ids of the frontier operations: the next free position of the root and of every
    context the log names (FRONTIER_SLACK of them in a map or parallel)."""
    from aws_durable_execution_sdk_python.lambda_service import OperationType

    contexts: set[str | None] = {None}
    contexts |= {op_id for op_id, op in ops.items() if op.operation_type is OperationType.CONTEXT}
    contexts |= {op.parent_id for op in ops.values() if op.parent_id}
    for context in contexts:
        taken = {n for parent, n in numbers.values() if parent == context}
        op = ops.get(context) if context else None
        wide = op is not None and op.sub_type in ("Map", "Parallel")
        free, n = 0, 0 if context else 1
        while free < (FRONTIER_SLACK if wide else 1):
            if n not in taken and (n > max(taken, default=-1) or wide):
                free += 1
                yield _position_id(context, n)
            n += 1


def _served(ops: dict[str, Any], numbers: dict[str, tuple[str | None, int]],
            root_limit: int | None = None) -> list[Any]:
    """The operations handed to the SDK: the log's (the root's first `root_limit` positions
    only, when given), then a frontier at each context's next free position."""
    from aws_durable_execution_sdk_python.lambda_service import Operation, OperationStatus, OperationType

    kept = dict(ops)
    if root_limit is not None:
        dropped = {op_id for op_id, (parent, n) in numbers.items() if parent is None and n > root_limit}
        kept = {op_id: op for op_id, op in ops.items() if op_id not in dropped and op.parent_id not in dropped}
        numbers = {op_id: where for op_id, where in numbers.items() if op_id in kept}
        frontier_ids: Iterable[str] = [_position_id(None, root_limit + 1)]
    else:
        frontier_ids = _frontiers(ops, numbers)
    served = list(kept.values())
    for op_id in frontier_ids:
        if op_id not in kept:
            served.append(Operation(operation_id=op_id, operation_type=OperationType.STEP, sub_type=FRONTIER,
                                    name=FRONTIER, status=OperationStatus.STARTED))
    return served


class _ReplayClient:
    """The SDK's service client for a replay: never writes, answers every checkpoint without a
    token (the SDK stops: the code went past what it may run)."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    def checkpoint(self, durable_execution_arn: str, checkpoint_token: str, updates: list[Any],
                   client_token: str | None) -> Any:
        from aws_durable_execution_sdk_python.lambda_service import CheckpointOutput, CheckpointUpdatedExecutionState

        self.updates += updates
        return CheckpointOutput(checkpoint_token=None, new_execution_state=CheckpointUpdatedExecutionState())

    def get_execution_state(self, durable_execution_arn: str, checkpoint_token: str, next_marker: str,
                            max_items: int = 1000) -> Any:
        from aws_durable_execution_sdk_python.lambda_service import StateOutput

        return StateOutput(operations=[], next_marker=None)


def _replay(sdk_handler: Callable[[Any, Any], Any], execution: Execution, served: list[Any],
            timeout: float) -> dict[str, Any] | None:
    """Run the handler once over `served` in a thread; its output, or None when it does not end
    within `timeout` seconds (the thread is left to end on its own: a daemon)."""
    from aws_durable_execution_sdk_python.execution import (DurableExecutionInvocationInputWithClient,
                                                            InitialExecutionState)

    request = DurableExecutionInvocationInputWithClient(
        durable_execution_arn=f"unum:{execution.function}/{execution.invocation}",
        checkpoint_token=f"{execution.invocation}:replay-check",
        initial_execution_state=InitialExecutionState(operations=served, next_marker=""),
        service_client=_ReplayClient())
    from types import SimpleNamespace

    from unum_entry.durable_functions.adapter import _LambdaContext  # what the SDK reads of Lambda's context

    context = SimpleNamespace(invocation=f"replay-check-{execution.invocation}", function_name=execution.function)
    result: list[dict[str, Any]] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            out = sdk_handler(request, _LambdaContext(context))
            result.append(out if isinstance(out, dict) else {"Status": "SUCCEEDED"})
        except BaseException as exc:  # noqa: BLE001 - reported as the replay's failure
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"replay-check-{execution.function}", daemon=True)
    with _sdk_log_muted():
        thread.start()
        thread.join(timeout)
    if thread.is_alive():
        return None
    if failure:
        exc = failure[0]
        return {"Status": "FAILED", "Error": {"ErrorType": type(exc).__name__, "ErrorMessage": str(exc)}}
    return result[0]


@contextmanager
def _sdk_log_muted() -> Iterator[None]:
    """The SDK's logger off while a replay runs: the divergence it logs ("Execution error. Must
    fail execution without retry.") is the check's answer, reported once by the caller."""
    sdk = logging.getLogger("aws_durable_execution_sdk_python")  # its modules' loggers inherit the level
    was = sdk.level
    sdk.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        sdk.setLevel(was)


# ---- what a divergence says -------------------------------------------------------------------

def has_ended(execution: Execution) -> bool:
    """Did the execution end (its log records its outcome)?"""
    from unum_entry.durable_functions.service import TERMINAL

    op = execution.state.ops.get(execution.invocation)
    return op is not None and op.status in TERMINAL


def _diverged(who: str, message: str, ops: dict[str, Any], numbers: dict[str, tuple[str | None, int]]) -> str | None:
    """The SDK's NonDeterministicExecutionError `message` as a divergence (None: it stopped at a
    frontier, i.e. the code matched the log up to where the execution stands)."""
    found = _ID.search(message)
    op_id = found.group(1) if found else None
    op = ops.get(op_id) if op_id else None
    if op is None:
        return None if FRONTIER in message else f"{who} diverges from its log in the new version: {message}"
    current = {key: _literal(value) for key, _, value in _MISMATCH.findall(message)}
    new_type = current.get("type", op.operation_type.value)
    new_sub = current.get("subtype", op.sub_type)
    new_name = current.get("name", op.name)
    old = describe(op.operation_type.value, op.sub_type, op.name)
    new = describe(str(new_type), new_sub, new_name)
    if old == new and "parent_id" in current:
        new += " in another context"
    return f"operation {_path(op.operation_id, numbers)} of {who} was {old} in the old version, {new} in the new one"


def _literal(text: str) -> str | None:
    """A value of the SDK's mismatch text (`'charge'`, `None`)."""
    text = text.strip()
    if text == "None":
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _ends_early(sdk_handler: Callable[[Any, Any], Any], execution: Execution, ops: dict[str, Any],
                numbers: dict[str, tuple[str | None, int]], who: str, timeout: float) -> str | None:
    """The new code ended (SUCCEEDED): the first root operation of the log it no longer reaches
    (replaying the root's first j operations with a frontier at j + 1), or None when it reached
    every one before it ended (an execution whose outcome was not recorded yet)."""
    root = sorted(n for parent, n in numbers.values() if parent is None)
    for j in range(0, (root[-1] if root else 0) + 1):
        out = _replay(sdk_handler, execution, _served(ops, numbers, root_limit=j), timeout)
        reached = out is not None and out.get("Status") == "FAILED" and FRONTIER in str(
            (out.get("Error") or {}).get("ErrorMessage") or "")
        if not reached:
            missing = next((op_id for op_id, (parent, n) in numbers.items() if parent is None and n == j + 1), None)
            if missing is None:
                return None  # it reached every operation of the log, then ended: the same operations
            op = ops[missing]
            return (f"operation {j + 1} of {who} was {describe(op.operation_type.value, op.sub_type, op.name)} in the "
                    f"old version, nothing in the new one (its handler returns before it)")
    return f"{who} returns in the new version before reaching where its execution stands"


__all__ = ["Execution", "check", "describe", "executions", "has_ended"]
