"""One base error type for unum, one subclass per outcome.

Every error unum raises on purpose is an `UnumError`, defined here (modules re-export the ones
they raise, e.g. `unum_entry.plan.PlanError`). Every message names what is wrong and where
(file, function, field), so the CLI can print it as-is instead of a traceback. An error that
ends a workflow carries `error_type` (the failure record's "Error") and `message` ("Cause").
"""

from __future__ import annotations

from typing import Any


class UnumError(Exception):
    """Base of every error unum raises on purpose."""


class IRError(UnumError):
    """An IR document is malformed. The message names the file and the field path."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source = source
        self.field = field
        self.problem = problem
        super().__init__(f"{source}: {field}: {problem}")


class ConditionError(IRError):
    """A condition (Step Functions Choice rule) is malformed."""


class EnvelopeError(UnumError):
    """A request envelope is malformed; the message names the field."""


class WorkflowDefinitionError(UnumError):
    """A workflow folder is inconsistent (missing IR, unknown target, missing handler)."""


class HandlerLoadError(UnumError):
    """A function's handler cannot be imported or is not callable."""


class HandlerFailed(UnumError):
    """The user handler raised. Carries the error type and message for the failure record, and
    `trace`: the frames of the user's code the error came through (see
    `unum_entry.outcome.user_trace`), innermost last."""

    def __init__(self, function: str, error_type: str, message: str,
                 trace: tuple[dict[str, Any], ...] = ()) -> None:
        self.function = function
        self.error_type = error_type
        self.message = message
        self.trace = trace
        super().__init__(f"function {function!r} raised {error_type}: {message}")


class StoreError(UnumError):
    """The datastore failed in a way the runtime cannot absorb."""


class StoreUnusable(StoreError):
    """The store cannot take a write until someone acts on it: its disk is full, its file or
    file system is read-only, the file is corrupt (the message says what to do). Retrying in
    this process cannot help, so the embedded engine stops at once - what it had queued stays
    journaled for the next run - instead of redelivering until it gives up (cloud runtimes
    never see it: only the embedded SQLite database raises it)."""


class SetGone(StoreError):
    """add-to-set found no set: it was collected (or never created by the fan-out origin)."""


class StoreMisuse(UnumError, ValueError):
    """A store or fan-in call with an argument outside its contract (a set of size < 1, a
    negative or out-of-range slot, reading a set as a value): a bug in the caller, deterministic,
    never retried as transient. Also a ValueError, as it was before it joined this hierarchy."""


class StaleInvocation(UnumError):
    """A delivery that must be dropped without running anything: its stored (by-reference)
    envelope was already handled, or a step found the workflow already ended."""


class EndedBeforeDelivery(StaleInvocation):
    """A delivery found its workflow already ended (a timer after a stop: unum_entry.timers): it
    is dropped, and the runtime answers the workflow's durable caller again (a duplicate of the
    ending, absorbed), since the drained work that used to answer it never runs."""


class RetentionExpired(UnumError):
    """A workflow outlived its objects' retention (unum_entry.retention): an execution started
    after the workflow's deadline, or an input it needs has expired. The workflow fails with
    the error name `Unum.RetentionExpired` (not retryable: waiting cannot bring objects back)."""

    error_type = "Unum.RetentionExpired"

    @property
    def message(self) -> str:
        return str(self)


class WorkflowFailed(UnumError):
    """A workflow ended with a failure record (reported by `builder run`)."""


class WorkflowTimeout(UnumError):
    """A local run did not finish within its time limit."""


class HelperReported(UnumError):
    """What a helper process of the embedded engine reported for a call it ran (the type of
    the error, unum_entry.local.helpers): the error itself stayed in that process, which also
    logged it."""

    def __init__(self, error_type: str | None) -> None:
        self.error_type = error_type or "Error"
        super().__init__(f"{self.error_type} (in a helper process)")


class ConditionEvaluationError(UnumError):
    """A valid condition could not be evaluated against this output (e.g. a comparison on a
    path that is not present, as Step Functions' States.Runtime)."""


class StatesRuntimeError(UnumError):
    """A Step Functions runtime error raised while evaluating a state's data flow: `error` is the
    States error name (`States.Runtime`, `States.ResultPathMatchFailure`,
    `States.IntrinsicFailure`, `States.QueryEvaluationError`), `cause` the human-readable
    explanation. Retry/Catch match it by name; as in Step Functions, `States.Runtime` is not
    matched by `States.ALL`."""

    def __init__(self, error: str, cause: str) -> None:
        self.error = error
        self.cause = cause
        super().__init__(f"{error}: {cause}")


class TaskFailed(UnumError):
    """A Task failed with a Step Functions error name and cause (what Retry / Catch match).

    Raised by integrations (`DynamoDB.ConditionalCheckFailedException`), by task-token
    callbacks (`task-failure --error E --cause C`) and by a durable function's failed chained
    invoke; the state runner turns it into the Task's error exactly as given."""

    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause}")
        self.error = error
        self.cause = cause


class AslDefinitionError(UnumError):
    """A state machine definition is invalid; the message names the source, state and field."""

    def __init__(self, source: str, state: str | None, field: str, problem: str) -> None:
        self.source = source
        self.state = state
        self.field = field
        self.problem = problem
        where = f"state {state!r}: " if state is not None else ""
        super().__init__(f"{source}: {where}{field}: {problem}")


class ConfigurationError(UnumError):
    """A function image or process is misconfigured (a missing environment variable, an unknown
    invoker URL); the message names the variable or URL."""


class TimersUnavailable(ConfigurationError):
    """The invoker has no durable-timer scheduler configured (`Invoker.invoke_at`: a Lambda
    invoker without `schedule_role`, a Pub/Sub invoker without `tasks_queue`)."""


class InvokeError(UnumError):
    """The platform refused or failed an asynchronous invoke (retryable by the caller's platform)."""


class BuildError(UnumError):
    """Building, pushing or deploying images failed; the message names the function and step."""


class TransactionConflict(StoreError):
    """A transactional step's application item changed between its read and its commit (another
    writer got there first). `unum_entry.steps` re-reads and retries the step."""


class StepError(UnumError):
    """A step (`ctx.step`, `ctx.transact`, `ctx.now`, …) cannot be used as written: the handler is
    not declared `@durable`, a compensation is not a module-level function, a re-execution
    called a different step at the same position (non-deterministic handler), or a value
    cannot be recorded. The message names the function, the step and what was found."""


class GuardFailed(StoreError):
    """A step transaction's guard did not hold (a witness key present or absent, a set slot
    filled): the invocation committed and was collected meanwhile, so the step must not run."""


class PlanError(UnumError):
    """The committed output or the envelope does not fit the IR (e.g. `map` over a non-list).
    Deterministic: retrying cannot help, so the workflow fails (unum_entry.plan)."""


class UnencodableValue(UnumError):
    """A handler returned something that cannot be stored (not JSON-like data or bytes)."""


class WorkflowAborted(UnumError):
    """A handler's `ctx.abort(error, cause)` (unum_entry.steps): the workflow fails with this
    error and cause, is not retried, and its completed steps are compensated. User code should
    let it propagate."""

    def __init__(self, error: str, cause: str = "") -> None:
        super().__init__(f"{error}: {cause}" if cause else error)
        self.error = error
        self.cause = cause
        self.error_type = error
        self.message = cause


class PlatformGaveUp(UnumError):
    """Lambda's on-failure destination reported that it stopped retrying a delivery."""

    def __init__(self, condition: str, error_type: str, message: str) -> None:
        self.error_type = error_type or condition
        self.message = message or condition
        super().__init__(f"{condition}: {self.error_type}: {self.message}")


class IncompleteOutcome(UnumError):
    """A delivery outcome lacks what its status needs (DONE without its report, RETRY_HANDLER
    without the retry envelope, REDELIVER without its error): a bug in the delivery policy
    (unum_entry.platforms.common.DeliveryOutcome), never retried as transient."""


class RedeliveriesExhausted(UnumError):
    """A platform stopped redelivering a delivery that kept failing (the local platform's
    counterpart of Lambda's on-failure destination record). Names the last error."""

    def __init__(self, function: str, deliveries: int, last: BaseException) -> None:
        self.error_type = type(last).__name__
        self.message = (f"gave up after {deliveries} consecutive failed deliveries of {function!r}; "
                        f"last error: {type(last).__name__}: {last}")
        super().__init__(self.message)


class CallbackError(UnumError):
    """A task-token callback was refused (unum_entry.asl.callbacks); `error` is Step Functions'
    name for the refusal."""

    error = "States.TaskFailed"


class InvalidToken(CallbackError):
    error = "InvalidToken"


class TaskAlreadyCompleted(CallbackError):
    error = "TaskDoesNotExist"


class TaskTimedOut(CallbackError):
    error = "TaskTimedOut"


class TaskNotWaitingYet(CallbackError):
    """The waiting function has not committed its wait yet (a very fast callback): retry shortly."""

    error = "TaskNotWaitingYet"
