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

Importing this package does not import the SDK (only running a durable handler does), nor its modules:
its exports are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from unum_entry.lazy import lazy_exports

if TYPE_CHECKING:
    from unum_entry.durable_functions.adapter import DurableSuspended, adapt, is_durable_handler
    from unum_entry.durable_functions.effects import transact

__all__ = ["DurableSuspended", "adapt", "is_durable_handler", "transact"]
_EXPORTS = {"DurableSuspended": "unum_entry.durable_functions.adapter", "adapt": "unum_entry.durable_functions.adapter",
            "is_durable_handler": "unum_entry.durable_functions.adapter",
            "transact": "unum_entry.durable_functions.effects"}


# each export on first use (unum_entry.lazy), so importing one module of this package (the
# platforms import `chained`) does not import the adapter
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
