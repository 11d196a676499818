"""The per-state data-flow pipeline of Step Functions, in both query languages.

JSONPath states:  raw input → InputPath → Parameters (the task's input) … result →
ResultSelector → ResultPath (into the *raw* input) → OutputPath → output; Assign sees `$` as
the result (Task / Map / Parallel, after ResultSelector), the effective input (Choice, Wait) or
the Pass state's result.
JSONata states:   `$states.input` (raw input) → Arguments (the task's input) … `$states.result`
→ Output (default: the result for Task / Map / Parallel, the input otherwise); Assign and
Output are evaluated side by side.

In both, every expression in one state (Assign included) sees the variables as they were on
entry to the state; new values are visible from the next state on. Every function here is
pure: same arguments, same answer (UUIDs and random numbers come from the Scope). Failures
raise StatesRuntimeError with Step Functions' error names: `States.Runtime` (a path selects
nothing), `States.ResultPathMatchFailure`, `States.IntrinsicFailure`,
`States.QueryEvaluationError`.
"""

from __future__ import annotations

import random as _random
import re
import uuid as _uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field as _field
from typing import Any

from unum_entry import conditions
from unum_entry.asl import intrinsics, jsonata_mode, paths, templates
from unum_entry.errors import ConditionError, ConditionEvaluationError, StatesRuntimeError

JSONPATH = "JSONPath"
JSONATA = "JSONata"
QUERY_LANGUAGES = (JSONPATH, JSONATA)

_RESULT_STATES = frozenset({"Task", "Parallel", "Map"})
_PARAMETER_STATES = frozenset({"Task", "Parallel", "Pass"})  # Map's Parameters apply per item
_TEMPLATE_FIELDS = frozenset({"Parameters", "ItemSelector", "ResultSelector", "BatchInput", "Assign"})
_RESERVED_VARIABLE = "states"


def _uuid4() -> str:
    return str(_uuid.uuid4())


@dataclass(frozen=True)
class Scope:
    """What a state's expressions can see besides their input.

    `context` is the context object (`$$` / `$states.context`: Execution, State, StateMachine,
    Task, Map.Item …); `variables` the workflow variables visible to the state.
    """

    context: Mapping[str, Any]
    variables: Mapping[str, Any] = _field(default_factory=dict)
    query_language: str = JSONPATH
    uuid: Callable[[], str] = _uuid4
    random: Callable[[], float] = _random.random

    @property
    def jsonata(self) -> bool:
        return self.query_language == JSONATA


# ---------------------------------------------------------------------------------------------
# The pipeline.
# ---------------------------------------------------------------------------------------------


def state_input(state: Mapping, raw_input: Any, scope: Scope) -> Any:
    """What the state works on.

    JSONPath: InputPath (null → `{}`) then, for Task / Parallel / Pass, Parameters. For Map this
    is the input after InputPath only: its ItemSelector / Parameters apply to each item (use
    `resolve(..., field="ItemSelector")` with the item in `scope.context["Map"]`).
    JSONata: Arguments for Task / Parallel (default: the raw input); the raw input otherwise
    (a Pass state's data comes from its Output, see state_output). Raises StatesRuntimeError.
    """
    if scope.jsonata:
        if state.get("Type") in ("Task", "Parallel") and "Arguments" in state:
            return _evaluator(scope, input=raw_input).value(state["Arguments"], field="Arguments")
        return raw_input
    effective = _apply_path(state, "InputPath", raw_input, scope)
    if state.get("Type") in _PARAMETER_STATES and "Parameters" in state:
        return _template(state["Parameters"], effective, scope, "Parameters")
    return effective


def state_output(state: Mapping, raw_input: Any, result: Any, scope: Scope) -> tuple[Any, dict[str, Any]]:
    """The state's output and the variables after its Assign.

    `result` is the Task's (or Map's / Parallel's) raw result; it is ignored for the other
    types. JSONPath: Pass takes `Result` as its result (default: its effective input after
    Parameters); then ResultSelector → ResultPath (into `raw_input`; null keeps the input) →
    OutputPath (null → `{}`). Choice, Wait and Succeed output their effective input through
    OutputPath. JSONata: Output with `$states.input` / `$states.result`. Raises
    StatesRuntimeError.
    """
    kind = state.get("Type")
    if scope.jsonata:
        bindings: dict[str, Any] = {"input": raw_input}
        if kind in _RESULT_STATES:
            bindings["result"] = result
        evaluator = _evaluator(scope, **bindings)
        if "Output" in state:
            output = evaluator.value(state["Output"], field="Output")
        else:
            output = result if kind in _RESULT_STATES else raw_input
        return output, _assign_jsonata(state.get("Assign"), evaluator, scope, "Assign")
    if kind not in _RESULT_STATES and kind != "Pass":
        effective = _apply_path(state, "InputPath", raw_input, scope)
        variables = _assign_jsonpath(state.get("Assign"), effective, scope, "Assign")
        return _apply_path(state, "OutputPath", effective, scope), variables
    if kind == "Pass":
        result = state["Result"] if "Result" in state else state_input(state, raw_input, scope)
    elif "ResultSelector" in state:
        result = _template(state["ResultSelector"], result, scope, "ResultSelector")
    variables = _assign_jsonpath(state.get("Assign"), result, scope, "Assign")
    combined = paths.write(raw_input, state.get("ResultPath", "$"), result)
    return _apply_path(state, "OutputPath", combined, scope), variables


def error_output(catcher: Mapping, raw_input: Any, error: Mapping[str, str], scope: Scope) -> tuple[Any, dict[str, Any]]:
    """A Catch's output and the variables after the catcher's Assign.

    `error` is the Error Output `{"Error": …, "Cause": …}`. JSONPath: placed into `raw_input` by
    the catcher's ResultPath (default `$`: the error output replaces the input; null keeps the
    input); Assign sees it as `$`. JSONata: the catcher's Output (default: the error output) with
    `$states.errorOutput`. Raises StatesRuntimeError.
    """
    error_object = dict(error)
    if scope.jsonata:
        evaluator = _evaluator(scope, input=raw_input, errorOutput=error_object)
        output = evaluator.value(catcher["Output"], field="Catch.Output") if "Output" in catcher else error_object
        return output, _assign_jsonata(catcher.get("Assign"), evaluator, scope, "Catch.Assign")
    variables = _assign_jsonpath(catcher.get("Assign"), error_object, scope, "Catch.Assign")
    return paths.write(raw_input, catcher.get("ResultPath", "$"), error_object), variables


def evaluate_condition(rule: Mapping, value: Any, scope: Scope, *, field: str = "Condition") -> bool:
    """Whether a Choice rule matches.

    JSONPath: `value` is the Choice state's effective input (after InputPath); the rule may read
    `$…`, `$$…` and variables `$name…`. JSONata: `value` is the state's raw input
    (`$states.input`) and the rule's `Condition` must evaluate to a boolean. Raises
    StatesRuntimeError (States.Runtime when a compared path is missing).
    """
    if scope.jsonata:
        condition = rule.get("Condition")
        if isinstance(condition, bool):
            return condition
        outcome = _evaluator(scope, input=value).value(condition, field=field)
        if not isinstance(outcome, bool):
            raise StatesRuntimeError(jsonata_mode.QUERY_EVALUATION_ERROR,
                                     jsonata_mode.unexpected_type_cause(str(condition), field, "boolean", outcome))
        return outcome
    try:
        return conditions.evaluate(_rule_body(rule), value, scope.context, scope.variables)
    except ConditionEvaluationError as error:
        raise StatesRuntimeError(paths.RUNTIME, str(error)) from None


def resolve(value_or_template: Any, data: Any, scope: Scope, *, field: str) -> Any:
    """Evaluate a field that may hold a path, a payload template or JSONata.

    `field` is the field's name (its last dotted part decides). JSONata: every `{% … %}` string
    in the value is evaluated with `$states.input` = `data`. JSONPath: a `…Path` field holds a
    path (`ErrorPath` / `CausePath` may hold an intrinsic) selected from `data`; Parameters,
    ItemSelector, ResultSelector, BatchInput and Assign are payload templates over `data`; any
    other field is a literal. Raises StatesRuntimeError.
    """
    if scope.jsonata:
        return _evaluator(scope, input=data).value(value_or_template, field=field)
    name = field.rsplit(".", 1)[-1]
    if name.endswith("Path"):
        if not isinstance(value_or_template, str):
            raise StatesRuntimeError(paths.RUNTIME, f"The field '{field}' must be a path string")
        if intrinsics.looks_like_intrinsic(value_or_template):
            return _intrinsic(value_or_template, data, scope, field)
        return paths.select(value_or_template, data, scope.context, scope.variables, field=field)
    if name in _TEMPLATE_FIELDS:
        return _template(value_or_template, data, scope, field)
    return value_or_template


# ---------------------------------------------------------------------------------------------
# Pieces of the pipeline.
# ---------------------------------------------------------------------------------------------


def _evaluator(scope: Scope, **states: Any) -> jsonata_mode.Evaluator:
    """A JSONata evaluator with `$states` = `states` plus the context object."""
    return jsonata_mode.Evaluator({**states, "context": scope.context}, scope.variables,
                                  uuid=scope.uuid, random=scope.random)


def _template(template: Any, data: Any, scope: Scope, field: str) -> Any:
    return templates.evaluate(template, data, context=scope.context, variables=scope.variables,
                              uuid=scope.uuid, random=scope.random, field=field)


def _intrinsic(text: str, data: Any, scope: Scope, field: str) -> Any:
    return templates.evaluate_expression(text, data, context=scope.context, variables=scope.variables,
                                         uuid=scope.uuid, random=scope.random, field=field)


def _apply_path(state: Mapping, field: str, data: Any, scope: Scope) -> Any:
    """The state's `field` (InputPath or OutputPath) applied to `data`: absent → all of it,
    null → `{}`."""
    if field not in state:
        return data
    path = state[field]
    if path is None:
        return {}
    return paths.select(path, data, scope.context, scope.variables, field=field)


def _assign_jsonpath(assign: Any, data: Any, scope: Scope, field: str) -> dict[str, Any]:
    """Variables after a JSONPath Assign (a payload template whose `$` is `data`)."""
    variables = dict(scope.variables)
    if assign:
        variables.update(_template(assign, data, scope, field))
    return variables


def _assign_jsonata(assign: Any, evaluator: jsonata_mode.Evaluator, scope: Scope, field: str) -> dict[str, Any]:
    """Variables after a JSONata Assign (every value may be or hold an expression)."""
    variables = dict(scope.variables)
    if assign:
        assigned = evaluator.value(assign, field=field)
        if not isinstance(assigned, Mapping):
            raise StatesRuntimeError(jsonata_mode.QUERY_EVALUATION_ERROR,
                                     f"The field '{field}' must evaluate to an object, got {paths.short_json(assigned)}")
        variables.update(assigned)
    return variables


_RULE_EXTRAS = frozenset({"Next", "Assign", "Output", "Comment"})


def _rule_body(rule: Mapping) -> dict[str, Any]:
    """A top-level Choice rule without its Next / Assign / Output, and without the Comment AWS
    allows in every rule, nested ones included: what conditions.py checks and evaluates."""
    return {key: _without_comments(value) for key, value in rule.items() if key not in _RULE_EXTRAS}


def _without_comments(rule: Any) -> Any:
    """`rule` (a nested rule, a list of them, or an operand) without Comment keys in its rules."""
    if isinstance(rule, list):
        return [_without_comments(item) for item in rule]
    if not isinstance(rule, Mapping):
        return rule
    return {key: _without_comments(value) if key in ("And", "Or", "Not") else value
            for key, value in rule.items() if key != "Comment"}


# ---------------------------------------------------------------------------------------------
# Static checks.
# ---------------------------------------------------------------------------------------------

_PATH_FIELDS = ("InputPath", "OutputPath")
_REFERENCE_PATH_FIELDS = (
    "ItemsPath", "SecondsPath", "TimestampPath", "TimeoutSecondsPath", "HeartbeatSecondsPath",
    "MaxConcurrencyPath", "ToleratedFailurePercentagePath", "ToleratedFailureCountPath",
)
_PATH_OR_INTRINSIC_FIELDS = ("ErrorPath", "CausePath")
_JSONPATH_TEMPLATES = ("Parameters", "ItemSelector", "ResultSelector")
_JSONATA_FIELDS = (
    "Arguments", "Output", "Items", "ItemSelector", "Seconds", "Timestamp", "TimeoutSeconds",
    "HeartbeatSeconds", "MaxConcurrency", "ToleratedFailurePercentage", "ToleratedFailureCount",
    "Error", "Cause", "Credentials",
)
_BATCHER_PATHS = ("MaxItemsPerBatchPath", "MaxInputBytesPerBatchPath")
_BATCHER_JSONATA = ("MaxItemsPerBatch", "MaxInputBytesPerBatch", "BatchInput")


def check_state_fields(state: Mapping, query_language: str) -> list[tuple[str, str]]:
    """Static problems in one state's paths, templates, intrinsics, JSONata and Assign.

    Returns (field, problem) pairs; the field is a path into the state such as
    `Parameters.items.$`, `Choices[1].And[0].Variable` or `Catch[0].ResultPath`. Checks
    expressions only: which fields a state type allows, and mixing of query languages, are the
    validator's job.
    """
    if query_language == JSONATA:
        return _check_jsonata(state)
    return _check_jsonpath(state)


def _check_jsonpath(state: Mapping) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for name in _PATH_FIELDS:
        if name in state and state[name] is not None:
            _add(found, name, paths.path_problem(state[name]))
    if "ResultPath" in state:
        found.extend(_result_path_problems(state["ResultPath"], "ResultPath"))
    for name in _REFERENCE_PATH_FIELDS:
        if name in state:
            _add(found, name, paths.reference_path_problem(state[name]))
    for name in _PATH_OR_INTRINSIC_FIELDS:
        if name in state:
            value = state[name]
            if intrinsics.looks_like_intrinsic(value):
                _add(found, name, templates.expression_problem(value))
            else:
                _add(found, name, paths.reference_path_problem(value))
    for name in _JSONPATH_TEMPLATES:
        if name in state:
            found.extend(templates.problems(state[name], name))
    batcher = state.get("ItemBatcher")
    if isinstance(batcher, Mapping):
        for name in _BATCHER_PATHS:
            if name in batcher:
                _add(found, f"ItemBatcher.{name}", paths.reference_path_problem(batcher[name]))
        if "BatchInput" in batcher:
            found.extend(templates.problems(batcher["BatchInput"], "ItemBatcher.BatchInput"))
    found.extend(_assign_problems(state.get("Assign"), "Assign", jsonpath=True))
    for index, rule in _items(state.get("Choices")):
        here = f"Choices[{index}]"
        if isinstance(rule, Mapping):
            found.extend(_rule_problems(rule, here))
            found.extend(_assign_problems(rule.get("Assign"), f"{here}.Assign", jsonpath=True))
    for index, catcher in _items(state.get("Catch")):
        here = f"Catch[{index}]"
        if isinstance(catcher, Mapping):
            if "ResultPath" in catcher:
                found.extend(_result_path_problems(catcher["ResultPath"], f"{here}.ResultPath"))
            found.extend(_assign_problems(catcher.get("Assign"), f"{here}.Assign", jsonpath=True))
    return found


def _result_path_problems(value: Any, field: str) -> list[tuple[str, str]]:
    if value is None:
        return []
    problem = paths.reference_path_problem(value, allow_context=False, allow_variables=False)
    return [] if problem is None else [(field, problem)]


def _rule_problems(rule: Mapping, field: str) -> list[tuple[str, str]]:
    """Problems of a JSONPath Choice rule, variables allowed in its paths."""
    try:
        conditions.validate_condition(_rule_body(rule), source="", field=field, variables=True)
    except ConditionError as error:
        return [(error.field, error.problem)]
    return []


def _check_jsonata(state: Mapping) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    has_result = state.get("Type") in _RESULT_STATES
    for name in _JSONATA_FIELDS:
        if name in state:
            found.extend(_jsonata_problems(state[name], name, result=has_result and name == "Output"))
    batcher = state.get("ItemBatcher")
    if isinstance(batcher, Mapping):
        for name in _BATCHER_JSONATA:
            if name in batcher:
                found.extend(_jsonata_problems(batcher[name], f"ItemBatcher.{name}"))
    if "Assign" in state:
        found.extend(_jsonata_problems(state["Assign"], "Assign", result=has_result))
        found.extend(_assign_problems(state["Assign"], "Assign", jsonpath=False))
    for index, rule in _items(state.get("Choices")):
        here = f"Choices[{index}]"
        if not isinstance(rule, Mapping):
            continue
        condition = rule.get("Condition")
        if "Condition" not in rule:
            found.append((f"{here}.Condition", "is required in a JSONata Choice rule"))
        elif not isinstance(condition, bool) and not jsonata_mode.is_expression(condition):
            found.append((f"{here}.Condition", "must be a JSONata expression '{% … %}' or a boolean"))
        else:
            found.extend(_jsonata_problems(condition, f"{here}.Condition"))
        for name in ("Output", "Assign"):
            if name in rule:
                found.extend(_jsonata_problems(rule[name], f"{here}.{name}"))
        found.extend(_assign_problems(rule.get("Assign"), f"{here}.Assign", jsonpath=False))
    for index, catcher in _items(state.get("Catch")):
        here = f"Catch[{index}]"
        if isinstance(catcher, Mapping):
            for name in ("Output", "Assign"):
                if name in catcher:
                    found.extend(_jsonata_problems(catcher[name], f"{here}.{name}", error_output=True))
            found.extend(_assign_problems(catcher.get("Assign"), f"{here}.Assign", jsonpath=False))
    return found


_STATES_RESULT = re.compile(r"\$states\.result\b")
_STATES_ERROR = re.compile(r"\$states\.errorOutput\b")


def _jsonata_problems(value: Any, field: str, *, result: bool = False, error_output: bool = False) -> list[tuple[str, str]]:
    """Problems of every JSONata string in `value` (objects and arrays walked)."""
    found: list[tuple[str, str]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            found.extend(_jsonata_problems(item, f"{field}.{key}", result=result, error_output=error_output))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_jsonata_problems(item, f"{field}[{index}]", result=result, error_output=error_output))
    elif isinstance(value, str) and value.startswith(jsonata_mode.OPEN) and jsonata_mode.CLOSE not in value[2:]:
        # AWS rejects a string that opens an expression and never closes it ("{% 10 %"); one that
        # closes it and goes on ("{% 1 %} x") is a literal
        found.append((field, f"malformed JSONata expression {value!r}: it starts with "
                             f"'{jsonata_mode.OPEN}' and has no closing '{jsonata_mode.CLOSE}'"))
    elif jsonata_mode.is_expression(value):
        _add(found, field, jsonata_mode.expression_problem(value))
        if not result and not error_output and _STATES_RESULT.search(value):
            found.append((field, "$states.result is only available in Output and Assign of Task, Map and Parallel states"))
        if not error_output and _STATES_ERROR.search(value):
            found.append((field, "$states.errorOutput is only available in a Catch's Output and Assign"))
    return found


def _assign_problems(assign: Any, field: str, *, jsonpath: bool) -> list[tuple[str, str]]:
    """Assign must be an object (JSONata: or one expression) of valid variable names."""
    if assign is None:
        return []
    if not jsonpath and jsonata_mode.is_expression(assign):
        return []
    if not isinstance(assign, Mapping):
        return [(field, "must be an object mapping variable names to values")]
    found: list[tuple[str, str]] = []
    for key, value in assign.items():
        name = key[: -len(templates.SUFFIX)] if jsonpath and key.endswith(templates.SUFFIX) else key
        here = f"{field}.{key}"
        if not paths.VARIABLE_NAME.fullmatch(name):
            found.append((here, f"{name!r} is not a valid variable name (a Unicode identifier; "
                                "parts of a variable such as 'x.y' or 'x[0]' cannot be assigned)"))
        elif len(name) > paths.MAX_VARIABLE_NAME:
            found.append((here, f"variable names are at most {paths.MAX_VARIABLE_NAME} characters"))
        elif name == _RESERVED_VARIABLE:
            found.append((here, "'states' is reserved by Step Functions and cannot be assigned"))
        if jsonpath:
            if key.endswith(templates.SUFFIX):
                _add(found, here, templates.expression_problem(value))
            else:
                found.extend(templates.problems(value, here))
    return found


def _items(value: Any) -> list[tuple[int, Any]]:
    return list(enumerate(value)) if isinstance(value, list) else []


def _add(found: list[tuple[str, str]], field: str, problem: str | None) -> None:
    if problem is not None:
        found.append((field, problem))
