"""TestState: one state run on its own, with its data flow shown step by step, as Step Functions'
TestState API runs it (no execution, nothing stored).

`test_state(params, functions=DIR)` takes the request's members (checked against botocore's
model already): `definition` (one state, or a whole machine with `stateName`), `input`,
`variables`, `context`, `inspectionLevel` (INFO: output, error, next state; DEBUG and TRACE add
`inspectionData`: the input after each data-flow step, the result, the variables), `mock`
(`result` or `errorOutput` instead of calling the Task), `stateConfiguration.retrierRetryCount`
(how many retries the Task has had: a matching Retrier with attempts left makes the status
RETRIABLE). The state's data flow is unum_entry.asl.dataflow's, the one every compiled machine
runs; a Lambda Task calls the handler in `--functions DIR/<FunctionName>/` in this process.
Statuses: SUCCEEDED, FAILED, CAUGHT_ERROR (a Catch took the error: `nextState` is its Next),
RETRIABLE. Map and Parallel states are refused (`ValidationException`): run them in a machine.
"""

from __future__ import annotations

import json
import traceback
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from builder.serve.wire import ApiError, validation_error

LAMBDA_INVOKE = "arn:aws:states:::lambda:invoke"
RUNNABLE = ("Task", "Pass", "Choice", "Wait", "Succeed", "Fail")


class _Failed(Exception):
    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause}")
        self.error = error
        self.cause = cause


def _json(text: str | None, default: Any, code: str, what: str) -> Any:
    if text is None:
        return default
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ApiError(code, f"{what} is not JSON: {exc}") from None


def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _the_state(params: Mapping[str, Any]) -> tuple[str, dict[str, Any], str]:
    """(name, state, query language) of the state to run."""
    doc = _json(params["definition"], None, "InvalidDefinition", "the definition")
    if not isinstance(doc, dict):
        raise ApiError("InvalidDefinition", "Invalid State Machine Definition: a state or a state machine object")
    language = "JSONPath"
    if "States" in doc:
        name = params.get("stateName") or doc.get("StartAt")
        states = doc.get("States") or {}
        if not isinstance(states, dict) or name not in states:
            raise ApiError("InvalidDefinition", f"Invalid State Machine Definition: no state {name!r} in States")
        language = doc.get("QueryLanguage", language)
        state = states[name]
    else:
        name, state = params.get("stateName") or "TestState", doc
    if not isinstance(state, dict) or state.get("Type") not in RUNNABLE:
        kind = state.get("Type") if isinstance(state, dict) else None
        raise validation_error(f"TestState on unum runs {', '.join(RUNNABLE)} states, not {kind!r}: run a "
                               "Map or Parallel in a state machine")
    return str(name), state, str(state.get("QueryLanguage", language))


def test_state(params: Mapping[str, Any], *, functions: Path | None) -> dict[str, Any]:
    """TestState's answer (module docstring). Raises ApiError for a bad request."""
    from unum_entry.asl import dataflow
    from unum_entry.errors import StatesRuntimeError

    name, state, language = _the_state(params)
    raw = _json(params.get("input"), {}, "InvalidExecutionInput", "input")
    variables = _json(params.get("variables"), {}, "ValidationException", "variables")
    context = _json(params.get("context"), None, "ValidationException", "context") or {
        "Execution": {"Id": f"arn:aws:states:::execution:TestState:{uuid.uuid4()}", "Input": raw, "Name": "TestState"},
        "State": {"Name": name, "EnteredTime": ""}, "StateMachine": {"Id": "", "Name": "TestState"}}
    scope = dataflow.Scope(context=context, variables=variables, query_language=language)
    debug = params.get("inspectionLevel") in ("DEBUG", "TRACE")
    inspection: dict[str, Any] = {"input": _text(raw)}
    try:
        output, assigned, next_state = _run(name, state, raw, scope, params, functions, inspection)
    except (_Failed, StatesRuntimeError) as exc:
        return _failed(state, raw, scope, params, exc.error, exc.cause, inspection, debug)
    if assigned:
        inspection["variables"] = _text({**variables, **assigned})
    answer: dict[str, Any] = {"output": _text(output), "status": "SUCCEEDED", "nextState": next_state}
    if debug:
        answer["inspectionData"] = inspection
    return answer


def _run(name: str, state: dict[str, Any], raw: Any, scope: Any, params: Mapping[str, Any],
         functions: Path | None, inspection: dict[str, Any]) -> tuple[Any, dict[str, Any], str | None]:
    from unum_entry.asl import dataflow

    kind = state["Type"]
    if kind == "Fail":
        raise _Failed(str(state.get("Error", "States.Fail")), str(state.get("Cause", "")))
    if kind == "Choice":
        effective = dataflow.state_input(state, raw, scope)
        inspection["afterInputPath"] = _text(effective)
        for rule in state.get("Choices", []):
            if dataflow.evaluate_condition(rule, effective, scope):
                output, assigned = dataflow.state_output({**state, "Assign": rule.get("Assign")}, raw, None, scope)
                return output, assigned, rule.get("Next")
        if "Default" not in state:
            raise _Failed("States.NoChoiceMatched", f"No Matches! in state {name!r}")
        output, assigned = dataflow.state_output(state, raw, None, scope)
        return output, assigned, state["Default"]
    if kind != "Task":
        output, assigned = dataflow.state_output(state, raw, None, scope)
        return output, assigned, state.get("Next")
    task_input = dataflow.state_input(state, raw, scope)
    inspection["afterArguments" if scope.jsonata else "afterParameters"] = _text(task_input)
    result = _task_result(name, state, task_input, params.get("mock") or {}, functions, scope)
    inspection["result"] = _text(result)
    output, assigned = dataflow.state_output(state, raw, result, scope)
    if not scope.jsonata:
        if "ResultSelector" in state:
            inspection["afterResultSelector"] = _text(dataflow.resolve(state["ResultSelector"], result, scope,
                                                                       field="ResultSelector"))
        inspection["afterResultPath"] = _text(output)
    return output, assigned, state.get("Next")


def _task_result(name: str, state: Mapping[str, Any], task_input: Any, mock: Mapping[str, Any],
                 functions: Path | None, scope: Any) -> Any:
    """The Task's result: its mock's, or its Lambda handler's (a plain function ARN or name, or
    `lambda:invoke` with Lambda's response shape)."""
    from unum_entry.asl.runner import invoke_response

    if "errorOutput" in mock:
        error = mock["errorOutput"]
        raise _Failed(str(error.get("error") or "States.TaskFailed"), str(error.get("cause") or ""))
    if "result" in mock:
        return _json(mock["result"], None, "ValidationException", "mock.result")
    resource = str(state.get("Resource", ""))
    invoke_api = resource.startswith(LAMBDA_INVOKE)
    if invoke_api:
        function = str((task_input or {}).get("FunctionName", "")).rsplit(":function:", 1)[-1].split(":")[0]
        event = (task_input or {}).get("Payload", task_input)
    elif resource.startswith("arn:") and ":lambda:" not in resource:
        raise validation_error(f"state {name!r}: TestState on unum calls Lambda Tasks only; give a mock for {resource}")
    else:
        function, event = resource.rsplit(":function:", 1)[-1].split(":")[0], task_input
    payload = _call(function, event, functions)
    return invoke_response(payload) if invoke_api else payload


def _call(function: str, event: Any, functions: Path | None) -> Any:
    from unum_entry.asl.runner import LambdaContext, lambda_payload
    from unum_entry.errors import UnumError
    from unum_entry.handlers import load_handler

    from builder.compiler import _detect_handler

    code = (functions / function) if functions is not None else None
    if code is None or not code.is_dir():
        raise _Failed("Lambda.ResourceNotFoundException", f"Function not found: {function} (no folder "
                                                          f"{code if code else '--functions DIR/' + function})")
    try:  # a Lambda handler takes (event, Lambda's context), as the compiled runner calls it
        handler = cast(Callable[[Any, Any], Any],
                       load_handler(code, _detect_handler(code, "TestState", function), function=function))
    except UnumError as exc:
        raise _Failed("Lambda.Unknown", str(exc)) from None
    ctx = LambdaContext(function_name=function, invocation=str(uuid.uuid4()), workflow_id="TestState", attempt=0,
                        index=0, size=1, iteration=0)
    request = ctx.aws_request_id
    try:
        return lambda_payload(handler(event, ctx))
    except Exception as exc:  # user code: its error is the Task's, as Lambda reports it
        name = type(exc).__name__
        trace = [line.strip() for line in traceback.format_tb(exc.__traceback__)[1:]]
        raise _Failed(name, json.dumps({"errorMessage": str(exc), "errorType": name, "requestId": request,
                                        "stackTrace": trace})) from None


def _failed(state: Mapping[str, Any], raw: Any, scope: Any, params: Mapping[str, Any], error: str, cause: str,
            inspection: dict[str, Any], debug: bool) -> dict[str, Any]:
    """A failed state's answer: RETRIABLE while a Retrier has attempts left, CAUGHT_ERROR when
    a Catch takes it, else FAILED."""
    from unum_entry.asl import dataflow
    from unum_entry.asl.retry import matches

    answer: dict[str, Any] = {"error": error, "cause": cause, "status": "FAILED"}
    retried = int((params.get("stateConfiguration") or {}).get("retrierRetryCount") or 0)
    for retrier in state.get("Retry", []) if state.get("Type") == "Task" else []:
        if matches(retrier.get("ErrorEquals", ()), error):
            if retried < retrier.get("MaxAttempts", 3):
                answer["status"] = "RETRIABLE"
            break
    if answer["status"] == "FAILED":
        for catcher in state.get("Catch", []) if state.get("Type") == "Task" else []:
            if matches(catcher.get("ErrorEquals", ()), error):
                output, _ = dataflow.error_output(catcher, raw, {"Error": error, "Cause": cause}, scope)
                answer.update(status="CAUGHT_ERROR", output=_text(output), nextState=catcher.get("Next"))
                break
    if debug:
        inspection["errorDetails"] = {"catchIndex": None, "retryIndex": None}
        answer["inspectionData"] = {k: v for k, v in inspection.items() if k != "errorDetails"}
    return answer
