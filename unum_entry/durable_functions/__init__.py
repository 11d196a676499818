"""Lambda durable functions handlers (`aws-durable-execution-sdk-python`, `@durable_execution`)
run unchanged on unum: the SDK's service client over unum's store, its re-invocations through
unum's invokers and timers (docs/durable-functions.md).

- `adapter`: the unum handler around an SDK-decorated one (`adapt`, applied by `load_handler`);
- `log` / `service`: the execution's checkpoint log and what it means (first outcome wins);
- `client`: `DurableServiceClient` over the log;
- `callbacks`: callback ids, `complete` and `heartbeat` (callback-success / -failure / -heartbeat);
- `chained`: the end of a `context.invoke` — a target's outcome completes the caller's invoke
  (a compiled state machine's end, reported by the runtime);
- `history`: every operation of a workflow's executions (`inspect --history`);
- `effects`: `transact(step_context, name, fn, ...)`, a step's exactly-once transactional effect
  (`step_identity`: the one read of the SDK's private step context, version-checked).

Importing this package does not import the SDK (only running a durable handler does).
"""

from unum_entry.durable_functions.adapter import DurableSuspended, adapt, is_durable_handler
from unum_entry.durable_functions.effects import transact

__all__ = ["DurableSuspended", "adapt", "is_durable_handler", "transact"]
