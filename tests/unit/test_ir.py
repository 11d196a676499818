"""IR validation: every error names the file and the field path."""

from __future__ import annotations

import json

import pytest

from unum_entry.errors import IRError
from unum_entry.ir import CreateSet, FanIn, FanOut, Invoke, Map, Next, Pop, Shape, load_ir, parse_ir

pytestmark = pytest.mark.unit


def ir(**overrides):
    doc = {"unum_ir": 1, "function": "F", "handler": "app.handler", "instructions": []}
    doc.update(overrides)
    return doc


def test_parses_every_instruction():
    parsed = parse_ir(ir(instructions=[
        {"op": "pop"}, {"op": "next"},
        {"op": "create_set", "function": "J", "shape": "neighbour"},
        {"op": "map", "function": "W", "items": "$.xs", "when": {"Variable": "$.go", "BooleanEquals": True}},
        {"op": "fan_out", "branches": ["A", "B"]},
        {"op": "fan_in", "function": "J", "shape": "neighbour", "slot": 1, "offset": 1},
        {"op": "invoke", "function": "G"},
    ]), source="f.json")
    kinds = [type(i) for i in parsed.instructions]
    assert kinds == [Pop, Next, CreateSet, Map, FanOut, FanIn, Invoke]
    assert parsed.instructions[2].shape is Shape.NEIGHBOUR
    assert parsed.targets() == {"J", "W", "A", "B", "G"}
    assert parsed.checkpoint is True and parsed.max_attempts == 3


@pytest.mark.parametrize("doc, field, words", [
    ([], "<root>", "expected a JSON object"),
    (ir(unum_ir=2), "unum_ir", "expected version 1"),
    (ir(function=""), "function", "non-empty string"),
    (ir(function="a/b"), "function", "slashes"),
    (ir(handler="app"), "handler", "module.function"),
    (ir(checkpoint="yes"), "checkpoint", "true or false"),
    (ir(max_attempts=0), "max_attempts", ">= 1"),
    (ir(extra=1), "extra", "unknown field"),
    (ir(instructions={}), "instructions", "expected a list"),
    (ir(instructions=[3]), "instructions[0]", "expected an object"),
    (ir(instructions=[{"op": "jump"}]), "instructions[0].op", "unknown op 'jump'"),
    (ir(instructions=[{"op": "invoke"}]), "instructions[0].function", "required field is missing"),
    (ir(instructions=[{"op": "invoke", "function": "G", "target": "x"}]), "instructions[0].target", "unknown field"),
    (ir(instructions=[{"op": "map", "function": "W", "items": "xs"}]), "instructions[0].items", "starting with '$'"),
    (ir(instructions=[{"op": "map", "function": "W", "max_concurrency": -1}]), "instructions[0].max_concurrency", "integer >= 0"),
    (ir(instructions=[{"op": "map", "function": "W", "max_concurrency": "k"}]), "instructions[0].max_concurrency", "path starting"),
    (ir(instructions=[{"op": "fan_out", "branches": []}]), "instructions[0].branches", "non-empty list"),
    (ir(instructions=[{"op": "fan_out", "branches": ["A", 3]}]), "instructions[0].branches[1]", "non-empty string"),
    (ir(instructions=[{"op": "fan_in", "function": "J", "shape": "ring"}]), "instructions[0].shape", "aggregate, neighbour"),
    (ir(instructions=[{"op": "fan_in", "function": "J", "slot": 1}]), "instructions[0]", "'neighbour' only"),
    (ir(instructions=[{"op": "fan_in", "function": "J", "shape": "neighbour", "slot": 2}]), "instructions[0].slot", "one of (0, 1)"),
    (ir(instructions=[{"op": "create_set", "function": "J"}, {"op": "invoke", "function": "G"}]), "instructions[0]", "followed by a map or fan_out"),
    (ir(checkpoint=False, instructions=[{"op": "fan_in", "function": "J"}]), "instructions[0]", "checkpoint"),
    (ir(checkpoint=False, instructions=[{"op": "map", "function": "W"}]), "instructions[0]", "checkpoint"),
    (ir(instructions=[{"op": "invoke", "function": "G", "when": {"Variable": "$.x", "NumericEquals": "1"}}]),
     "instructions[0].when.NumericEquals", ""),
])
def test_errors_name_the_field(doc, field, words):
    with pytest.raises(IRError) as caught:
        parse_ir(doc, source="fn/unum-ir.json")
    message = str(caught.value)
    assert message.startswith("fn/unum-ir.json: ")
    assert f": {field}" in message
    assert words in message


def test_load_ir_reports_bad_json_with_position(tmp_path):
    path = tmp_path / "unum-ir.json"
    path.write_text('{"unum_ir": 1,\n "function": }')
    with pytest.raises(IRError, match=r"unum-ir.json: <file>: not valid JSON \(line 2"):
        load_ir(path)


def test_load_ir_reads_a_file(tmp_path):
    path = tmp_path / "unum-ir.json"
    path.write_text(json.dumps(ir(instructions=[{"op": "invoke", "function": "G"}])))
    assert load_ir(path).source == str(path)


def test_missing_file_is_an_ir_error(tmp_path):
    with pytest.raises(IRError, match="cannot read"):
        load_ir(tmp_path / "nope.json")


@pytest.mark.parametrize("when, field", [
    ({"Variable": "$$.Attempt", "NumericGreaterThan": 0}, "instructions[0].when.Variable"),
    ({"Not": {"Variable": "$$.Attempt", "NumericEquals": 0}}, "instructions[0].when.Not.Variable"),
    ({"And": [{"Variable": "$.v", "IsPresent": True}, {"Variable": "$.x", "NumericLessThanPath": "$$.Attempt"}]},
     "instructions[0].when.And[1].NumericLessThanPath"),
])
def test_conditions_over_the_attempt_are_refused(when, field):
    """Two executions of one invocation differ in their attempt count: a condition over it could
    route them differently, so egress may not depend on it (docs/coordination.md)."""
    doc = ir(instructions=[{"op": "invoke", "function": "G", "when": when}, {"op": "invoke", "function": "H"}])
    with pytest.raises(IRError, match=r"\$\$\.Attempt") as refused:
        parse_ir(doc, source="f.json")
    assert refused.value.field == field
