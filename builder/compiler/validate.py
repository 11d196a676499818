"""Static validation of a state machine, as the States Language specifies.

Every problem is an AslDefinitionError naming the state (with its path through Parallel/Map
nesting, e.g. `Process/Branches[1]/Resize`) and the field. The first problem found is raised.
Validation also returns the `Machine`: every scope (the top level and each branch/iterator) with
its states, which the compiler plans from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from unum_entry.errors import AslDefinitionError

JSONPATH, JSONATA = "JSONPath", "JSONata"
COMMON = {"Type", "Comment", "QueryLanguage", "Assign"}
FIELDS: dict[str, set[str]] = {
    "Task": {"Resource", "Next", "End", "InputPath", "OutputPath", "Parameters", "ResultPath", "ResultSelector",
             "Retry", "Catch", "TimeoutSeconds", "TimeoutSecondsPath", "HeartbeatSeconds", "HeartbeatSecondsPath",
             "Credentials", "Arguments", "Output", "__unum_detached__"},  # fire-and-forget startExecution (nested.py)
    "Pass": {"Next", "End", "InputPath", "OutputPath", "Parameters", "ResultPath", "Result", "Output"},
    "Choice": {"Choices", "Default", "InputPath", "OutputPath", "Output"},
    "Wait": {"Next", "End", "InputPath", "OutputPath", "Seconds", "SecondsPath", "Timestamp", "TimestampPath", "Output"},
    "Succeed": {"InputPath", "OutputPath", "Output"},
    "Fail": {"Error", "ErrorPath", "Cause", "CausePath"},
    "Parallel": {"Next", "End", "InputPath", "OutputPath", "Parameters", "ResultPath", "ResultSelector", "Retry",
                 "Catch", "Branches", "Arguments", "Output", "__unum_nested__"},  # a nested machine (nested.py)
    "Map": {"Next", "End", "InputPath", "OutputPath", "ItemsPath", "Items", "ItemSelector", "Parameters", "ResultPath",
            "ResultSelector", "Retry", "Catch", "Iterator", "ItemProcessor", "MaxConcurrency", "MaxConcurrencyPath",
            "ItemReader", "ItemBatcher", "ResultWriter", "ToleratedFailureCount", "ToleratedFailureCountPath",
            "ToleratedFailurePercentage", "ToleratedFailurePercentagePath", "Label", "Arguments", "Output"},
}
JSONPATH_ONLY = {"InputPath", "OutputPath", "Parameters", "ResultPath", "ResultSelector", "Result", "ItemsPath",
                 "TimeoutSecondsPath", "HeartbeatSecondsPath", "SecondsPath", "TimestampPath", "ErrorPath", "CausePath",
                 "MaxConcurrencyPath", "ToleratedFailureCountPath", "ToleratedFailurePercentagePath", "Iterator"}
JSONATA_ONLY = {"Arguments", "Output", "Items"}
TERMINAL = {"Succeed", "Fail"}
# Field groups of which AWS accepts at most one (a value and its …Path form, alternatives).
EXCLUSIVE = (
    ("Seconds", "SecondsPath", "Timestamp", "TimestampPath"), ("Error", "ErrorPath"), ("Cause", "CausePath"),
    ("TimeoutSeconds", "TimeoutSecondsPath"), ("HeartbeatSeconds", "HeartbeatSecondsPath"), ("ItemsPath", "Items"),
    ("ItemSelector", "Parameters"), ("Iterator", "ItemProcessor"), ("MaxConcurrency", "MaxConcurrencyPath"),
    ("ToleratedFailureCount", "ToleratedFailureCountPath"),
    ("ToleratedFailurePercentage", "ToleratedFailurePercentagePath"),
)
BATCHER_EXCLUSIVE = (("MaxItemsPerBatch", "MaxItemsPerBatchPath"), ("MaxInputBytesPerBatch", "MaxInputBytesPerBatchPath"))
READER_EXCLUSIVE = (("MaxItems", "MaxItemsPath"),)
UNSUPPORTED = {
    "Credentials": "cross-account role assumption has no meaning for functions unum invokes itself",
}


@dataclass
class Scope:
    """The top level or one Parallel branch / Map iterator: its states and where it starts."""

    path: str                         # "" at the top, "P/Branches[0]/" inside a branch
    states: dict[str, dict[str, Any]]
    start: str
    owner: str | None                 # the Parallel/Map state this scope belongs to
    query_language: str


@dataclass
class Machine:
    source: str
    doc: dict[str, Any]
    query_language: str
    scopes: list[Scope] = field(default_factory=list)
    scope_of: dict[str, Scope] = field(default_factory=dict)   # state name -> its scope

    def state(self, name: str) -> dict[str, Any]:
        return self.scope_of[name].states[name]


def validate(doc: dict[str, Any], source: str) -> Machine:
    """Check the whole definition; return the Machine. Raises AslDefinitionError."""
    ql = doc.get("QueryLanguage", JSONPATH)
    if ql not in (JSONPATH, JSONATA):
        raise AslDefinitionError(source, None, "QueryLanguage", f"expected JSONPath or JSONata, found {ql!r}")
    machine = Machine(source=source, doc=doc, query_language=ql)
    _Checker(machine).scope(doc, "", None, ql, where="")
    return machine


class _Checker:
    def __init__(self, machine: Machine) -> None:
        self.m = machine
        self.source = machine.source

    def error(self, state: str | None, field_name: str, problem: str) -> AslDefinitionError:
        return AslDefinitionError(self.source, state, field_name, problem)

    def scope(self, doc: Any, path: str, owner: str | None, ql: str, *, where: str) -> Scope:
        """Check one States/StartAt block; `where` names it for errors (the owner's field)."""
        ctx = owner and f"{path.rstrip('/')}"
        field_prefix = where + "." if where else ""
        if not isinstance(doc, Mapping):
            raise self.error(ctx, where or "<root>", f"expected an object with StartAt and States, found {_type(doc)}")
        states = doc.get("States")
        if not isinstance(states, Mapping) or not states:
            raise self.error(ctx, f"{field_prefix}States", f"expected a non-empty object of states, found {_type(states)}")
        start = doc.get("StartAt")
        if not isinstance(start, str):
            raise self.error(ctx, f"{field_prefix}StartAt", f"required, a state name; found {_type(start)}")
        if start not in states:
            raise self.error(ctx, f"{field_prefix}StartAt", f"unknown state {start!r} (states: {', '.join(states)})")
        scope = Scope(path=path, states=dict(states), start=start, owner=owner, query_language=ql)
        self.m.scopes.append(scope)
        for name, state in states.items():
            full = f"{path}{name}"
            if name in self.m.scope_of:
                other = self.m.scope_of[name].path + name
                raise self.error(full, "<name>", f"state names must be unique in the whole state machine; also used at {other!r}")
            if not name or len(name) > 80:
                raise self.error(full, "<name>", "a state name must be 1 to 80 characters")
            self.m.scope_of[name] = scope
            self.state(name, state, scope)
        self.reachable(scope)
        return scope

    def state(self, name: str, state: Any, scope: Scope) -> None:
        full = f"{scope.path}{name}"
        if not isinstance(state, Mapping):
            raise self.error(full, "<state>", f"expected an object, found {_type(state)}")
        unresolved = _unresolved(state, "")
        if unresolved is not None:
            field_name, placeholder = unresolved
            raise self.error(full, field_name, f"unresolved substitution {placeholder}: pass its value with "
                             f"--substitution {placeholder[2:-1]}=VALUE (SAM's DefinitionSubstitutions)")
        kind = state.get("Type")
        if kind not in FIELDS:
            raise self.error(full, "Type", f"expected one of {', '.join(FIELDS)}, found {kind!r}")
        ql = state.get("QueryLanguage", scope.query_language)
        if ql not in (JSONPATH, JSONATA):
            raise self.error(full, "QueryLanguage", f"expected JSONPath or JSONata, found {ql!r}")
        if scope.query_language == JSONATA and ql == JSONPATH:
            raise self.error(full, "QueryLanguage", "a state cannot use JSONPath when the state machine uses JSONata")
        allowed = FIELDS[kind] | COMMON
        for key in state:
            if key not in allowed:
                raise self.error(full, key, f"not a field of a {kind} state (allowed: {', '.join(sorted(allowed))})")
            if key in UNSUPPORTED:
                raise self.error(full, key, f"not supported: {UNSUPPORTED[key]}")
            if ql == JSONATA and key in JSONPATH_ONLY:
                raise self.error(full, key, "is a JSONPath field; this state uses JSONata (use Arguments / Output / Items)")
            if ql == JSONPATH and key in JSONATA_ONLY:
                raise self.error(full, key, "is a JSONata field; set \"QueryLanguage\": \"JSONata\" to use it")
        self.transitions(full, kind, state, scope)
        self.types(full, kind, state, ql)
        check = getattr(self, f"kind_{kind.lower()}", None)  # Pass, Succeed, Fail: the shared checks only
        if check is not None:
            check(name, full, state, scope, ql)
        self.expressions(full, state, ql)

    # ---- shared checks --------------------------------------------------------------------

    def transitions(self, full: str, kind: str, state: Mapping[str, Any], scope: Scope) -> None:
        has_next, has_end = "Next" in state, "End" in state
        if kind in TERMINAL or kind == "Choice":
            for key in ("Next", "End"):
                if key in state:
                    raise self.error(full, key, f"a {kind} state cannot have {key}")
            return
        if has_end and state["End"] is not True:
            raise self.error(full, "End", f"expected true, found {state['End']!r}")
        if has_next and has_end:
            raise self.error(full, "Next", "a state has either Next or End, not both")
        if not has_next and not has_end:
            raise self.error(full, "Next", f"a {kind} state needs Next or \"End\": true")
        if has_next:
            self.target(full, "Next", state["Next"], scope)

    def target(self, full: str, field_name: str, target: Any, scope: Scope) -> None:
        if not isinstance(target, str):
            raise self.error(full, field_name, f"expected a state name, found {_type(target)}")
        if target not in scope.states:
            where = "" if not scope.owner else f" of {scope.path.rstrip('/')} (a branch can only move within itself)"
            raise self.error(full, field_name, f"unknown state {target!r}{where}")

    def types(self, full: str, kind: str, state: Mapping[str, Any], ql: str) -> None:
        for key in ("InputPath", "OutputPath", "ResultPath"):
            if key in state and state[key] is not None and not _is_path(state[key]):
                raise self.error(full, key, f"expected a path starting with '$' or null, found {state[key]!r}")
        for key in ("ItemsPath", "SecondsPath", "TimestampPath", "ErrorPath", "CausePath", "TimeoutSecondsPath",
                    "HeartbeatSecondsPath", "MaxConcurrencyPath", "ToleratedFailureCountPath", "ToleratedFailurePercentagePath"):
            intrinsic_ok = key in ("ErrorPath", "CausePath") and isinstance(state.get(key), str) and state[key].startswith("States.")
            if key in state and not _is_path(state[key]) and not intrinsic_ok:
                raise self.error(full, key, f"expected a path starting with '$', found {state[key]!r}")
        for key in ("Parameters", "ResultSelector"):
            if key in state and not isinstance(state[key], Mapping):
                raise self.error(full, key, f"expected an object, found {_type(state[key])}")
        if "Assign" in state and not isinstance(state["Assign"], Mapping):
            raise self.error(full, "Assign", f"expected an object of variable names, found {_type(state['Assign'])}")
        for key, low in (("TimeoutSeconds", 1), ("HeartbeatSeconds", 1), ("Seconds", 0), ("MaxConcurrency", 0),
                         ("ToleratedFailureCount", 0)):
            if key in state and not (ql == JSONATA and _is_jsonata(state[key])) and not _is_int(state[key], low):
                raise self.error(full, key, f"expected an integer >= {low}, found {state[key]!r}")
        if "ToleratedFailurePercentage" in state and not (ql == JSONATA and _is_jsonata(state["ToleratedFailurePercentage"])):
            value = state["ToleratedFailurePercentage"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
                raise self.error(full, "ToleratedFailurePercentage", f"expected a number from 0 to 100, found {value!r}")
        for key in ("Timestamp", "Error", "Cause", "Comment"):
            if key in state and not isinstance(state[key], str):
                raise self.error(full, key, f"expected a string, found {_type(state[key])}")
        if "Timestamp" in state and not _is_jsonata(state["Timestamp"]):
            from unum_entry.asl.runner import _parse_timestamp
            if _parse_timestamp(state["Timestamp"]) is None:
                raise self.error(full, "Timestamp", f"expected an ISO-8601 timestamp such as 2016-03-14T01:59:00Z, found {state['Timestamp']!r}")
        if "HeartbeatSeconds" in state and "TimeoutSeconds" in state and _is_int(state["HeartbeatSeconds"], 1) \
                and _is_int(state["TimeoutSeconds"], 1) and state["HeartbeatSeconds"] >= state["TimeoutSeconds"]:
            raise self.error(full, "HeartbeatSeconds", "must be smaller than TimeoutSeconds")
        for group in EXCLUSIVE:
            present = [key for key in group if key in state]
            if len(present) > 1:
                raise self.error(full, present[1], f"only one of {', '.join(present)} may be given")
        for name, groups in (("ItemBatcher", BATCHER_EXCLUSIVE), ("ItemReader", READER_EXCLUSIVE)):
            block = state.get(name)
            if name == "ItemReader" and isinstance(block, Mapping):
                block = block.get("ReaderConfig")
                name = "ItemReader.ReaderConfig"
            if isinstance(block, Mapping):
                for group in groups:
                    present = [key for key in group if key in block]
                    if len(present) > 1:
                        raise self.error(full, f"{name}.{present[1]}", f"only one of {', '.join(present)} may be given")

    def retry_catch(self, full: str, state: Mapping[str, Any], scope: Scope, ql: str) -> None:
        for key in ("Retry", "Catch"):
            entries = state.get(key, [])
            if not isinstance(entries, list):
                raise self.error(full, key, f"expected a list, found {_type(entries)}")
            for i, entry in enumerate(entries):
                where = f"{key}[{i}]"
                if not isinstance(entry, Mapping):
                    raise self.error(full, where, f"expected an object, found {_type(entry)}")
                errors = entry.get("ErrorEquals")
                if not isinstance(errors, list) or not errors or not all(isinstance(e, str) and e for e in errors):
                    raise self.error(full, f"{where}.ErrorEquals", "expected a non-empty list of error names")
                if "States.ALL" in errors and (len(errors) > 1 or i != len(entries) - 1):
                    raise self.error(full, f"{where}.ErrorEquals", "States.ALL must appear alone, in the last " + ("retrier" if key == "Retry" else "catcher"))
                if key == "Retry":
                    self.retrier(full, where, entry)
                else:
                    self.catcher(full, where, entry, scope, ql)

    def retrier(self, full: str, where: str, entry: Mapping[str, Any]) -> None:
        allowed = {"ErrorEquals", "IntervalSeconds", "MaxAttempts", "BackoffRate", "MaxDelaySeconds", "JitterStrategy", "Comment"}
        for key in entry:
            if key not in allowed:
                raise self.error(full, f"{where}.{key}", f"not a Retry field (allowed: {', '.join(sorted(allowed))})")
        for key, low in (("IntervalSeconds", 1), ("MaxAttempts", 0), ("MaxDelaySeconds", 1)):
            if key in entry and not _is_int(entry[key], low):
                raise self.error(full, f"{where}.{key}", f"expected an integer >= {low}, found {entry[key]!r}")
        rate = entry.get("BackoffRate", 2.0)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate < 1:
            raise self.error(full, f"{where}.BackoffRate", f"expected a number >= 1.0, found {rate!r}")
        if entry.get("JitterStrategy", "NONE") not in ("FULL", "NONE"):
            raise self.error(full, f"{where}.JitterStrategy", f"expected FULL or NONE, found {entry['JitterStrategy']!r}")

    def catcher(self, full: str, where: str, entry: Mapping[str, Any], scope: Scope, ql: str) -> None:
        allowed = {"ErrorEquals", "Next", "Comment", "Assign"} | ({"ResultPath"} if ql == JSONPATH else {"Output"})
        for key in entry:
            if key not in allowed:
                raise self.error(full, f"{where}.{key}", f"not a Catch field in {ql} mode (allowed: {', '.join(sorted(allowed))})")
        if "Next" not in entry:
            raise self.error(full, f"{where}.Next", "a catcher needs Next")
        self.target(full, f"{where}.Next", entry["Next"], scope)
        if "ResultPath" in entry and entry["ResultPath"] is not None and not _is_path(entry["ResultPath"]):
            raise self.error(full, f"{where}.ResultPath", f"expected a path starting with '$' or null, found {entry['ResultPath']!r}")

    def expressions(self, full: str, state: Mapping[str, Any], ql: str) -> None:
        """Paths, templates, intrinsics and JSONata expressions (the expression layer checks them)."""
        from unum_entry.asl import dataflow

        try:
            problems = dataflow.check_state_fields(_shallow(state), ql)
        except NotImplementedError:  # the expression layer is not there yet
            return
        if problems:
            field_name, problem = problems[0]
            raise self.error(full, field_name, problem)

    def reachable(self, scope: Scope) -> None:
        seen, todo = set(), [scope.start]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo.extend(successors(scope.states[name]))
        for name in scope.states:
            if name not in seen:
                raise self.error(f"{scope.path}{name}", "<state>", f"unreachable: no transition from {scope.start!r} leads here")
        if not any(_terminal(scope.states[name]) for name in seen):
            where = f"{scope.path.rstrip('/')}" if scope.owner else None
            field_name = f"{scope.path.rstrip('/').rsplit('/', 1)[-1]}.StartAt" if scope.owner else "StartAt"
            raise self.error(where, field_name, f"no terminal state is reachable from {scope.start!r} (a state with "
                             "\"End\": true, a Succeed or a Fail state): every execution would run forever")

    # ---- per type -------------------------------------------------------------------------

    def kind_task(self, name: str, full: str, state: Mapping[str, Any], scope: Scope, ql: str) -> None:
        resource = state.get("Resource")
        intrinsic = cloudformation_intrinsic(resource)
        if intrinsic is not None:
            raise self.error(full, "Resource", f"the CloudFormation intrinsic {json.dumps(resource)} is evaluated by "
                             f"CloudFormation, not here: pass its value with --substitution {intrinsic}=ARN")
        if not isinstance(resource, str) or not resource:
            raise self.error(full, "Resource", f"required, a Lambda function name or ARN; found {_type(resource)}")
        if not integration_task(full, state, self.source):  # service integrations: unum_entry/asl/integrations
            lambda_name(full, state, ql, self.source)  # raises when the resource is not a Lambda function
        self.retry_catch(full, state, scope, ql)

    def kind_wait(self, name: str, full: str, state: Mapping[str, Any], scope: Scope, ql: str) -> None:
        if not any(k in state for k in ("Seconds", "SecondsPath", "Timestamp", "TimestampPath")):
            raise self.error(full, "Seconds", "a Wait state needs one of Seconds, SecondsPath, Timestamp, TimestampPath")

    def kind_choice(self, name: str, full: str, state: Mapping[str, Any], scope: Scope, ql: str) -> None:
        choices = state.get("Choices")
        if not isinstance(choices, list) or not choices:
            raise self.error(full, "Choices", f"expected a non-empty list of rules, found {_type(choices)}")
        for i, rule in enumerate(choices):
            where = f"Choices[{i}]"
            if not isinstance(rule, Mapping):
                raise self.error(full, where, f"expected an object, found {_type(rule)}")
            if "Next" not in rule:
                raise self.error(full, f"{where}.Next", "a Choice rule needs Next")
            self.target(full, f"{where}.Next", rule["Next"], scope)
            if ql == JSONATA:
                extra = set(rule) - {"Condition", "Next", "Assign", "Output", "Comment"}
                if extra:
                    raise self.error(full, f"{where}.{sorted(extra)[0]}", "not a field of a JSONata Choice rule (use Condition)")
                if not _is_jsonata(rule.get("Condition")) and not isinstance(rule.get("Condition"), bool):
                    raise self.error(full, f"{where}.Condition", "a JSONata Choice rule needs Condition: \"{% expression %}\" or a boolean")
                continue
            if "Condition" in rule or "Output" in rule:
                raise self.error(full, f"{where}.{'Condition' if 'Condition' in rule else 'Output'}",
                                 "is a JSONata field; set \"QueryLanguage\": \"JSONata\" to use it")
            # The rule itself (operators, paths, `$variable` references) is checked by
            # dataflow.check_state_fields with the rest of the state's fields.
        if "Default" in state:
            self.target(full, "Default", state["Default"], scope)

    def kind_parallel(self, name: str, full: str, state: Mapping[str, Any], scope: Scope, ql: str) -> None:
        branches = state.get("Branches")
        if not isinstance(branches, list) or not branches:
            raise self.error(full, "Branches", f"expected a non-empty list of branches, found {_type(branches)}")
        for i, branch in enumerate(branches):
            branch_ql = branch.get("QueryLanguage", ql) if isinstance(branch, Mapping) else ql
            self.scope(branch, f"{full}/Branches[{i}]/", name, branch_ql, where=f"Branches[{i}]")
        self.retry_catch(full, state, scope, ql)

    def kind_map(self, name: str, full: str, state: Mapping[str, Any], scope: Scope, ql: str) -> None:
        key = "ItemProcessor" if "ItemProcessor" in state else "Iterator"
        processor = state.get(key)
        if processor is None:
            raise self.error(full, "ItemProcessor", "a Map state needs ItemProcessor (or the older Iterator)")
        from unum_entry.asl.item_io import check_reader, check_writer  # S3 ItemReader / ResultWriter
        for key_name, check in (("ItemReader", check_reader), ("ResultWriter", check_writer)):
            problem = check(state[key_name]) if key_name in state else None
            if problem is not None:
                raise self.error(full, *problem)
        if isinstance(processor, Mapping) and "ProcessorConfig" in processor:
            config = processor["ProcessorConfig"]
            if not isinstance(config, Mapping) or config.get("Mode", "INLINE") not in ("INLINE", "DISTRIBUTED"):
                raise self.error(full, f"{key}.ProcessorConfig.Mode", "expected INLINE or DISTRIBUTED")
        if "ItemBatcher" in state:
            batcher = state["ItemBatcher"]
            allowed = {"MaxItemsPerBatch", "MaxItemsPerBatchPath", "MaxInputBytesPerBatch", "MaxInputBytesPerBatchPath", "BatchInput"}
            if not isinstance(batcher, Mapping) or not batcher or set(batcher) - allowed:
                raise self.error(full, "ItemBatcher", f"expected an object with some of {', '.join(sorted(allowed))}")
        sub_ql = processor.get("QueryLanguage", ql) if isinstance(processor, Mapping) else ql
        self.scope(processor, f"{full}/{key}/", name, sub_ql, where=key)
        self.retry_catch(full, state, scope, ql)


def successors(state: Mapping[str, Any]) -> list[str]:
    """Every state one state can move to within its scope (Next, Choice rules, Default, Catch)."""
    out = []
    if isinstance(state.get("Next"), str):
        out.append(state["Next"])
    for rule in state.get("Choices", []) or []:
        if isinstance(rule, Mapping) and isinstance(rule.get("Next"), str):
            out.append(rule["Next"])
    if isinstance(state.get("Default"), str):
        out.append(state["Default"])
    for catcher in state.get("Catch", []) or []:
        if isinstance(catcher, Mapping) and isinstance(catcher.get("Next"), str):
            out.append(catcher["Next"])
    return out


LAMBDA_INVOKE = "arn:aws:states:::lambda:invoke"


def lambda_name(full: str, state: Mapping[str, Any], ql: str, source: str) -> str:
    """The Lambda function a Task runs: a plain name, a function ARN (qualifier dropped), or the
    `lambda:invoke` integration's FunctionName."""
    resource = state["Resource"]
    if resource.startswith("arn:aws:states:::lambda:invoke"):
        if resource not in (LAMBDA_INVOKE, LAMBDA_INVOKE + ".waitForTaskToken"):
            raise AslDefinitionError(source, full, "Resource", f"not supported: {resource!r} (unum runs Lambda functions "
                                     "synchronously; .waitForTaskToken callbacks have no unum equivalent)")
        params = state.get("Arguments" if ql == JSONATA else "Parameters")
        field_name = f"{'Arguments' if ql == JSONATA else 'Parameters'}.FunctionName"
        value = params.get("FunctionName") if isinstance(params, Mapping) else None
        dynamic = ("a JSONata expression" if _is_jsonata(value) else
                   "FunctionName.$" if isinstance(params, Mapping) and "FunctionName.$" in params else None)
        if dynamic is not None:
            raise AslDefinitionError(source, full, field_name, f"a dynamic FunctionName ({dynamic}) cannot be compiled: "
                                     "unum needs the function graph at compile time; name the function literally")
        if not isinstance(value, str):
            raise AslDefinitionError(source, full, field_name, "lambda:invoke needs a literal FunctionName")
        return _checked_function(value, source, full, field_name)
    if resource.startswith("arn:") and not re.match(r"arn:aws[a-z-]*:lambda:", resource):
        from unum_entry.asl.integrations import unsupported_reason
        reason = unsupported_reason(resource) or "unum runs Lambda functions and the integrations of docs/step-functions.md"
        raise AslDefinitionError(source, full, "Resource", f"not supported: {resource!r} ({reason})")
    return _checked_function(resource, source, full, "Resource")


_FUNCTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_QUALIFIER = re.compile(r"\$LATEST|[0-9]{1,10}|[A-Za-z0-9_-]{1,128}")


def integration_task(full: str, state: Mapping[str, Any], source: str) -> bool:
    """True when the Task's Resource is a service integration unum runs (no user code)."""
    from unum_entry.asl.activities import is_activity
    from unum_entry.asl.detached import MARK
    from unum_entry.asl.integrations import parse

    resource = str(state.get("Resource", ""))
    return MARK in state or parse(resource) is not None or is_activity(resource)


def _checked_function(value: str, source: str, full: str, field_name: str) -> str:
    """The function name in a Lambda name or ARN (`NAME`, `NAME:QUALIFIER`,
    `ACCOUNT:function:NAME[:QUALIFIER]`, `arn:PARTITION:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER]`);
    raises AslDefinitionError for an empty or malformed name or qualifier."""
    parts = value.split(":")
    if value.startswith("arn:"):
        if len(parts) not in (7, 8) or parts[5] != "function":
            raise AslDefinitionError(source, full, field_name, f"{value!r} is not a Lambda function ARN "
                                     "(arn:aws:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER])")
        rest = parts[6:]
    elif len(parts) >= 3 and parts[1] == "function":
        rest = parts[2:]
    else:
        rest = parts
    if len(rest) > 2:
        raise AslDefinitionError(source, full, field_name, f"{value!r} is not a Lambda function name or ARN")
    name = rest[0]
    if not _FUNCTION_NAME.fullmatch(name):
        raise AslDefinitionError(source, full, field_name, f"{value!r}: the function name {name!r} must be 1 to 64 "
                                 "letters, digits, '-' or '_'")
    if len(rest) == 2:
        qualifier = rest[1]
        if not qualifier:
            raise AslDefinitionError(source, full, field_name, f"{value!r} has an empty qualifier: drop the trailing "
                                     "':' or name a version ($LATEST, 1, 2, ...) or an alias")
        if not _QUALIFIER.fullmatch(qualifier):
            raise AslDefinitionError(source, full, field_name, f"{value!r}: the qualifier {qualifier!r} is neither a "
                                     "version ($LATEST or a number) nor an alias (letters, digits, '-', '_')")
    return name


CLOUDFORMATION_INTRINSICS = ("Ref", "Fn::GetAtt", "Fn::Sub", "Fn::Join", "Fn::ImportValue", "Fn::FindInMap", "Fn::If",
                             "Fn::Select")


def cloudformation_intrinsic(value: Any) -> str | None:
    """For a CloudFormation intrinsic object (`{"Ref": "Fn"}`, `{"Fn::GetAtt": ["Fn", "Arn"]}`,
    ...), the substitution key that gives its value (`Fn`, `Fn.Arn`); None for anything else."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return None
    (key, arg), = value.items()
    if key not in CLOUDFORMATION_INTRINSICS:
        return None
    if key == "Ref" and isinstance(arg, str):
        return arg
    if key == "Fn::GetAtt":
        if isinstance(arg, list) and len(arg) == 2 and all(isinstance(a, str) for a in arg):
            return f"{arg[0]}.{arg[1]}"
        if isinstance(arg, str):
            return arg
    return "NAME"


_PLACEHOLDER = re.compile(r"\$\{[^{}]*\}")


def _unresolved(value: Any, field_name: str) -> tuple[str, str] | None:
    """The first `${…}` placeholder left in `value` (keys and strings; nested branches are
    checked as states of their own): (field, placeholder), or None."""
    if isinstance(value, str):
        match = _PLACEHOLDER.search(value)
        return (field_name or "<state>", match.group(0)) if match else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not field_name and key in ("Branches", "ItemProcessor", "Iterator"):
                continue
            here = f"{field_name}.{key}" if field_name else str(key)
            found = _unresolved(key, here) or _unresolved(item, here)
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _unresolved(item, f"{field_name}[{index}]")
            if found is not None:
                return found
    return None


def _terminal(state: Mapping[str, Any]) -> bool:
    """Whether an execution can end at this state."""
    return state.get("Type") in TERMINAL or state.get("End") is True


def _shallow(state: Mapping[str, Any]) -> dict[str, Any]:
    """The state without its nested branches (they are checked as states of their own)."""
    return {k: v for k, v in state.items() if k not in ("Branches", "ItemProcessor", "Iterator")}


def _is_path(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("$")


def _is_jsonata(value: Any) -> bool:
    from unum_entry.asl.jsonata_mode import is_expression
    return is_expression(value)


def _is_int(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)
