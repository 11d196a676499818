"""The engine behind the Step Functions API in the cloud (issue 43's front door): the methods
StatesApi calls on builder.serve.engine.Engine, over functions that are already deployed.

There is no queue and no compiler here. The deployment runs one compiled state machine (the
workflow folder `python -m builder deploy --api` deployed, carried in the API's image):
- `compiled(name, definition)` accepts a definition only when it is the one deployed (compared
  as JSON with the folder's `statemachine.json`) and answers that folder; any other definition is
  refused with one line saying to deploy it (the functions it needs do not exist yet);
- `start` writes the start record (create-if-absent, as `run` does: builder.runs.start_record)
  and invokes the entry function once through the platform's invoker (an async Lambda Invoke):
  the functions then run the workflow in-situ, exactly once over at-least-once delivery, and
  record its ending in the store, where DescribeExecution, GetExecutionHistory and StopExecution
  read and write it (a repeated invoke of the same workflow id is a duplicate the entry's
  ingress absorbs);
- `restart(execution)`, called on a repeated StartExecution (builder.serve.store_registry's
  `on_repeat`), does the same again for an execution that has not ended: a start cut short
  between its index record and its invoke (the API function timed out or crashed, and the
  client retried) is completed, and a start that was complete gets a duplicate invoke that the
  entry's ingress absorbs;
- `platform(folder).invoker` is that invoker, for RedriveExecution and the task-token calls,
  sending each workflow to the build it started on (its build record,
  unum_entry.invokers.lambda_builds), not `$LATEST`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unum_entry.errors import UnumError
from unum_entry.invokers.lambda_builds import recorded_builds

if TYPE_CHECKING:
    from unum_entry.invokers import Invoker
    from unum_entry.stores.base import Store
    from unum_entry.workflow import Workflow

    from builder.serve.registry import Execution

DEFINITION_FILE = "statemachine.json"  # what `python -m builder compile` writes into the folder


class NotDeployed(UnumError):
    """A definition other than the deployed one: its functions are not deployed."""


class _NoQueue:
    """The deployment has no local delivery queue: what a redrive sends is Lambda's to deliver."""

    def flush(self) -> None:
        """Nothing journaled here to flush."""


@dataclass(frozen=True)
class Deployed:
    """What `Engine.platform(folder)` gives StatesApi and its redrives (builder.serve.redrives):
    the invoker of the deployed functions, the deployed workflow (the timers a redrive re-arms)
    and no local queue."""

    invoker: Invoker
    workflow: Workflow
    queue: _NoQueue = _NoQueue()

    def recover(self, workflow_id: str) -> bool:
        """Nothing of a dead redrive is journaled here (its invokes went to Lambda): False."""
        return False


class CloudEngine:
    """Starts executions of the deployed `workflow` by invoking its entry through `invoker`
    (module docstring). `functions` is None: TestState runs only mocked Tasks here."""

    functions: Path | None = None

    def __init__(self, store: Store, workflow: Workflow, invoker: Invoker) -> None:
        self.store = store
        self.workflow = workflow
        self.invoker = invoker
        self._continuing: Invoker = recorded_builds(invoker, store)
        self.folder = str(Path(workflow.folder).resolve())
        path = Path(self.folder) / DEFINITION_FILE
        self.definition: Any = json.loads(path.read_text()) if path.is_file() else None

    def compiled(self, name: str, definition: str, mocks: Any = None) -> str:
        """The deployed folder, if `definition` is the deployed one; else NotDeployed."""
        if mocks:
            raise NotDeployed("mock test cases run on `python -m builder serve` only, not on a deployed API")
        try:
            wanted = json.loads(definition)
        except ValueError as exc:
            raise NotDeployed(f"the definition is not JSON: {exc}") from None
        if self.definition is None or wanted != self.definition:
            raise NotDeployed(f"this API runs the state machine deployed with it ({self.workflow.name}); deploy "
                              "another definition with `python -m builder compile` and `deploy --target aws --api`")
        return self.folder

    def platform(self, folder: str) -> Deployed:
        """The deployed functions' invoker (there is one deployed folder), continuing each
        workflow on the build it started on: SendTask* and RedriveExecution invoke
        `FUNCTION:<its recorded build>` on Lambda, not `$LATEST` (unum_entry.invokers.lambda_builds;
        no record: this API's invoker as configured)."""
        return Deployed(self._continuing, self.workflow)

    def start(self, folder: str, workflow_id: str, input_value: Any) -> None:
        """Record the start of `workflow_id`, then invoke the entry function once (module docstring)."""
        from unum_entry.runtime import new_workflow

        from builder.runs import start_record

        start_record.claim(self.store, workflow_id, input_value, folder=folder, resume=False)
        self.invoker.invoke(self.workflow.entry, new_workflow(input_value, workflow_id).to_wire())

    def restart(self, execution: Execution) -> None:
        """Start `execution` again unless it has ended (module docstring): its start record is
        create-if-absent, its invoke a duplicate delivery if the first one happened."""
        from unum_entry.outcome import Ending

        if execution.folder != self.folder or self.store.get_many(Ending.of(execution.workflow).keys):
            return
        self.start(execution.folder, execution.workflow, json.loads(execution.input))

    def resume(self, folder: str, workflow_id: str, input_value: Any) -> int:
        """Nothing to re-drive: the platform (Lambda's retries, the functions' ingress) owns
        every delivery once the entry was invoked."""
        return 0

    def close(self) -> None:
        """Nothing to release (the store and the invoker belong to the caller)."""
