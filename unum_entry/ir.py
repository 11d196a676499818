"""The unum IR: one versioned JSON document per function (the NSDI'23 paper "Unum: A System
for Highly Scalable Serverless Workflows without a Centralized Orchestrator", §3.2, Table 1).

```json
{"unum_ir": 1, "function": "Square", "handler": "app.handler", "checkpoint": true,
 "max_attempts": 3,
 "instructions": [
   {"op": "create_set", "function": "Sum", "shape": "aggregate"},
   {"op": "map", "function": "Square", "items": "$.numbers", "when": {"Variable": "$.go", "BooleanEquals": true}}
 ]}
```

Instructions are a tiny straight-line program that egress runs over the committed output:
- `pop` / `next` change the fan-out stack seen by the transitions after them (pop the top frame;
  increment the top frame's iteration, which is how cycles get fresh invocation names).
- `create_set` asks for the fan-in set(s) of `function` to be created for the *next* `map` /
  `fan_out` (the fan-out origin owns fan-in sets, the NSDI'23 paper, §3.5). `shape` is `aggregate` (one
  set, one slot per branch) or `neighbour` (one set per branch index i, holding branch i and the
  target's own output at i-1: fold and the ExCamera pattern).
- Transitions: `invoke` (one invocation), `map` (one per element of the output, or of the list at
  `items`; `max_concurrency` k (an int, or a path to one in the output) runs the items in k
  *lanes*: the origin invokes items 0..k-1 and item i, once committed, invokes item i+k — a
  concurrency limit with no coordinator), `fan_out` (each of `branches` gets the whole output), `fan_in` (join `function`:
  `aggregate` pops the top frame and uses the branch index as slot; `neighbour` joins the target
  at index + `offset` in `slot`), `succeed` (terminal: the workflow result is the value at `path`,
  default the whole output) and `fail` (terminal: the workflow fails with the `{"Error", "Cause"}`
  object at `path`; a compiled Step Functions Fail state), `suspend` (no successor and no result:
  a Task waiting for a task-token callback, which invokes the continuation; unum_entry/asl/callbacks.py).
  `invoke` may carry `path`: the successor
  gets only the value at `path` of the output (a routing wrapper stays behind). Each may carry `when`, a Step Functions Choice rule over the
  output (`$`) and the request metadata (`$$`). The first transition whose `when` holds fires and
  ends the program; if none fires the function is terminal and its output is a workflow result.
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from unum_entry.conditions import resolve_path, validate_condition
from unum_entry.errors import ConditionEvaluationError, IRError
from unum_entry.frozen import ReadOnly


TIME_SCALE_ENV = "UNUM_ASL_TIME_SCALE"


def time_scale() -> float:
    """`UNUM_ASL_TIME_SCALE` as a float (1 when unset or not a non-negative number): it multiplies
    every Step Functions time (Waits, Retry back-offs, Task and execution timeouts), so tests and
    local previews run an hour-long machine in seconds."""
    raw = os.environ.get(TIME_SCALE_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return 1.0
    return value if value >= 0 else 1.0


IR_VERSION = 1
IR_FILE_NAME = "unum-ir.json"


class Shape(str, enum.Enum):
    """How a fan-in set is laid out."""

    AGGREGATE = "aggregate"
    NEIGHBOUR = "neighbour"


class Pop(ReadOnly):
    """Pop the top fan-out frame for the transitions that follow."""

    __slots__ = ()


class Next(ReadOnly):
    """Increment the top frame's iteration for the transitions that follow (cycles)."""

    __slots__ = ()


class CreateSet(ReadOnly):
    """Create the fan-in set(s) of `function` for the next fan-out."""

    __slots__ = ("function", "shape")

    function: Final[str]
    shape: Final[Shape]

    def __init__(self, function: str, shape: Shape) -> None:
        self.function = function
        self.shape = shape


class Invoke(ReadOnly):
    """Invoke `function` once with the output (or the value at `path` of it)."""

    __slots__ = ("function", "when", "path")

    function: Final[str]
    when: Final[Mapping[str, Any] | None]
    path: Final[str | None]  # send only this part of the output

    def __init__(self, function: str, when: Mapping[str, Any] | None = None, path: str | None = None) -> None:
        self.function = function
        self.when = when
        self.path = path


class Succeed(ReadOnly):
    """End the workflow with the value at `path` of the output (the whole output when None)."""

    __slots__ = ("path", "when")

    path: Final[str | None]
    when: Final[Mapping[str, Any] | None]

    def __init__(self, path: str | None = None, when: Mapping[str, Any] | None = None) -> None:
        self.path = path
        self.when = when


class Suspend(ReadOnly):
    """End this invocation with no successor and no result: a Step Functions Task waiting for a
    task-token callback (unum_entry.asl.callbacks invokes the continuation)."""

    __slots__ = ("when",)

    when: Final[Mapping[str, Any] | None]

    def __init__(self, when: Mapping[str, Any] | None = None) -> None:
        self.when = when


class Fail(ReadOnly):
    """End the workflow as failed with the `{"Error", "Cause"}` object at `path` (the whole output when None)."""

    __slots__ = ("path", "when")

    path: Final[str | None]
    when: Final[Mapping[str, Any] | None]

    def __init__(self, path: str | None = None, when: Mapping[str, Any] | None = None) -> None:
        self.path = path
        self.when = when


class Map(ReadOnly):
    """Invoke `function` once per element of the output (or of the list at `items`)."""

    __slots__ = ("function", "items", "when", "max_concurrency")

    function: Final[str]
    items: Final[str | None]
    when: Final[Mapping[str, Any] | None]
    max_concurrency: Final[int | str | None]  # an int >= 0 (0: unlimited) or a path into the output

    def __init__(self, function: str, items: str | None = None, when: Mapping[str, Any] | None = None,
                 max_concurrency: int | str | None = None) -> None:
        self.function = function
        self.items = items
        self.when = when
        self.max_concurrency = max_concurrency


class FanOut(ReadOnly):
    """Invoke every function of `branches` with the whole output."""

    __slots__ = ("branches", "when")

    branches: Final[tuple[str, ...]]
    when: Final[Mapping[str, Any] | None]

    def __init__(self, branches: tuple[str, ...], when: Mapping[str, Any] | None = None) -> None:
        self.branches = branches
        self.when = when


class FanIn(ReadOnly):
    """Join `function`'s fan-in set (`shape`, at `slot`; a neighbour join at index + `offset`)."""

    __slots__ = ("function", "shape", "slot", "offset", "when")

    function: Final[str]
    shape: Final[Shape]
    slot: Final[int]
    offset: Final[int]
    when: Final[Mapping[str, Any] | None]

    def __init__(self, function: str, shape: Shape = Shape.AGGREGATE, slot: int = 0, offset: int = 0,
                 when: Mapping[str, Any] | None = None) -> None:
        self.function = function
        self.shape = shape
        self.slot = slot
        self.offset = offset
        self.when = when


Instruction = Pop | Next | CreateSet | Invoke | Map | FanOut | FanIn | Succeed | Fail | Suspend
Transition = Invoke | Map | FanOut | FanIn | Succeed | Fail | Suspend


class FunctionIR(ReadOnly):
    """One function's IR, validated."""

    __slots__ = ("function", "handler", "instructions", "checkpoint", "max_attempts", "source", "ingress_check", "timeout_seconds")

    function: Final[str]
    handler: Final[str]
    instructions: Final[tuple[Instruction, ...]]
    checkpoint: Final[bool]
    max_attempts: Final[int]
    source: Final[str]
    # Read our own checkpoint before running the handler, so a duplicate delivery never re-runs
    # user code (one read per invocation). Off by default: the commit detects duplicates.
    ingress_check: Final[bool]
    # The entry function's execution timeout (a state machine's top-level TimeoutSeconds): a
    # workflow started here ends `timed out` (States.Timeout) when it elapses (unum_entry.watchdog).
    timeout_seconds: Final[float | None]

    def __init__(self, function: str, handler: str, instructions: tuple[Instruction, ...], checkpoint: bool = True,
                 max_attempts: int = 3, source: str = "<ir>", ingress_check: bool = False,
                 timeout_seconds: float | None = None) -> None:
        self.function = function
        self.handler = handler
        self.instructions = instructions
        self.checkpoint = checkpoint
        self.max_attempts = max_attempts
        self.source = source
        self.ingress_check = ingress_check
        self.timeout_seconds = timeout_seconds

    def targets(self) -> set[str]:
        """Every function this IR can invoke or join (for workflow-level validation)."""
        return {name for ins in self.instructions for name in instruction_targets(ins)}


def instruction_targets(ins: Instruction) -> tuple[str, ...]:
    """The functions one instruction names."""
    if isinstance(ins, (Invoke, Map, FanIn, CreateSet)):
        return (ins.function,)
    if isinstance(ins, FanOut):
        return ins.branches
    return ()


# ---- loading and validation ---------------------------------------------------------------

_TOP_FIELDS = {"unum_ir", "function", "handler", "checkpoint", "max_attempts", "ingress_check", "instructions",
               "timeout_seconds"}
_OP_FIELDS: dict[str, set[str]] = {
    "pop": set(),
    "next": set(),
    "create_set": {"function", "shape"},
    "invoke": {"function", "when", "path"},
    "map": {"function", "items", "when", "max_concurrency"},
    "fan_out": {"branches", "when"},
    "fan_in": {"function", "shape", "slot", "offset", "when"},
    "succeed": {"path", "when"},
    "fail": {"path", "when"},
    "suspend": {"when"},
}


def load_ir(path: str | Path) -> FunctionIR:
    """Read and validate an IR file. Raises IRError naming the file and field."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise IRError(str(path), "<file>", f"cannot read: {exc.strerror or exc}") from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IRError(str(path), "<file>", f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    return parse_ir(doc, source=str(path))


def parse_ir(doc: Any, *, source: str = "<ir>") -> FunctionIR:
    """Validate a decoded IR document and build a FunctionIR."""
    v = _Validator(source)
    if not isinstance(doc, dict):
        raise v.error("<root>", f"expected a JSON object, found {_type_name(doc)}")
    v.unknown_fields(doc, _TOP_FIELDS, "")
    version = doc.get("unum_ir")
    if version != IR_VERSION:
        raise v.error("unum_ir", f"expected version {IR_VERSION}, found {version!r}")
    function = v.name(doc, "function", "function")
    handler = v.string(doc, "handler", "handler")
    if "." not in handler or handler.startswith(".") or handler.endswith("."):
        raise v.error("handler", f"expected 'module.function', found {handler!r}")
    checkpoint = doc.get("checkpoint", True)
    if not isinstance(checkpoint, bool):
        raise v.error("checkpoint", f"expected true or false, found {_type_name(checkpoint)}")
    max_attempts = doc.get("max_attempts", 3)
    if not isinstance(max_attempts, int) or isinstance(max_attempts, bool) or max_attempts < 1:
        raise v.error("max_attempts", f"expected an integer >= 1, found {max_attempts!r}")
    ingress_check = doc.get("ingress_check", False)
    if not isinstance(ingress_check, bool):
        raise v.error("ingress_check", f"expected true or false, found {_type_name(ingress_check)}")
    if ingress_check and not checkpoint:
        raise v.error("ingress_check", f"function {function!r}: \"ingress_check\": true needs \"checkpoint\": true "
                      "(ingress would read a checkpoint that is never written)")
    timeout_seconds = doc.get("timeout_seconds")
    if timeout_seconds is not None and (isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, (int, float))
                                        or not timeout_seconds > 0):
        raise v.error("timeout_seconds", f"expected a number of seconds > 0, found {timeout_seconds!r}")
    raw_instructions = doc.get("instructions", [])
    if not isinstance(raw_instructions, list):
        raise v.error("instructions", f"expected a list, found {_type_name(raw_instructions)}")
    instructions = tuple(v.instruction(raw, f"instructions[{i}]") for i, raw in enumerate(raw_instructions))
    ir = FunctionIR(function=function, handler=handler, instructions=instructions,
                    checkpoint=checkpoint, max_attempts=max_attempts, source=source, ingress_check=ingress_check,
                    timeout_seconds=timeout_seconds)
    _check_program(ir, v)
    return ir


def _check_program(ir: FunctionIR, v: _Validator) -> None:
    """Rules that span instructions."""
    for i, ins in enumerate(ir.instructions):
        field = f"instructions[{i}]"
        if isinstance(ins, CreateSet):
            following = next((x for x in ir.instructions[i + 1:] if not isinstance(x, (CreateSet, Pop, Next))), None)
            if not isinstance(following, (Map, FanOut)):
                raise v.error(field, "create_set must be followed by a map or fan_out transition (the fan-out that owns the set)")
        if isinstance(ins, FanIn) and not ir.checkpoint:
            raise v.error(field, "fan_in needs \"checkpoint\": true (branches join by checkpoint reference)")
        if isinstance(ins, (Map, FanOut)) and not ir.checkpoint:
            raise v.error(field, f"{'map' if isinstance(ins, Map) else 'fan_out'} needs \"checkpoint\": true (branches share the origin's checkpoint)")
        if getattr(ins, "when", None) is not None and not ir.checkpoint:
            # Without a commit, two executions of this function may route differently.
            raise v.error(f"{field}.when", "a condition needs \"checkpoint\": true (egress decisions may depend "
                                           "only on committed output)")


class _Validator:
    """Builds instructions from raw JSON, raising IRError with the source and field path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, field: str, problem: str) -> IRError:
        return IRError(self.source, field, problem)

    def unknown_fields(self, obj: dict, allowed: set[str], prefix: str) -> None:
        unknown = sorted(set(obj) - allowed)
        if unknown:
            where = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
            raise self.error(where, f"unknown field (allowed: {', '.join(sorted(allowed))})")

    def string(self, obj: dict, key: str, field: str) -> str:
        if key not in obj:
            raise self.error(field, "required field is missing")
        value = obj[key]
        if not isinstance(value, str) or not value:
            raise self.error(field, f"expected a non-empty string, found {_type_name(value)}")
        return value

    def name(self, obj: dict, key: str, field: str) -> str:
        value = self.string(obj, key, field)
        if any(c in value for c in "/\\") or value.strip() != value:
            raise self.error(field, f"function names may not contain slashes or surrounding spaces: {value!r}")
        return value

    def shape(self, obj: dict, field: str, default: Shape | None = None) -> Shape:
        raw = obj.get("shape", default.value if default else None)
        try:
            return Shape(raw)
        except ValueError:
            raise self.error(field, f"expected one of {', '.join(s.value for s in Shape)}, found {raw!r}") from None

    def small_int(self, obj: dict, key: str, field: str, allowed: tuple[int, ...]) -> int:
        value = obj.get(key, allowed[0])
        if not isinstance(value, int) or isinstance(value, bool) or value not in allowed:
            raise self.error(field, f"expected one of {allowed}, found {value!r}")
        return value

    def path(self, obj: dict, key: str, field: str) -> str | None:
        """An optional reference path (`$`, `$.a.b`, `$.a[0]`) selecting one value of the output."""
        value = obj.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.startswith("$") or value.startswith("$$"):
            raise self.error(f"{field}.{key}", f"expected a path starting with '$', found {value!r}")
        try:
            resolve_path(value, None, {})
        except ConditionEvaluationError as exc:
            if "no value is present" not in str(exc):
                raise self.error(f"{field}.{key}", str(exc)) from None
        return value

    def when(self, obj: dict, field: str) -> Mapping[str, Any] | None:
        if "when" not in obj:
            return None
        validate_condition(obj["when"], source=self.source, field=f"{field}.when")
        where = _attempt_reference(obj["when"], f"{field}.when")
        if where is not None:
            raise self.error(where, "conditions cannot use $$.Attempt: it differs between executions of one "
                                    "invocation, and egress decisions may depend only on committed output "
                                    "(return context.attempt from the handler and test $.attempt instead)")
        return obj["when"]

    def instruction(self, raw: Any, field: str) -> Instruction:
        if not isinstance(raw, dict):
            raise self.error(field, f"expected an object, found {_type_name(raw)}")
        op = raw.get("op")
        if op not in _OP_FIELDS:
            raise self.error(f"{field}.op", f"unknown op {op!r} (expected one of {', '.join(_OP_FIELDS)})")
        self.unknown_fields(raw, _OP_FIELDS[op] | {"op"}, field)
        if op == "pop":
            return Pop()
        if op == "next":
            return Next()
        if op == "create_set":
            return CreateSet(function=self.name(raw, "function", f"{field}.function"),
                             shape=self.shape(raw, f"{field}.shape", Shape.AGGREGATE))
        if op == "invoke":
            return Invoke(function=self.name(raw, "function", f"{field}.function"), when=self.when(raw, field),
                          path=self.path(raw, "path", field))
        if op == "succeed":
            return Succeed(path=self.path(raw, "path", field), when=self.when(raw, field))
        if op == "suspend":
            return Suspend(when=self.when(raw, field))
        if op == "fail":
            return Fail(path=self.path(raw, "path", field), when=self.when(raw, field))
        if op == "map":
            items = raw.get("items")
            if items is not None and (not isinstance(items, str) or not items.startswith("$")):
                raise self.error(f"{field}.items", f"expected a path starting with '$', found {items!r}")
            limit = raw.get("max_concurrency")
            if limit is not None and not (isinstance(limit, str) and limit.startswith("$")) and \
                    (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
                raise self.error(f"{field}.max_concurrency", f"expected an integer >= 0 or a path starting with '$', found {limit!r}")
            return Map(function=self.name(raw, "function", f"{field}.function"), items=items, when=self.when(raw, field),
                       max_concurrency=limit)
        if op == "fan_out":
            branches = raw.get("branches")
            if not isinstance(branches, list) or not branches:
                raise self.error(f"{field}.branches", f"expected a non-empty list of function names, found {_type_name(branches)}")
            names = tuple(self.name({"b": b}, "b", f"{field}.branches[{i}]") for i, b in enumerate(branches))
            return FanOut(branches=names, when=self.when(raw, field))
        # fan_in
        shape = self.shape(raw, f"{field}.shape", Shape.AGGREGATE)
        if shape is Shape.AGGREGATE and ("slot" in raw or "offset" in raw):
            raise self.error(field, "slot and offset apply to shape 'neighbour' only (aggregate uses the branch index)")
        return FanIn(function=self.name(raw, "function", f"{field}.function"), shape=shape,
                     slot=self.small_int(raw, "slot", f"{field}.slot", (0, 1)),
                     offset=self.small_int(raw, "offset", f"{field}.offset", (0, 1)),
                     when=self.when(raw, field))


def _attempt_reference(rule: Any, field: str) -> str | None:
    """The field path of the first `$$.Attempt` reference inside a condition, if any."""
    if isinstance(rule, str):
        return field if rule == "$$.Attempt" or rule.startswith(("$$.Attempt.", "$$.Attempt[")) else None
    items: Iterable[tuple[str, Any]]
    if isinstance(rule, Mapping):
        items = rule.items()
    elif isinstance(rule, list):
        items = ((f"[{i}]", x) for i, x in enumerate(rule))
    else:
        return None
    for key, value in items:
        found = _attempt_reference(value, f"{field}{key}" if str(key).startswith("[") else f"{field}.{key}")
        if found is not None:
            return found
    return None


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)
