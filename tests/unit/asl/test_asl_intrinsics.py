"""The 18 intrinsic functions, with the inputs and results AWS documents for each
(docs.aws.amazon.com/step-functions/latest/dg/intrinsic-functions.html), evaluated the way a
state evaluates them: as `.$` values of a Pass state's Parameters."""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unum_entry.asl import intrinsics
from unum_entry.asl.dataflow import Scope, check_state_fields, state_input
from unum_entry.errors import StatesRuntimeError

pytestmark = pytest.mark.unit


def run(expression: str, data: Any, scope: Scope | None = None) -> Any:
    """The value of `{"out.$": expression}` in a JSONPath Pass state's Parameters."""
    state = {"Type": "Pass", "Parameters": {"out.$": expression}, "End": True}
    return state_input(state, data, scope or Scope(context={}))["out"]


def failure(expression: str, data: Any) -> StatesRuntimeError:
    with pytest.raises(StatesRuntimeError) as caught:
        run(expression, data)
    return caught.value


# --- arrays ------------------------------------------------------------------------------------


def test_array_builds_an_array_from_its_arguments() -> None:
    assert run("States.Array($.Id)", {"Id": 123456}) == [123456]
    assert run("States.Array('a', 1, true, null, $.Id)", {"Id": 2}) == ["a", 1, True, None, 2]
    assert run("States.Array()", {}) == []


def test_array_partition_chunks_as_documented() -> None:
    assert run("States.ArrayPartition($.inputArray,4)", {"inputArray": [1, 2, 3, 4, 5, 6, 7, 8, 9]}) == [
        [1, 2, 3, 4], [5, 6, 7, 8], [9]]
    assert failure("States.ArrayPartition($.a, 0)", {"a": [1]}).error == "States.IntrinsicFailure"
    assert failure("States.ArrayPartition($.a, 2)", {"a": "no"}).error == "States.IntrinsicFailure"


def test_array_contains_finds_the_value() -> None:
    data = {"inputArray": [1, 2, 3, 4, 5, 6, 7, 8, 9], "lookingFor": 5}
    assert run("States.ArrayContains($.inputArray, $.lookingFor)", data) is True
    assert run("States.ArrayContains($.inputArray, 10)", data) is False
    # JSON equality: true is not 1, objects compare by content.
    assert run("States.ArrayContains($.a, true)", {"a": [1]}) is False
    assert run("States.ArrayContains($.a, $.o)", {"a": [{"x": 1, "y": 2}], "o": {"y": 2, "x": 1}}) is True


def test_array_range_is_inclusive_and_bounded() -> None:
    assert run("States.ArrayRange(1, 9, 2)", {}) == [1, 3, 5, 7, 9]
    assert run("States.ArrayRange(9, 1, -3)", {}) == [9, 6, 3]
    assert len(run("States.ArrayRange(1, 1000, 1)", {})) == 1000
    too_many = failure("States.ArrayRange(0, 1000, 1)", {})
    assert too_many.error == "States.IntrinsicFailure" and "1000" in too_many.cause
    assert failure("States.ArrayRange(1, 9, 0)", {}).error == "States.IntrinsicFailure"


def test_array_get_item_returns_the_indexed_value() -> None:
    data = {"inputArray": [1, 2, 3, 4, 5, 6, 7, 8, 9], "index": 5}
    assert run("States.ArrayGetItem($.inputArray, $.index)", data) == 6
    assert failure("States.ArrayGetItem($.inputArray, 9)", data).error == "States.IntrinsicFailure"


def test_array_length() -> None:
    assert run("States.ArrayLength($.inputArray)", {"inputArray": [1, 2, 3, 4, 5, 6, 7, 8, 9]}) == 9
    assert failure("States.ArrayLength($.x)", {"x": {"a": 1}}).error == "States.IntrinsicFailure"


def test_array_unique_keeps_first_occurrences() -> None:
    assert run("States.ArrayUnique($.inputArray)", {"inputArray": [1, 2, 3, 3, 3, 3, 3, 3, 4]}) == [1, 2, 3, 4]
    assert run("States.ArrayUnique($.a)", {"a": [1, True, 1.0, "1", {"k": 1}, {"k": 1}]}) == [1, True, "1", {"k": 1}]


# --- encoding, hashing -------------------------------------------------------------------------


def test_base64_encode() -> None:
    assert run("States.Base64Encode($.input)", {"input": "Data to encode"}) == "RGF0YSB0byBlbmNvZGU="
    assert failure("States.Base64Encode($.s)", {"s": "x" * 10_001}).error == "States.IntrinsicFailure"


def test_base64_decode() -> None:
    # The AWS page prints "Decoded data" as the result; the string it decodes is "Data to encode".
    assert run("States.Base64Decode($.base64)", {"base64": "RGF0YSB0byBlbmNvZGU="}) == "Data to encode"
    assert failure("States.Base64Decode($.b)", {"b": "%%%"}).error == "States.IntrinsicFailure"


@pytest.mark.parametrize("algorithm", ["MD5", "SHA-1", "SHA-256", "SHA-384", "SHA-512"])
def test_hash_supports_the_five_algorithms(algorithm: str) -> None:
    expected = hashlib.new(algorithm.replace("-", "").lower(), b"input data").hexdigest()
    assert run("States.Hash($.Data, $.Algorithm)", {"Data": "input data", "Algorithm": algorithm}) == expected


def test_hash_documented_sha1_value_and_bad_algorithm() -> None:
    # AWS documents "aaff4a450a104cd177d28d18d7485e8cae074b7" (39 hex digits: one is missing).
    assert run("States.Hash($.Data, $.Algorithm)", {"Data": "input data", "Algorithm": "SHA-1"}) == (
        "aaff4a450a104cd177d28d18d74485e8cae074b7")
    assert failure("States.Hash($.d, $.a)", {"d": "x", "a": "SHA-2"}).error == "States.IntrinsicFailure"


# --- JSON --------------------------------------------------------------------------------------


def test_json_merge_is_shallow() -> None:
    data = {"json1": {"a": {"a1": 1, "a2": 2}, "b": 2}, "json2": {"a": {"a3": 1, "a4": 2}, "c": 3}}
    assert run("States.JsonMerge($.json1, $.json2, false)", data) == {"a": {"a3": 1, "a4": 2}, "b": 2, "c": 3}
    arity = check_state_fields({"Type": "Pass", "Parameters": {"o.$": "States.JsonMerge($.json1, $.json2)"}}, "JSONPath")
    assert arity and "takes 3 argument" in arity[0][1]


def test_json_merge_rejects_deep_merge() -> None:
    problems = check_state_fields({"Type": "Pass", "Parameters": {"o.$": "States.JsonMerge($.a, $.b, true)"}}, "JSONPath")
    assert problems and problems[0][0] == "Parameters.o.$" and "shallow" in problems[0][1]
    at_run_time = failure("States.JsonMerge($.a, $.b, $.deep)", {"a": {}, "b": {}, "deep": True})
    assert at_run_time.error == "States.IntrinsicFailure"


def test_string_to_json() -> None:
    assert run("States.StringToJson($.escapedJsonString)", {"escapedJsonString": '{"foo": "bar"}'}) == {"foo": "bar"}
    assert failure("States.StringToJson($.s)", {"s": "{nope"}).error == "States.IntrinsicFailure"


def test_json_to_string_is_compact_json() -> None:
    assert run("States.JsonToString($.unescapedJson)", {"unescapedJson": {"foo": "bar"}}) == '{"foo":"bar"}'
    assert run("States.JsonToString($.v)", {"v": [1, "é", None]}) == '[1,"é",null]'


# --- math --------------------------------------------------------------------------------------


def test_math_random_is_in_range_and_seedable() -> None:
    data = {"start": 1, "end": 999}
    values = {run("States.MathRandom($.start, $.end)", data) for _ in range(200)}
    assert all(isinstance(v, int) and 1 <= v < 999 for v in values) and len(values) > 50
    seeded = {run("States.MathRandom($.start, $.end, 42)", data) for _ in range(5)}
    assert len(seeded) == 1
    scope = Scope(context={}, random=lambda: 0.999999)
    assert run("States.MathRandom(1, 3)", {}, scope) == 2  # the end is exclusive
    assert failure("States.MathRandom(5, 5)", {}).error == "States.IntrinsicFailure"


def test_math_add_adds_rounded_integers_in_int32() -> None:
    assert run("States.MathAdd($.value1, $.step)", {"value1": 111, "step": -1}) == 110
    assert run("States.MathAdd(1.5, 2.4)", {}) == 4  # non-integers round to the nearest integer
    assert failure("States.MathAdd(2147483648, 0)", {}).error == "States.IntrinsicFailure"
    assert failure("States.MathAdd('1', 0)", {}).error == "States.IntrinsicFailure"


# --- strings, ids, format ----------------------------------------------------------------------


def test_string_split_single_and_multiple_delimiters() -> None:
    assert run("States.StringSplit($.inputString, $.splitter)", {"inputString": "1,2,3,4,5", "splitter": ","}) == [
        "1", "2", "3", "4", "5"]
    assert run("States.StringSplit($.inputString, $.splitter)",
               {"inputString": "This.is+a,test=string", "splitter": ".+,="}) == ["This", "is", "a", "test", "string"]


def test_uuid_is_a_v4_uuid_from_the_scope_source() -> None:
    value = run("States.UUID()", {})
    assert uuid.UUID(value).version == 4
    assert run("States.UUID()", {}, Scope(context={}, uuid=lambda: "fixed")) == "fixed"


def test_format_with_literal_or_path_template() -> None:
    data = {"name": "Arnav", "template": "Hello, my name is {}."}
    assert run("States.Format('Hello, my name is {}.', $.name)", data) == "Hello, my name is Arnav."
    assert run("States.Format($.template, $.name)", data) == "Hello, my name is Arnav."
    assert run("States.Format('{} {} {} {}', 1, true, null, $.o)", {"o": {"a": [1]}}) == "1 true null {a=[1]}"
    mismatch = failure("States.Format('{} and {}', $.name)", data)
    assert mismatch.error == "States.IntrinsicFailure"


def test_format_escapes_reserved_characters() -> None:
    # In the definition (JSON) these are written \\{ \\} \\' \\\\ .
    assert run(r"States.Format('\{\} is not a {}, it\'s a back\\slash', $.n)", {"n": "slot"}) == (
        "{} is not a slot, it's a back\\slash")
    problems = check_state_fields({"Type": "Pass", "Parameters": {"x.$": r"States.Format('a\b')"}}, "JSONPath")
    assert problems and "open escape" in problems[0][1]


def test_intrinsics_nest_and_take_context_and_variables() -> None:
    arn = "arn:aws:imagebuilder:us-east-1:123456789012:image-recipe/myrecipe/1.0.0"
    nested = ("States.Format('{}.{}', States.ArrayGetItem(States.StringSplit(States.ArrayGetItem("
              "States.StringSplit($.ImageRecipe.Arn, '/'), 2), '.'), 0), States.ArrayGetItem(States.StringSplit("
              "States.ArrayGetItem(States.StringSplit($.ImageRecipe.Arn, '/'), 2), '.'), 1))")
    assert run(nested, {"ImageRecipe": {"Arn": arn}}) == "1.0"
    scope = Scope(context={"Execution": {"Id": "exec-1"}}, variables={"count": 41})
    assert run("States.Format('{}/{}', $$.Execution.Id, States.MathAdd($count, 1))", {}, scope) == "exec-1/42"


def test_nesting_deeper_than_ten_is_rejected() -> None:
    deep = "States.Array(" * 11 + ")" * 11
    with pytest.raises(intrinsics.IntrinsicSyntaxError, match="nest at most 10"):
        intrinsics.parse(deep)
    intrinsics.parse("States.Array(" * 10 + ")" * 10)


def test_a_missing_path_argument_is_states_runtime() -> None:
    error = failure("States.ArrayLength($.missing)", {"a": 1})
    assert error.error == "States.Runtime" and "$.missing" in error.cause


@pytest.mark.parametrize("text, problem", [
    ("States.Nope(1)", "unknown intrinsic function States.Nope"),
    ("States.ArrayLength()", "takes 1 argument"),
    ("States.MathRandom(1)", "takes 2 to 3 argument"),
    ("States.Array(1", "expected ',' or ')'"),
    ("States.Array(1) tail", "unexpected text"),
    ("States.Array('open)", "unterminated string"),
    ("States.Hash($.d, 'SHA-2')", "algorithm must be one of"),
    ("States.Array($..[)", "not a valid JSONPath"),
])
def test_malformed_intrinsics_are_static_errors(text: str, problem: str) -> None:
    problems = check_state_fields({"Type": "Pass", "Parameters": {"v.$": text}}, "JSONPath")
    assert [field for field, _ in problems] == ["Parameters.v.$"]
    assert problem in problems[0][1]


def test_all_eighteen_intrinsics_are_known() -> None:
    assert len(intrinsics.NAMES) == 18
    assert base64.b64decode(run("States.Base64Encode('é')", {})).decode() == "é"


@given(st.lists(st.integers(-5, 5), max_size=30), st.integers(1, 7))
def test_partition_then_concatenation_is_the_array(array: list[int], size: int) -> None:
    chunks = run("States.ArrayPartition($.a, $.n)", {"a": array, "n": size})
    assert [item for chunk in chunks for item in chunk] == array
    assert all(len(chunk) == size for chunk in chunks[:-1])


@given(st.lists(st.one_of(st.integers(0, 3), st.booleans(), st.none(), st.text(max_size=1)), max_size=20))
def test_unique_is_idempotent_and_contains_agrees(array: list[object]) -> None:
    unique = run("States.ArrayUnique($.a)", {"a": array})
    assert run("States.ArrayUnique($.a)", {"a": unique}) == unique
    for item in array:
        assert run("States.ArrayContains($.u, $.i)", {"u": unique, "i": item}) is True
