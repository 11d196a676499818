"""The AWS Lambda adapter: the awslambdaric loop around `Runtime.handle`.

Events it understands (all JSON):
- an unum envelope (`unum_entry.invokers.lambda_event`: inline, msgpack-wrapped or by reference);
- a Lambda on-failure destination record (`requestContext.condition` + `requestPayload`): the
  platform gave up on one of this function's deliveries → `Runtime.fail` records the failure;
- anything else: the input of a new workflow (its id derives from the request id, so Lambda's
  retries of the same start event start the same workflow).

Handler errors are retried by the adapter itself (it re-invokes its own function with
`attempt + 1`), so the IR's `max_attempts` and the envelope's attempt count hold exactly; the last
failure calls `Runtime.fail`. Anything else (store or invoke trouble, a crash) is raised to Lambda,
whose asynchronous retries and on-failure destination take over.

Versions (issue 44): with `UNUM_WORKFLOW_ALIAS` set (deploy sets it on the entry function) and
an invoker qualified with this process' build, a workflow's start (its first attempt) that the
alias' ramp assigns to another build is forwarded to `ENTRY:<that build>` instead of run here
(`unum_entry.platforms.lambda_routing`): a new workflow's build is a function of its id. The
build that runs a start records itself in the store (`unum_entry.invokers.lambda_builds`), so a
callback or redrive sent from outside the functions continues on it.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import types
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from unum_entry.errors import PlatformGaveUp, StaleInvocation, StoreError, UnumError
from unum_entry.invokers.lambda_event import Delivery, from_event, to_event
from unum_entry.platforms.lambda_routing import ENV_ALIAS, StartRouter
from unum_entry.platforms.common import FunctionSettings, LoadedFunction, RetryPolicy, load_function, run_delivery
from unum_entry.runtime import new_workflow

log = logging.getLogger("unum.lambda")

# The awslambdaric loop imports its handler by "module.attr": the adapter is published under
# this module name (in sys.modules) once it is built, instead of a module-level global.
HANDLER_MODULE = "unum_lambda_handler"


class LambdaAdapter:
    """Turns Lambda events into `Runtime.handle` / `Runtime.fail` calls for one function."""

    def __init__(self, loaded: LoadedFunction, *, retry: RetryPolicy | None = None,
                 sleep=time.sleep, router: StartRouter | None = None) -> None:
        self.loaded = loaded
        self.router = router
        self.retry = retry or RetryPolicy()
        self._sleep = sleep

    def handle(self, event: Any, context: Any) -> dict[str, Any]:
        """The Lambda handler. Returns a small JSON summary of what happened."""
        function = self.loaded.ir.function
        if _is_destination_record(event):
            return self._platform_gave_up(event)
        try:
            delivery = from_event(event, store=self.loaded.store)
        except StaleInvocation as exc:
            log.info("%s: dropped: %s", function, exc)
            return {"function": function, "stale": True}
        except StoreError:
            raise  # reading a stored envelope failed: Lambda retries the delivery
        except UnumError as exc:  # malformed: no retry can help, and no envelope to fail
            log.error("%s: dropped malformed event: %s", function, exc)
            return {"function": function, "error": str(exc)}
        request_id = getattr(context, "aws_request_id", None)
        if delivery is None:
            delivery = Delivery(new_workflow(event, f"wf-{request_id}" if request_id else None))
        env = delivery.envelope
        if self.router is not None and env.start and env.attempt == 0:
            build = self.router.elsewhere(env.workflow)
            if build is not None:  # the ramp gives this workflow to another build: its entry runs it
                self.router.forward(build, to_event(env.to_wire(), store=self.loaded.store))
                return {"function": function, "workflow": env.workflow, "forwarded": build}
        if env.start and env.attempt == 0:
            self._record_build(env.workflow, env.deadline)
        return run_delivery(self.loaded, delivery.envelope, delivery.stored_key, retry=self.retry, sleep=self._sleep,
                            request_id=request_id)

    def _record_build(self, workflow: str, deadline: int) -> None:
        """On a pinned deploy (an invoker qualified with this process' build), record the build
        this start runs on, create-if-absent: what continues the workflow from outside its
        functions reads it (unum_entry.invokers.lambda_builds). Raises StoreError."""
        from unum_entry.invokers.aws_lambda import LambdaInvoker
        from unum_entry.invokers.lambda_builds import record_build

        invoker = self.loaded.invoker
        if isinstance(invoker, LambdaInvoker) and invoker.qualifier is not None:
            record_build(self.loaded.store, workflow, invoker.qualifier, deadline=deadline)

    def _platform_gave_up(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """An on-failure destination record for one of our deliveries: record the failure."""
        function = self.loaded.ir.function
        try:
            delivery = from_event(record.get("requestPayload"), store=self.loaded.store)
        except StaleInvocation:
            return {"function": function, "stale": True}
        except UnumError as exc:
            log.error("%s: on-failure record with a malformed request: %s", function, exc)
            return {"function": function, "error": str(exc)}
        if delivery is None:
            return {"function": function, "ignored": "on-failure record of a non-unum event"}
        context: Mapping[str, Any] = record.get("requestContext") or {}
        payload = record.get("responsePayload")
        response: Mapping[str, Any] = payload if isinstance(payload, Mapping) else {}
        error = PlatformGaveUp(str(context.get("condition", "RetriesExhausted")),
                               str(response.get("errorType", "")), str(response.get("errorMessage", "")))
        env = delivery.envelope
        invokes = context.get("approximateInvokeCount")
        if isinstance(invokes, int) and invokes > env.attempt + 1:
            env = replace(env, attempt=invokes - 1)
        self.loaded.runtime.fail(env, error)
        if delivery.stored_key is not None:
            self.loaded.store.delete([delivery.stored_key])
        return {"function": function, "workflow": env.workflow, "failed": str(error)}


def _is_destination_record(event: Any) -> bool:
    return (isinstance(event, Mapping) and "requestPayload" in event
            and isinstance(event.get("requestContext"), Mapping) and "condition" in event["requestContext"])


def start_router(loaded: LoadedFunction, environ: Mapping[str, str]) -> StartRouter | None:
    """The start router of an entry function whose environment names the workflow alias
    (`UNUM_WORKFLOW_ALIAS`) and whose Lambda invoker is qualified with its build; else None."""
    from unum_entry.invokers.aws_lambda import LambdaInvoker

    alias = environ.get(ENV_ALIAS)
    invoker = loaded.invoker
    if not alias or not isinstance(invoker, LambdaInvoker) or invoker.qualifier is None:
        return None
    return StartRouter(invoker.client, function=invoker.prefix + loaded.ir.function, alias=alias,
                       build=invoker.qualifier)


def main() -> int:
    """Init phase (load IR, handler, clients), then hand the adapter to awslambdaric's loop."""
    logging.basicConfig(level=os.environ.get("UNUM_LOG_LEVEL", "INFO"))
    try:
        loaded = load_function(FunctionSettings.from_env(os.environ))
        retry = RetryPolicy.from_env(os.environ)
    except UnumError as exc:
        print(f"unum_entry: cannot start: {exc}", file=sys.stderr)
        return 2
    adapter = LambdaAdapter(loaded, retry=retry, router=start_router(loaded, os.environ))
    module = types.ModuleType(HANDLER_MODULE)
    module.handler = adapter.handle  # type: ignore[attr-defined]
    sys.modules[HANDLER_MODULE] = module
    from awslambdaric.__main__ import main as ric_main  # type: ignore[import-untyped]  # heavy: only in a Lambda process

    ric_main([sys.argv[0], f"{HANDLER_MODULE}.handler"])
    return 0
