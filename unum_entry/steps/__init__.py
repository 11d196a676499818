"""Exactly-once side effects inside a handler, as a layer above the runtime core (docs/steps.md).

- `api`: the user API — `@durable`, and `StepContext` (`ctx.step`, `ctx.transact`, `ctx.now`,
  `ctx.random`, `ctx.uuid4`, `ctx.abort`, `ctx.step_id`).
- `journal`: the steps of one execution, each recorded once (the idempotence monad of
  Ramalingam and Vaswani, "Fault Tolerance via Idempotence", POPL 2013).
- `transaction`: a transactional step's reads and writes on application tables.
- `saga`: the workflow's compensation log and the chain of compensations after an abort.
- `layer`: `StepsLayer`, the only thing the core calls (through `unum_entry.hooks.Layer`).

`from unum_entry.steps import durable` (or `from unum_entry import durable`) is all a handler needs.
"""

from __future__ import annotations

from unum_entry.checkpoint import witnesses
from unum_entry.steps.api import DURABLE_ATTRIBUTE, Aborted, StepContext, StepsAPI, durable, is_durable
from unum_entry.steps.journal import HookRaised, Journal, StepEnv
from unum_entry.steps.layer import StepsLayer, run_compensation
from unum_entry.steps.saga import (COMPENSATION_FIELD, CompensationRequest, abort_workflow, advance,
                                   append_compensation, compensation_envelope, compensation_request,
                                   start_compensations)
from unum_entry.steps.transaction import Transaction

__all__ = ["COMPENSATION_FIELD", "DURABLE_ATTRIBUTE", "Aborted", "CompensationRequest", "HookRaised", "Journal",
           "StepContext", "StepEnv", "StepsAPI", "StepsLayer", "Transaction", "abort_workflow", "advance",
           "append_compensation", "compensation_envelope", "compensation_request", "durable", "is_durable",
           "run_compensation", "start_compensations", "witnesses"]
