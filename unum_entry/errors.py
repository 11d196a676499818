"""One base error type for unum, one subclass per outcome.

Every message names what is wrong and where (file, function, field), so the CLI can print it
as-is instead of a traceback.
"""

from __future__ import annotations


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
    """The user handler raised. Carries the error type and message for the failure record."""

    def __init__(self, function: str, error_type: str, message: str) -> None:
        self.function = function
        self.error_type = error_type
        self.message = message
        super().__init__(f"function {function!r} raised {error_type}: {message}")


class StoreError(UnumError):
    """The datastore failed in a way the runtime cannot absorb."""


class SetGone(StoreError):
    """add-to-set found no set: it was collected (or never created by the fan-out origin)."""


class StaleInvocation(UnumError):
    """An invocation's input reference is gone: its own checkpoint was committed and collected
    by a downstream node, so this delivery is a late duplicate and must be dropped."""


class WorkflowFailed(UnumError):
    """A workflow ended with a failure record (reported by `builder run`)."""


class WorkflowTimeout(UnumError):
    """A local run did not finish within its time limit."""


class ConditionEvaluationError(UnumError):
    """A valid condition could not be evaluated against this output (e.g. a comparison on a
    path that is not present, as Step Functions' States.Runtime)."""
