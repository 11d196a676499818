"""Run a handler decorated with `@durable_execution` (aws-durable-execution-sdk-python),
unchanged, as one unum invocation — playing the durable service's role with unum's store,
invoker and timers.

Each delivery of the invocation runs the SDK's own handler with an invocation input carrying
`StoreServiceClient` (unum_entry.durable_functions.client) and every operation of the execution's log:
completed operations are answered from the log (replay), new ones are checkpointed into it.
Then, by the SDK's answer:
- SUCCEEDED: the result is the invocation's output (unum commits it create-if-absent and the
  workflow goes on);
- FAILED: the workflow fails with the execution's error, not retried (as the service does) — or,
  in a compiled Step Functions Task, the Task fails with it so its Retry / Catch apply;
- PENDING after a lost race (token revoked): replay at once, now from the winner's entries;
- PENDING on a wait, a step's retry or a callback: if the earliest time that changes anything
  (a wait's end, a retry, a callback's timeout) has come, replay at once; otherwise arm a
  durable timer to re-deliver this same invocation then (`Timers.arm(here=True)`, its name
  deterministic so duplicates arm one timer), and drop the delivery without a commit
  (`DurableSuspended`). A callback's completion re-delivers it (unum_entry.durable_functions.callbacks).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

from unum_entry import naming
from unum_entry.durable_functions.callbacks import RESUME
from unum_entry.errors import ConfigurationError, StaleInvocation, StoreError, WorkflowAborted

log = logging.getLogger("unum.durable")
INVOKE = naming.DURABLE_INVOKE  # the event of a chained invoke's target (`context.invoke`)
MAX_ROUNDS = 200  # replays within one delivery (lost races, due times) before the platform redelivers


class DurableSuspended(StaleInvocation):
    """The execution waits (a timer or a callback will re-deliver it): drop this delivery."""


class _LambdaContext:
    """What the SDK reads from Lambda's context object."""

    def __init__(self, context: Any) -> None:
        self.aws_request_id = getattr(context, "invocation", "")
        self.function_name = getattr(context, "function_name", "")
        self.invoked_function_arn = f"unum:{self.function_name}"
        self.memory_limit_in_mb = 0
        self.log_group_name = self.log_stream_name = ""

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 15 * 60 * 1000


class _ToUnumLog(logging.Handler):
    """The SDK's log records, re-emitted on `unum.durable` (one line each where the `unum`
    loggers are routed: `python -m builder ... -v`, the function images' log)."""

    def emit(self, record: logging.LogRecord) -> None:
        if log.isEnabledFor(record.levelno):
            log.handle(record)


def _route_sdk_log() -> None:
    """Route the SDK's logger into unum's (once): a user error it logs with a traceback is the
    workflow's recorded failure, not a second report on stderr."""
    sdk = logging.getLogger("aws_durable_execution_sdk_python")
    if not any(isinstance(h, _ToUnumLog) for h in sdk.handlers):
        sdk.addHandler(_ToUnumLog())
        sdk.propagate = False


class DurableHandler:
    """The unum handler `(event, context)` around an SDK-decorated handler."""

    def __init__(self, sdk_handler: Callable[[Any, Any], Any]) -> None:
        self.sdk_handler = sdk_handler
        self.__wrapped__ = sdk_handler
        _route_sdk_log()


    def __call__(self, event: Any, context: Any) -> Any:
        from aws_durable_execution_sdk_python.execution import (DurableExecutionInvocationInputWithClient,
                                                                InitialExecutionState)

        from unum_entry.durable_functions.client import StoreServiceClient
        from unum_entry.durable_functions.effects import running
        from unum_entry.durable_functions.log import ExecutionLog
        from unum_entry.durable_functions.service import wake_times
        from unum_entry.retention import Ledger, Retention
        from unum_entry.timers import timers_of

        timers = timers_of(context)
        if timers is None:
            raise ConfigurationError("a durable handler runs inside unum's runtime (its context has no timers)")
        store = timers.store
        envelope = timers.envelope  # this delivery: identity, deadline, and what a re-delivery sends again
        retention = Retention(ttl_seconds=store.ttl_seconds, clock=timers.clock)
        ledger = Ledger.bounded(timers.workflow, envelope.deadline, retention)
        invocation = context.invocation
        if getattr(context, "retry_count", 0):  # a Task's retry is a new execution, as a new Lambda invoke is
            invocation = f"{invocation}-retry-{context.retry_count}"  # no "/": the SDK splits its ARN on it
        execution = ExecutionLog(store, invocation, ledger, clock=timers.clock)
        execution.catch_up()
        if execution.length == 0:
            if isinstance(event, dict) and RESUME in event:
                raise DurableSuspended(f"durable execution {invocation}: resumed but its log is gone")
            invoked = event.get(INVOKE) if isinstance(event, dict) else None
            execution.begin({"Input": invoked["payload"] if invoked else json.dumps(event),
                             "Caller": invoked["caller"] if invoked else None,
                             "Workflow": timers.workflow, "Function": timers.function, "Invocation": invocation,
                             "Frames": [[f.index, f.size, f.iteration] for f in envelope.frames],
                             "Deadline": envelope.deadline,
                             # A re-delivery sends this delivery again (same inputs: a compiled Task's
                             # state input too), marked by nothing: the log tells a replay from a start.
                             "Resume": envelope.to_wire()})
        caller = execution.state.meta.get("Caller")
        arn = f"unum:{context.function_name}/{invocation}"
        for _ in range(MAX_ROUNDS):
            client = StoreServiceClient(execution)
            request = DurableExecutionInvocationInputWithClient(
                durable_execution_arn=arn, checkpoint_token=f"{invocation}:0",
                initial_execution_state=InitialExecutionState(operations=client.initial_operations(), next_marker=""),
                service_client=client)
            with running(arn, store, ledger, invocation):  # for `transact` inside its steps
                out = self.sdk_handler(request, _LambdaContext(context))
            if client.revoked:
                continue  # another execution's outcome won: replay from it
            status = out.get("Status")
            if status == "SUCCEEDED":
                text = out.get("Result") or execution.state.meta.get("Result")
                if caller:
                    _answer(caller, {"Status": "SUCCEEDED", "Result": text, "Error": None}, store, timers)
                return json.loads(text) if text else None
            if status == "FAILED":
                error = out.get("Error") or execution.state.meta.get("Error") or {}
                if caller:  # the caller's invoke fails (InvokeError), this function's invocation ends
                    _answer(caller, {"Status": "FAILED", "Result": None, "Error": error}, store, timers)
                    return {"Error": error}
                _fail_task(context, error)  # a Step Functions Task: its Retry / Catch apply
                raise WorkflowAborted(error.get("ErrorType") or "DurableExecutionFailed",
                                      error.get("ErrorMessage") or "")
            if _dispatch_invokes(execution, timers, context):
                continue  # an invoke was refused (no such function): the SDK sees its failure now
            # What the SDK waits for, as of the state it last saw; if that time has come while it
            # ran, replay now (arming nothing would strand the execution).
            times = wake_times(execution.state, client.viewed_at)
            now = execution.now_ms()
            if any(t <= now for t in times):
                continue
            if times:
                when = min(times)
                # The name: one timer per suspension point, and a fresh one for each re-arm after
                # an early delivery (a scheduler remembers names it ran: Cloud Tasks). Duplicates
                # suspending at once may arm two: each is one more replay, absorbed.
                name = timers.name("durable-wake", invocation, execution.length, when, now // 100)
                timers.invoker.invoke_at(when / 1000, timers.function, _resume_wire(execution.state.meta, envelope),
                                         name=name)
            raise DurableSuspended(f"durable execution {invocation} waits"
                                   + (f" until {min(times) / 1000:.3f}" if times else " for a callback"))
        raise StoreError(f"durable execution {invocation}: no progress after {MAX_ROUNDS} replays in one delivery")


def _fail_task(context: Any, error: dict[str, Any]) -> None:
    """When this durable function is a compiled Step Functions Task (its context is the Task's
    Lambda context), raise the Task's error as Lambda reports a failed function to Step Functions
    — the execution's error type as the error, Lambda's error payload as the cause — so that the
    Task's Retry and Catch see it (States.TaskFailed matches it). Otherwise return."""
    import sys

    runner = sys.modules.get("unum_entry.asl.runner")
    if runner is None or not isinstance(context, runner.LambdaContext):
        return
    from unum_entry.errors import TaskFailed

    # The SDK qualifies its own error types (aws_durable_execution_sdk_python.exceptions.StepError);
    # Lambda names a function's error by its class, as Retry / Catch match it.
    name = str(error.get("ErrorType") or "DurableExecutionFailed").rsplit(".", 1)[-1]
    cause = {"errorMessage": error.get("ErrorMessage") or "", "errorType": name,
             "stackTrace": list(error.get("StackTrace") or [])}
    raise TaskFailed(name, json.dumps(cause))


def _resume_wire(meta: dict[str, Any], envelope: Any) -> dict[str, Any]:
    """What re-delivers the execution: its first delivery's envelope, as recorded in its log."""
    wire = meta.get("Resume")
    return dict(wire) if isinstance(wire, dict) else envelope.to_wire()


def _dispatch_invokes(execution: Any, timers: Any, context: Any) -> bool:
    """(Re-)send every chained invoke still running (`context.invoke`): the target function runs
    as its own workflow `<caller workflow>~<operation>` (its result is not the caller's
    workflow's), at its root, with the caller's deadline; a re-send is absorbed by its commit.
    An invoke of a function the platform does not have fails at once, as Lambda's Invoke does
    (ResourceNotFoundException, recorded in the log: first wins) — told by the invoker's
    `has_function` where it knows the functions, else by the platform's refusal; returns whether
    one did."""
    from aws_durable_execution_sdk_python.lambda_service import OperationStatus, OperationType

    from unum_entry import naming
    from unum_entry.envelope import DataRef, Envelope
    from unum_entry.errors import InvokeError

    refused = False

    meta = execution.state.meta
    for op_id, op in list(execution.state.ops.items()):  # a refusal below folds new entries
        if op.operation_type is not OperationType.CHAINED_INVOKE or op.status is not OperationStatus.STARTED:
            continue
        target = execution.state.invokes.get(op_id, {})
        caller = {"workflow": meta.get("Workflow"), "function": meta.get("Function"),
                  "invocation": meta.get("Invocation"), "deadline": meta.get("Deadline"), "operation": op_id}
        env = Envelope(workflow=naming.invoked_workflow(str(meta.get("Workflow")), op_id),
                       inputs=(DataRef(value={INVOKE: {"caller": caller, "payload": target.get("payload")}}),),
                       deadline=int(meta.get("Deadline") or 0))
        function = str(target.get("function", ""))
        # The embedded engine knows its functions, a Pub/Sub invoker those deployed (`functions=`).
        has_function = getattr(timers.invoker, "has_function", None)
        if has_function is None or has_function(function):
            try:
                timers.invoker.invoke(function, env.to_wire())
                continue
            except InvokeError as exc:
                if not _not_found(exc):
                    raise  # transient: the platform redelivers this execution, which sends it again
        message = f"Function not found: {function} (invoke {op.name or op_id} of {meta.get('Function')})"
        execution.append_completion({"Id": op_id, "Status": "FAILED", "Result": None,
                                     "Error": {"ErrorType": "ResourceNotFoundException", "ErrorMessage": message}})
        refused = True
    return refused


def _not_found(error: Exception) -> bool:
    """Did the platform refuse an invoke because the function does not exist? Lambda's Invoke:
    ResourceNotFoundException; Pub/Sub's publish to a topic that does not exist: NotFound (404)."""
    cause = error.__cause__
    response = getattr(cause, "response", None)
    if isinstance(response, dict) and response.get("Error", {}).get("Code") == "ResourceNotFoundException":
        return True
    return type(cause).__name__ == "NotFound" and getattr(cause, "code", None) == 404


def _answer(caller: dict[str, Any], outcome: dict[str, Any], store: Any, timers: Any) -> None:
    """An invoked execution ended: record its outcome in the caller's log (first wins) and
    re-deliver the caller."""
    from unum_entry.durable_functions.chained import answer

    answer(caller, outcome, store=store, invoker=timers.invoker, clock=timers.clock)


def adapt(handler: Callable[..., Any]) -> Callable[..., Any]:
    """A DurableHandler when `handler` is decorated with `@durable_execution`; otherwise
    `handler` behind a check of a durable function's `invoke` of it: a compiled state machine's
    function runs with the invoke's payload as input and its workflow's end answers the caller
    (unum_entry.durable_functions.chained); any other plain function is refused (it is not a
    durable one: the caller's invoke fails at once, as on AWS)."""
    if is_durable_handler(handler):
        return DurableHandler(handler)
    state_machine = is_state_machine_handler(handler)

    @functools.wraps(handler)  # keeps its marks (`@durable` steps) and `__wrapped__` for its module
    def plain(event: Any, context: Any) -> Any:
        if isinstance(event, dict) and INVOKE in event:
            if not state_machine:
                _refuse_invoke(event[INVOKE], context)
            from unum_entry.durable_functions.chained import accept

            event = accept(event[INVOKE], context)
        return handler(event, context)

    return plain


def _refuse_invoke(invoked: Any, context: Any) -> None:
    """A durable function invoked this plain function: fail the caller's invoke (first outcome
    wins, the caller is re-delivered) and end this invocation's own workflow
    (`<caller workflow>~<operation>`) without running the handler or its next instructions."""
    from unum_entry.timers import timers_of

    timers = timers_of(context)
    name = getattr(context, "function_name", "") or "?"
    message = (f"function {name!r} is not a durable function (its handler is not decorated with "
               "@durable_execution): a durable function can invoke durable functions and compiled state machines")
    if timers is None or not isinstance(invoked, dict) or not isinstance(invoked.get("caller"), dict):
        raise ConfigurationError(message)
    _answer(invoked["caller"], {"Status": "FAILED", "Result": None,
                                "Error": {"ErrorType": "InvalidParameterValueException", "ErrorMessage": message}},
            timers.store, timers)
    raise WorkflowAborted("InvalidParameterValueException", message)


def is_state_machine_handler(handler: Any) -> bool:
    """Is `handler` a compiled Step Functions function's (unum_entry.asl.function.make_handler)?
    (No import of the ASL engine: the handler is defined in that module.)"""
    return getattr(handler, "__module__", None) == "unum_entry.asl.function"


def is_durable_handler(handler: Any) -> bool:
    """Is `handler` the SDK's `@durable_execution` wrapper? (No SDK import: its code object
    lives in the SDK's execution module.)"""
    code = getattr(handler, "__code__", None)
    return (hasattr(handler, "__wrapped__") and code is not None
            and "aws_durable_execution_sdk_python" in code.co_filename.replace("\\", "/"))


__all__ = ["DurableHandler", "DurableSuspended", "adapt", "is_durable_handler"]
