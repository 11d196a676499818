"""The Lambda durable-execution REST API of `serve`: AWS's paths and shapes (botocore's `lambda`
model: `requestUri`, input and output shapes, error codes and statuses), answered over unum's
store and embedded engine. `LambdaApi(...).install(server)` registers one route per operation.

- `Invoke` of a durable function (`POST /2015-03-31/functions/{FunctionName}/invocations`)
  starts a durable execution of `serve --functions DIR/<FunctionName>/` (a handler decorated
  with the SDK's `@durable_execution`) on its workflow folder (builder.serve.durable_code) as
  the unum workflow `durable-<id>`, indexed in builder.serve.durable_index. `Event` answers 202
  with the execution's ARN (`X-Amz-Durable-Execution-Arn`); `RequestResponse` waits for its end
  (at most `SYNC_TIMEOUT`, Lambda's 15 minutes) and answers its result, or its error with
  `X-Amz-Function-Error: Unhandled`. `X-Amz-Durable-Execution-Name` names it: the same name
  and payload while it runs re-attach to it, anything else is
  DurableExecutionAlreadyStartedException.
- `GetDurableExecution`, `ListDurableExecutionsByFunction`: statuses as the store decides them
  (unum_entry.outcome: first ending wins), cached in the index once ended.
- `GetDurableExecutionHistory`: events from the execution's log (builder.serve.durable_history).
- `StopDurableExecution`: unum_entry.outcome.stop_workflow (first ending wins).
- `SendDurableExecutionCallbackSuccess / Failure / Heartbeat`:
  unum_entry.durable_functions.callbacks (as `callback-success` does), re-delivered on the
  platform of the execution the callback belongs to (an Invoke's, or a Step Functions
  execution's whose durable Task waits).
- `CheckpointDurableExecution`, `GetDurableExecutionState` (what the SDK calls with its own
  boto3 client): the execution's log (unum_entry.durable_functions.log), first outcome wins; a
  checkpoint that contradicts the log is answered without a CheckpointToken, as unum's own
  service client answers it (the SDK stops and replays).
- `DeleteDurableExecution`: an ended execution leaves the index (Get / List / History answer
  ResourceNotFoundException); its records in the store expire by unum's retention rule (deleted
  early, a late re-delivery could run it again).
- `PauseDurableExecution` / `ResumeDurableExecution`: refused (`UnsupportedOperationException`,
  501): unum's engine has no pause — its deliveries and timers run as they fall due, and
  nothing holds them back.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from builder.serve.durable_arns import LATEST, LambdaArns, check_execution_name
from builder.serve.durable_code import DurableCode
from builder.serve.durable_history import Ending, seconds
from builder.serve.durable_index import DurableExecution, DurableIndex
from builder.serve.wire import ApiError, Service, rest_request, rest_response

OPERATIONS = ("Invoke", "GetDurableExecution", "GetDurableExecutionHistory", "ListDurableExecutionsByFunction",
              "StopDurableExecution", "PauseDurableExecution", "ResumeDurableExecution", "DeleteDurableExecution",
              "SendDurableExecutionCallbackSuccess", "SendDurableExecutionCallbackFailure",
              "SendDurableExecutionCallbackHeartbeat", "CheckpointDurableExecution", "GetDurableExecutionState")
SYNC_TIMEOUT = 900.0  # seconds a RequestResponse Invoke waits for the execution's end (Lambda's limit)
SYNC_POLL = 0.05
WORKFLOW_PREFIX = "durable-"
_STATUS = {"succeeded": "SUCCEEDED", "failed": "FAILED", "stopped": "STOPPED", "timed out": "TIMED_OUT"}
_GREEDY_LABELS = frozenset({"DurableExecutionArn"})  # an ARN holds '/'
_ENDED = frozenset({"SUCCEEDED", "FAILED", "STOPPED", "TIMED_OUT"})


class LambdaApi:
    """The operations (module docstring) over `store`, `engine` (builder.serve.engine.Engine) and
    `registry` (builder.serve.registry.Registry: a Step Functions execution a callback may belong
    to); `settings` is `serve`'s (builder.serve.app.Settings)."""

    def __init__(self, store: Any, engine: Any, registry: Any, settings: Any,
                 clock: Callable[[], float] = time.time) -> None:
        state = Path(settings.state_dir)
        self.store = store
        self.engine = engine
        self.registry = registry
        self.clock = clock
        self.service = Service("lambda")
        self.index = DurableIndex(state / "durable.db")
        self.code = DurableCode(Path(settings.functions).resolve() if settings.functions else None, state)
        self.arns = LambdaArns(settings.region, settings.account)
        self._durable: dict[str, bool] = {}  # workflow folder -> is its entry a durable handler
        self._invocations: dict[str, str] = {}  # execution id -> the unum invocation running it
        self._durable_lock = threading.Lock()

    # ---- routes -------------------------------------------------------------------------

    def install(self, server: Any) -> LambdaApi:
        """Register every operation's route on `server` (builder.serve.http.ApiServer), then
        continue the durable executions a previous server left running."""
        routes = []
        for name in OPERATIONS:
            operation = self.service.operation(name)
            uri = operation.http["requestUri"].split("?", 1)[0]
            routes.append((len(re.sub(r"\{[^}]+\}", "", uri)), operation.http["method"], _pattern(uri), operation))
        for _, method, pattern, operation in sorted(routes, key=lambda r: -r[0]):  # '/history' before the bare ARN
            server.add_route(method, pattern, self._handler(operation))
        self.resume()
        return self

    def _handler(self, operation: Any) -> Callable[..., tuple[int, Any, dict[str, str]]]:
        answer = getattr(self, f"op_{operation.name}")

        def handle(match: re.Match[str], query: dict[str, list[str]], body: bytes,
                   headers: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
            params = rest_request(self.service, operation, match.groupdict(), query, headers, body)
            return rest_response(self.service, operation, answer(params))

        return handle

    def error(self, code: str, message: str) -> ApiError:
        """`code` with the HTTP status the model gives it (400 for a code it does not have)."""
        try:
            status = int(self.service.model.shape_for(code).metadata.get("error", {}).get("httpStatusCode", 400))
        except Exception:  # noqa: BLE001 - botocore's NoShapeFoundError: a code of our own
            status = 400
        return ApiError(code, message, status)

    def resume(self) -> int:
        """Continue every indexed execution a previous server left running; returns how many."""
        import logging

        resumed = 0
        for execution in self.index.unended():
            try:
                if self._ending(execution).status == "RUNNING":
                    self.engine.resume(execution.folder, execution.workflow, _input_value(execution.input))
                    resumed += 1
            except Exception as exc:  # noqa: BLE001 - one broken execution must not keep the server down
                logging.getLogger("unum.serve").warning("serve: could not resume %s: %s", execution.workflow, exc)
        return resumed

    # ---- executions -------------------------------------------------------------------------

    def _arn(self, execution: DurableExecution) -> str:
        return self.arns.execution(execution.function, execution.name, execution.id)

    def _find(self, arn: str, *, missing: str = "ResourceNotFoundException") -> DurableExecution:
        ref = self.arns.parse_execution(arn)
        execution = self.index.get(ref.id)
        if execution is None or execution.function != ref.function or execution.name != ref.name:
            raise self.error(missing, f"Durable execution not found: {arn}")
        return execution

    def _ending(self, execution: DurableExecution) -> Ending:
        """How `execution` ended, as the store decided (status RUNNING while it has not)."""
        if execution.status is not None:
            return Ending(execution.status, execution.ended, execution.result,
                          json.loads(execution.error) if execution.error else None)
        from unum_entry.history import read_history
        from unum_entry.outcome import Ending as StoreEnding
        from unum_entry.outcome import read_outcome

        if not self.store.get_many(StoreEnding.of(execution.workflow).keys):  # two key reads, no scan
            return Ending("RUNNING")
        outcome = read_outcome(self.store, execution.workflow)
        status = _STATUS.get(outcome.status.value)
        if status is None:
            return Ending("RUNNING")
        history = read_history(self.store, execution.workflow)
        ended = max(history.ended_ms / 1000 if history.ended_ms else self.clock(), execution.started)
        result = json.dumps(outcome.result) if status == "SUCCEEDED" else None
        failure = outcome.failure or {}
        error = None if status == "SUCCEEDED" else _error_object(failure)
        self.index.remember_end(execution.id, status, ended, result=result,
                                error=json.dumps(error) if error is not None else None)
        return Ending(status, ended, result, error)

    def _log(self, execution: DurableExecution) -> Any:
        """The execution's checkpoint log, read to its end (stamped with its deadline once known)."""
        from unum_entry import naming
        from unum_entry.durable_functions.log import ExecutionLog
        from unum_entry.retention import Ledger, store_retention

        retention = store_retention(self.store)
        invocation = self._invocation(execution) or naming.checkpoint_key(execution.workflow, execution.function, ())
        log = ExecutionLog(self.store, invocation, Ledger.bounded(execution.workflow, None, retention),
                           clock=retention.clock)
        log.catch_up()
        if log.state.meta.get("Deadline"):
            log.ledger = Ledger.bounded(execution.workflow, int(log.state.meta["Deadline"]), retention)
        return log

    def _invocation(self, execution: DurableExecution) -> str | None:
        """The unum invocation running the execution: named in its log's first entry (found by
        one pass over the workflow's records, then remembered), None before it began."""
        with self._durable_lock:
            found = self._invocations.get(execution.id)
        if found is not None:
            return found
        for record in self.store.records(execution.workflow):
            if not record.key.startswith("d-") or record.value is None:
                continue
            try:
                meta = json.loads(record.value).get("x")
            except (ValueError, AttributeError):
                continue
            if isinstance(meta, dict) and meta.get("Function") == execution.function and meta.get("Invocation") \
                    and not meta.get("Caller"):
                with self._durable_lock:
                    self._invocations[execution.id] = str(meta["Invocation"])
                return str(meta["Invocation"])
        return None

    def _is_durable(self, folder: str, function: str) -> bool:
        """Is the entry of `folder` decorated with `@durable_execution`? (Imports its handler
        once per folder, as the engine does.)"""
        with self._durable_lock:
            if folder not in self._durable:
                from unum_entry.durable_functions.adapter import DurableHandler
                from unum_entry.ir import load_ir
                from unum_entry.handlers import load_handler

                home = Path(folder) / function
                handler = load_handler(home, load_ir(home / "unum-ir.json").handler, function=function)
                self._durable[folder] = isinstance(handler, DurableHandler)
            return self._durable[folder]

    # ---- Invoke -------------------------------------------------------------------------

    def op_Invoke(self, p: dict[str, Any]) -> dict[str, Any]:
        from unum_entry.errors import HandlerLoadError

        function = self.arns.parse_function(p["FunctionName"])
        if p.get("Qualifier") not in (None, LATEST):
            raise self.error("ResourceNotFoundException", f"Function not found: {self.arns.function(function)}:"
                                                          f"{p['Qualifier']} (unum serve runs $LATEST only)")
        folder = self.code.folder(function)
        try:
            durable = self._is_durable(folder, function)
        except HandlerLoadError as exc:
            raise self.error("InvalidParameterValueException", str(exc)) from None
        if not durable:
            raise self.error("InvalidParameterValueException",
                             f"function {function!r} is not a durable function (its handler is not decorated with "
                             "@durable_execution): unum serve's Invoke runs durable functions only")
        kind = p.get("InvocationType") or "RequestResponse"
        if kind == "DryRun":
            return {"StatusCode": 204}
        text = p.get("Payload") or ""
        try:
            value = _input_value(text)
        except ValueError:
            raise self.error("InvalidRequestContentException", "Could not parse request body into json: the "
                                                               "payload is not JSON") from None
        name = check_execution_name(p["DurableExecutionName"]) if p.get("DurableExecutionName") \
            else str(uuid.uuid4())
        execution_id = str(uuid.uuid4())
        execution = DurableExecution(execution_id, function, name, f"{WORKFLOW_PREFIX}{execution_id}", folder,
                                     self.clock(), text)
        indexed, created = self.index.add(execution)
        if not created:
            if not (_same_payload(indexed.input, text) and self._ending(indexed).status == "RUNNING"):
                raise self.error("DurableExecutionAlreadyStartedException",
                                 f"Durable execution {name!r} of {function} was already started: "
                                 f"{self._arn(indexed)}")
            execution = indexed  # the same start again: re-attach to it
        else:
            self.engine.start(folder, execution.workflow, value)
        arn = self._arn(execution)
        if kind == "Event":
            return {"StatusCode": 202, "DurableExecutionArn": arn}
        deadline = time.monotonic() + SYNC_TIMEOUT
        ending = self._ending(execution)
        while ending.status == "RUNNING" and time.monotonic() < deadline:
            time.sleep(SYNC_POLL)
            ending = self._ending(execution)
        answer: dict[str, Any] = {"StatusCode": 200, "DurableExecutionArn": arn, "ExecutedVersion": LATEST}
        if ending.status == "SUCCEEDED":
            answer["Payload"] = ending.result if ending.result is not None else "null"
            return answer
        if ending.status == "RUNNING":
            error: Mapping[str, Any] = {"ErrorType": "Sandbox.Timedout", "ErrorMessage": (
                f"the durable execution still runs after {SYNC_TIMEOUT:.0f} s (Lambda's limit for a synchronous "
                f"invoke); it goes on: {arn}")}
        else:
            error = ending.error or {"ErrorType": ending.status, "ErrorMessage": ""}
        answer["FunctionError"] = "Unhandled"
        answer["Payload"] = json.dumps({"errorMessage": error.get("ErrorMessage") or "",
                                        "errorType": error.get("ErrorType") or ending.status,
                                        "stackTrace": list(error.get("StackTrace") or [])})
        return answer

    # ---- reading ------------------------------------------------------------------------

    def _summary(self, execution: DurableExecution, ending: Ending) -> dict[str, Any]:
        return {"DurableExecutionArn": self._arn(execution), "DurableExecutionName": execution.name,
                "FunctionArn": f"{self.arns.function(execution.function)}:{LATEST}", "Status": ending.status,
                "StartTimestamp": execution.started, "EndTimestamp": ending.at}

    def op_GetDurableExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        execution = self._find(p["DurableExecutionArn"])
        ending = self._ending(execution)
        answer = self._summary(execution, ending)
        answer["Version"] = LATEST
        include = p.get("IncludeExecutionData", True)
        answer["ExecutionDataIncluded"] = include
        if include:
            answer.update(InputPayload=execution.input, Result=ending.result, Error=ending.error)
        return answer

    def op_ListDurableExecutionsByFunction(self, p: dict[str, Any]) -> dict[str, Any]:
        function = self.arns.parse_function(p["FunctionName"])
        if p.get("Qualifier") not in (None, LATEST):
            raise self.error("ResourceNotFoundException", f"Function not found: {self.arns.function(function)}:"
                                                          f"{p['Qualifier']} (unum serve runs $LATEST only)")
        executions = self.index.of_function(function)
        if not executions:
            self.code.folder(function)  # ResourceNotFoundException for a function serve does not have
        wanted = set(p.get("Statuses") or ())
        rows = []
        for execution in reversed(executions) if p.get("ReverseOrder") else executions:
            if p.get("DurableExecutionName") and execution.name != p["DurableExecutionName"]:
                continue
            if p.get("StartedAfter") is not None and execution.started <= seconds(p["StartedAfter"]):
                continue
            if p.get("StartedBefore") is not None and execution.started >= seconds(p["StartedBefore"]):
                continue
            ending = self._ending(execution)
            if wanted and ending.status not in wanted:
                continue
            rows.append(self._summary(execution, ending))
        page, marker = _page(rows, p, self.error)
        return {"DurableExecutions": page, "NextMarker": marker}

    def op_GetDurableExecutionHistory(self, p: dict[str, Any]) -> dict[str, Any]:
        from unum_entry.durable_functions.service import view

        from builder.serve.durable_history import events

        execution = self._find(p["DurableExecutionArn"])
        ending = self._ending(execution)
        log = self._log(execution)
        found = events(log.state, view(log.state, log.now_ms()), ending,
                       include_data=p.get("IncludeExecutionData", True),
                       event_types=self.service.model.shape_for("EventType").enum)
        if p.get("ReverseOrder"):
            found.reverse()
        page, marker = _page(found, p, self.error)
        return {"Events": page, "NextMarker": marker}

    # ---- ending ---------------------------------------------------------------------------

    def op_StopDurableExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        from unum_entry.outcome import stop_workflow

        execution = self._find(p["DurableExecutionArn"])
        ending = self._ending(execution)
        if ending.status == "RUNNING":
            error = p.get("Error") or {}
            stop_workflow(self.store, execution.workflow, error=error.get("ErrorType"),
                          cause=error.get("ErrorMessage"))
            ending = self._ending(execution)
        elif ending.status != "STOPPED":
            raise self.error("InvalidParameterValueException", f"Durable execution is {ending.status} and cannot be "
                                                               f"stopped: {p['DurableExecutionArn']}")
        return {"StopTimestamp": ending.at if ending.at is not None else self.clock()}

    def op_DeleteDurableExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        execution = self._find(p["DurableExecutionArn"])
        status = self._ending(execution).status
        if status not in _ENDED:
            raise self.error("ResourceConflictException", f"Durable execution is {status}: only a SUCCEEDED, FAILED, "
                                                          f"STOPPED or TIMED_OUT one can be deleted")
        self.index.delete(execution.id)
        return {"DeletionRequestTimestamp": self.clock()}

    def op_PauseDurableExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        self._find(p["DurableExecutionArn"])
        raise ApiError("UnsupportedOperationException", "PauseDurableExecution is not supported by unum serve: unum's "
                                                        "engine has no pause (its deliveries and timers run as they "
                                                        "fall due); StopDurableExecution ends an execution", 501)

    def op_ResumeDurableExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        self._find(p["DurableExecutionArn"])
        raise ApiError("UnsupportedOperationException", "ResumeDurableExecution is not supported by unum serve: "
                                                        "unum's engine has no pause, so no execution is paused", 501)

    # ---- callbacks ------------------------------------------------------------------------

    def _callback_invoker(self, callback_id: str) -> Any:
        """The invoker that re-delivers the execution `callback_id` belongs to: the platform of
        its Invoke's folder, or of the Step Functions execution whose durable Task waits."""
        from unum_entry.durable_functions.callback_ids import CallbackRef, InvalidCallbackId

        try:
            ref = CallbackRef.parse(callback_id)
        except InvalidCallbackId:
            raise self.error("InvalidParameterValueException", f"Invalid callback id: {callback_id[:64]!r}") from None
        root = ref.workflow.split("~", 1)[0]  # a durable invoke's target runs as `<caller workflow>~<operation>`
        found = self.index.by_workflow(root)
        folder = found.folder if found is not None else None
        if folder is None:
            machine_execution = self.registry.execution(root)
            folder = machine_execution.folder if machine_execution is not None else None
        if folder is None:
            raise self.error("ResourceNotFoundException", "Callback not found: no durable execution of this server "
                                                          "waits on it")
        return self.engine.platform(folder).invoker

    def _completing(self, callback_id: str, action: Callable[[Any], Any]) -> None:
        from unum_entry.durable_functions import callbacks

        invoker = self._callback_invoker(callback_id)
        try:
            action(invoker)
        except callbacks.InvalidCallbackId:
            raise self.error("ResourceNotFoundException", f"Callback not found: {callback_id[:64]}") from None
        except callbacks.CallbackAlreadyCompleted as exc:
            if "TIMED_OUT" in str(exc):
                raise self.error("CallbackTimeoutException", f"Callback timed out: {callback_id[:64]}") from None
            raise self.error("InvalidParameterValueException", f"Callback already completed: {exc}") from None

    def op_SendDurableExecutionCallbackSuccess(self, p: dict[str, Any]) -> dict[str, Any]:
        from unum_entry.durable_functions import callbacks

        self._completing(p["CallbackId"], lambda invoker: callbacks.complete(
            p["CallbackId"], store=self.store, invoker=invoker, result=p.get("Result")))
        return {}

    def op_SendDurableExecutionCallbackFailure(self, p: dict[str, Any]) -> dict[str, Any]:
        from unum_entry.durable_functions import callbacks

        error = {k: v for k, v in (p.get("Error") or {}).items() if v is not None}
        error.setdefault("ErrorType", "CallbackFailure")
        self._completing(p["CallbackId"], lambda invoker: callbacks.complete(
            p["CallbackId"], store=self.store, invoker=invoker, error=error))
        return {}

    def op_SendDurableExecutionCallbackHeartbeat(self, p: dict[str, Any]) -> dict[str, Any]:
        from unum_entry.durable_functions import callbacks

        self._completing(p["CallbackId"], lambda _invoker: callbacks.heartbeat(p["CallbackId"], store=self.store))
        return {}

    # ---- the SDK's own calls ----------------------------------------------------------------

    def _running_log(self, arn: str, token: str) -> tuple[DurableExecution, Any]:
        """The log of the running execution `arn` for a checkpoint token it issued; else
        InvalidParameterValueException (these two operations have no ResourceNotFoundException)."""
        execution = self._find(arn, missing="InvalidParameterValueException")
        if not token.startswith(f"{execution.id}:"):
            raise self.error("InvalidParameterValueException", f"Invalid checkpoint token for {arn}")
        status = self._ending(execution).status
        if status != "RUNNING":
            raise self.error("InvalidParameterValueException", f"Durable execution is {status}: {arn}")
        log = self._log(execution)
        if log.length == 0:
            raise self.error("InvalidParameterValueException", f"Durable execution has not started yet: {arn}")
        return execution, log

    def op_CheckpointDurableExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        from aws_durable_execution_sdk_python.lambda_service import OperationUpdate

        from unum_entry.durable_functions.service import Conflict, view

        execution, log = self._running_log(p["DurableExecutionArn"], p["CheckpointToken"])
        try:
            updates = [OperationUpdate.from_dict(raw) for raw in p.get("Updates") or ()]
        except (KeyError, ValueError, TypeError) as exc:
            raise self.error("InvalidParameterValueException", f"Updates: {exc}") from None
        try:
            if updates:
                log.append_updates(updates)
        except Conflict:  # another execution's outcome won: no token, the SDK stops and replays
            return {"NewExecutionState": {"Operations": []}}
        operations = [op.to_dict() for op in view(log.state, log.now_ms()).values()]
        return {"CheckpointToken": f"{execution.id}:{log.length}", "NewExecutionState": {"Operations": operations}}

    def op_GetDurableExecutionState(self, p: dict[str, Any]) -> dict[str, Any]:
        from unum_entry.durable_functions.service import view

        _, log = self._running_log(p["DurableExecutionArn"], p["CheckpointToken"])
        operations = [op.to_dict() for op in view(log.state, log.now_ms()).values()]
        page, marker = _page(operations, p, self.error)
        return {"Operations": page, "NextMarker": marker}


def _pattern(uri: str) -> str:
    """A route's path regex from the model's `requestUri` (`{Label}` a named group)."""
    out, last = [], 0
    for found in re.finditer(r"\{([A-Za-z0-9_]+)\+?\}", uri):
        out.append(re.escape(uri[last:found.start()]))
        label = found.group(1)
        out.append(f"(?P<{label}>.+)" if label in _GREEDY_LABELS else f"(?P<{label}>[^/]+)")
        last = found.end()
    out.append(re.escape(uri[last:]))
    return "".join(out)


def _page(items: list[Any], p: Mapping[str, Any],
          error: Callable[[str, str], ApiError]) -> tuple[list[Any], str | None]:
    """One page of `items` by `Marker` (an offset this server issued) and `MaxItems` (0 or
    absent: 100)."""
    size = int(p.get("MaxItems") or 100)
    start = 0
    if p.get("Marker"):
        try:
            start = int(p["Marker"])
        except ValueError:
            raise error("InvalidParameterValueException", f"Invalid Marker: {p['Marker']!r}") from None
    end = start + size
    return items[start:end], (str(end) if end < len(items) else None)


def _input_value(text: str) -> Any:
    """An Invoke payload as the handler's event (an empty payload: {}, as the SDK reads one)."""
    return json.loads(text) if text.strip() else {}


def _same_payload(a: str, b: str) -> bool:
    try:
        return bool(_input_value(a) == _input_value(b))
    except ValueError:
        return a == b


def _error_object(failure: Mapping[str, Any]) -> dict[str, Any]:
    """A unum failure record as Lambda's ErrorObject."""
    return {"ErrorType": failure.get("Error") or "Unknown", "ErrorMessage": failure.get("Cause") or ""}
