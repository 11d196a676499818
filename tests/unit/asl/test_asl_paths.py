"""States Language paths: definite paths select one value, indefinite paths a list (Jayway
semantics), reference paths, roots ($, $$, $variable) and ResultPath writes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unum_entry.asl import paths
from unum_entry.errors import StatesRuntimeError

pytestmark = pytest.mark.unit

# The reference-path example of the "Paths" page, plus a few more members.
DATA = {"foo": 123, "bar": ["a", "b", "c"], "car": {"cdr": True},
        "books": [{"title": "A", "price": 8}, {"title": "B", "price": 12}],
        "obj": {"k1": 1, "k2": 2}, "odd key": {"x-y": 5}}


@pytest.mark.parametrize("path, expected", [
    ("$.foo", 123), ("$.bar", ["a", "b", "c"]), ("$.car.cdr", True), ("$", DATA),
    ("$.bar[1]", "b"), ("$.bar[-1]", "c"), ("$['odd key']['x-y']", 5),
])
def test_definite_paths_select_one_value(path: str, expected: object) -> None:
    assert paths.select(path, DATA) == expected


@pytest.mark.parametrize("text", ["$.odd key", "a.b", "$.a[", "$x y", "$1abc", 7])
def test_invalid_paths_are_reported(text: object) -> None:
    assert paths.path_problem(text) is not None


@given(st.lists(st.sampled_from(["a", "b", "c d", "é"]), min_size=1, max_size=4), st.integers())
def test_a_written_value_is_read_back_at_its_path(keys: list[str], value: int) -> None:
    text = "$" + "".join(f"['{key}']" for key in keys)
    written = paths.write({"a": {"zz": 1}}, text, value)
    assert paths.select(text, written) == value


@pytest.mark.parametrize("path, expected", [
    ("$.bar[0:2]", ["a", "b"]),
    ("$.books[*].title", ["A", "B"]),
    ("$..price", [8, 12]),
    ("$.books[?(@.price < 10)].title", ["A"]),
    ("$.obj.*", [1, 2]),
    ("$.obj[*]", [1, 2]),
    ("$.bar[0,2]", ["a", "c"]),
    ("$.books[*].missing", []),
])
def test_indefinite_paths_select_a_list(path: str, expected: list[object]) -> None:
    assert paths.select(path, DATA) == expected


def test_indexes_do_not_reach_into_strings_or_objects() -> None:
    with pytest.raises(StatesRuntimeError):
        paths.select("$.foo[0]", {"foo": "xyz"})
    assert paths.select("$.obj[0:1]", DATA) == []


def test_context_and_variable_roots() -> None:
    assert paths.select("$$.Execution.Id", {}, {"Execution": {"Id": "e"}}) == "e"
    assert paths.select("$$", {}, {"a": 1}) == {"a": 1}
    assert paths.select("$order.items[0]", {}, {}, {"order": {"items": ["x"]}}) == "x"
    assert paths.select("$ünïcode", {}, {}, {"ünïcode": 1}) == 1
    with pytest.raises(StatesRuntimeError, match="not defined"):
        paths.select("$nope", {}, {}, {})


def test_missing_definite_path_is_states_runtime_naming_path_and_field() -> None:
    with pytest.raises(StatesRuntimeError) as caught:
        paths.select("$.missing", DATA, field="Parameters.x.$")
    assert caught.value.error == "States.Runtime"
    assert "'$.missing'" in caught.value.cause and "field 'x.$'" in caught.value.cause  # AWS names the key


def test_write_copies_along_the_path_only() -> None:
    data = {"a": {"b": 1}, "other": {"big": [1, 2]}}
    out = paths.write(data, "$.a.c", 2)
    assert out == {"a": {"b": 1, "c": 2}, "other": {"big": [1, 2]}}
    assert data == {"a": {"b": 1}, "other": {"big": [1, 2]}}
    assert out["other"] is data["other"]
    assert paths.write(data, "$", 5) == 5
    assert paths.write(data, None, 5) is data


@pytest.mark.parametrize("path", ["$.a.b.c", "$.list[5]", "$.a[0]"])
def test_write_failures_are_result_path_match_failures(path: str) -> None:
    with pytest.raises(StatesRuntimeError) as caught:
        paths.write({"a": {"b": "text"}, "list": [1]}, path, 1)
    assert caught.value.error == "States.ResultPathMatchFailure"


def test_a_result_path_step_under_a_non_object_has_aws_wording() -> None:
    with pytest.raises(StatesRuntimeError) as caught:
        paths.write([{"messageId": "m"}], "$.normalized", 1)  # an SQS batch as the input: AWS's observed failure
    assert caught.value.cause == 'Unable to apply step "normalized" to input [{"messageId":"m"}]'
    with pytest.raises(StatesRuntimeError) as caught:
        paths.write({"a": {"b": "text"}}, "$.a.b.c", 1)
    assert caught.value.cause == 'Unable to apply step "c" to input {"a":{"b":"text"}}'
