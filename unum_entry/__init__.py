"""unum: serverless workflows without an orchestrator — the runtime that runs with every function.

The public API (everything else is internal and may change):

- `durable`: the decorator of handlers that use exactly-once steps (`ctx.step`, `ctx.transact`,
  `ctx.now`, `ctx.random`, `ctx.uuid4`, `ctx.abort`; docs/steps.md).
- `InvocationContext`: the handler's second argument (workflow id, function, invocation,
  attempt, fan-out index/size/iteration); `StepContext`: what a `@durable` handler gets.
- `local_platform(workflow, store, **options)`: a context manager yielding a `LocalPlatform`
  that runs whole workflows on one machine (`platform.run(input)` returns a `RunResult`, whose
  `status` is a `WorkflowStatus`); `load_workflow(folder)` reads a workflow folder for it.
- `open_store(url)`: a store by URL (`path/unum.db` or `sqlite:///path.db`, a folder or
  `file:///path`, `dynamodb://TABLE?...`, `firestore://...`).
- `read_outcome(store, workflow_id)`: what a workflow left (results, failure record, status).
- `read_history(store, workflow_id)`: its execution history, read from its commits
  (`unum_entry.history.events` numbers it as Step Functions does; docs/history.md);
  `stop_workflow(store, workflow_id)` ends it `stopped`; `redrive(store, workflow_id, invoker)`
  re-runs a failed one from its failed invocation, keeping what committed.
- The errors: `UnumError` (the base of all) and one subclass per outcome (below).

    from unum_entry import durable, local_platform, load_workflow, open_store

    with local_platform(load_workflow("images/chain"), open_store(".unum/unum.db")) as platform:
        print(platform.run({"name": "world"}).result)

Everything is imported on first use (module `__getattr__`, unum_entry.lazy): `import unum_entry` costs next to
nothing on a function's cold start and never imports boto3 or the Google clients.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from unum_entry.lazy import lazy_exports

if TYPE_CHECKING:
    from unum_entry.context import InvocationContext
    from unum_entry.errors import (ConfigurationError, EnvelopeError, HandlerFailed, HandlerLoadError, InvokeError,
                                   IRError, PlanError, RetentionExpired, StepError, StoreError, StoreMisuse,
                                   UnencodableValue, UnumError, WorkflowAborted, WorkflowDefinitionError,
                                   WorkflowFailed, WorkflowTimeout)
    from unum_entry.local.platform import LocalPlatform, local_platform
    from unum_entry.history import read_history
    from unum_entry.outcome import RunResult, WorkflowStatus, read_outcome, stop_workflow
    from unum_entry.redrive import redrive
    from unum_entry.steps.api import StepContext, durable
    from unum_entry.stores import open_store
    from unum_entry.workflow import load_workflow

_ERRORS = ("UnumError", "ConfigurationError", "EnvelopeError", "HandlerFailed", "HandlerLoadError", "InvokeError",
           "IRError", "PlanError", "RetentionExpired", "StepError", "StoreError", "StoreMisuse", "UnencodableValue",
           "WorkflowAborted", "WorkflowDefinitionError", "WorkflowFailed", "WorkflowTimeout")

# Where each public name lives (read-only).
_EXPORTS: dict[str, str] = {
    "durable": "unum_entry.steps.api",
    "StepContext": "unum_entry.steps.api",
    "InvocationContext": "unum_entry.context",
    "local_platform": "unum_entry.local.platform",
    "LocalPlatform": "unum_entry.local.platform",
    "load_workflow": "unum_entry.workflow",
    "open_store": "unum_entry.stores",
    "read_outcome": "unum_entry.outcome",
    "read_history": "unum_entry.history",
    "stop_workflow": "unum_entry.outcome",
    "redrive": "unum_entry.redrive",
    "RunResult": "unum_entry.outcome",
    "WorkflowStatus": "unum_entry.outcome",
    **{name: "unum_entry.errors" for name in _ERRORS},
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
