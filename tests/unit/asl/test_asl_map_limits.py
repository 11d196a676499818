"""A Map's run-time numeric fields (issue 20), checked as AWS checks them, through the state runner:
MaxConcurrencyPath, ToleratedFailureCountPath / PercentagePath and the ItemBatcher's paths fail
the state with States.Runtime and AWS's cause; the CSV reader's rows and headers as AWS reads them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from unum_entry.asl import item_io
from unum_entry.asl.runner import Fragment, Services, run
from unum_entry.errors import StatesRuntimeError

pytestmark = pytest.mark.unit

ITERATOR = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}


def start_map(fields: dict[str, Any], event: Any) -> dict[str, Any]:
    states = {"M": {"Type": "Map", "ItemsPath": "$.items", "ItemProcessor": ITERATOR, "End": True, **fields}}
    fragment = Fragment(function="M", head="M", join=False, in_branch=False, states=states)
    context = SimpleNamespace(workflow_id="wf", invocation="c-1", attempt=0, index=0, size=1, iteration=0)
    return run(fragment, None, event, context, Services(sleep=lambda s: None))


@pytest.mark.parametrize("fields, value, cause", [
    ({"ToleratedFailureCountPath": "$.v"}, "x",
     'The ToleratedFailureCountPath field refers to value "x" which is not a valid integer: $.v'),
    ({"ToleratedFailureCountPath": "$.v"}, 1.5,
     'The ToleratedFailureCountPath field refers to value "1.5" which is not a valid integer: $.v'),
    ({"ToleratedFailureCountPath": "$.v"}, -1, "ToleratedFailureCount cannot be negative."),
    ({"ToleratedFailurePercentagePath": "$.v"}, {"a": 1},
     'The ToleratedFailurePercentagePath field refers to value "{"a":1}" which is not a valid float: $.v'),
    ({"ToleratedFailurePercentagePath": "$.v"}, 100.5, "ToleratedFailurePercentage must be between 0 and 100."),
    ({"ToleratedFailurePercentagePath": "$.v"}, -1, "ToleratedFailurePercentage must be between 0 and 100."),
    ({"MaxConcurrencyPath": "$.v"}, "many",
     'The MaxConcurrencyPath field refers to value "many" which is not a valid integer: $.v'),
    ({"MaxConcurrencyPath": "$.v"}, -2, "Expected non-negative integer for MaxConcurrency, got '-2' instead."),
    ({"ItemBatcher": {"MaxItemsPerBatchPath": "$.v"}}, True,
     'The MaxItemsPerBatchPath field refers to value "true" which is not a valid integer: $.v'),
    ({"ItemBatcher": {"MaxInputBytesPerBatchPath": "$.v"}}, -5, "MaxInputBytesPerBatch cannot be negative."),
])
def test_a_bad_run_time_value_fails_the_map_with_states_runtime(fields: dict[str, Any], value: Any, cause: str) -> None:
    decision = start_map({**fields, "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "M"}]},
                         {"items": [1, 2], "v": value})
    entered = "An error occurred while executing the state 'M' (entered at the event id #2). "  # AWS's prefix
    assert decision == {"__next__": "__fail__", "error": {"Error": "States.Runtime", "Cause": entered + cause}}


@pytest.mark.parametrize("fields, value", [
    ({"ToleratedFailureCountPath": "$.v"}, "2"),          # a string holding an integer: AWS parses it
    ({"ToleratedFailurePercentagePath": "$.v"}, 12.5),
    ({"MaxConcurrencyPath": "$.v"}, 1),
    ({"ItemBatcher": {"MaxItemsPerBatchPath": "$.v"}}, 1),
])
def test_a_good_value_starts_the_iterations(fields: dict[str, Any], value: Any) -> None:
    decision = start_map(fields, {"items": [1, 2], "v": value})
    assert decision["__next__"] == "M" and len(decision["items"]) == 2


def csv_items(body: str, **config: Any) -> list[Any]:
    return item_io._parse(body.encode(), {"InputType": "CSV", **config}, client=None)


def test_a_short_csv_row_gets_empty_strings_for_the_missing_columns() -> None:
    assert csv_items("a,b,c\n1,2,3\n4\n") == [{"a": "1", "b": "2", "c": "3"}, {"a": "4", "b": "", "c": ""}]


def test_duplicate_csv_headers_fail_the_reader() -> None:
    with pytest.raises(StatesRuntimeError) as given:
        csv_items("1,2\n", CSVHeaderLocation="GIVEN", CSVHeaders=["x", "x"])
    assert (given.value.error, given.value.cause) == ("States.ItemReaderFailed", "CSV headers cannot contain duplicates.")
    with pytest.raises(StatesRuntimeError) as first_row:
        csv_items("x,y,x\n1,2,3\n")
    assert first_row.value.error == "States.ItemReaderFailed"


@pytest.mark.parametrize("config, cause", [
    ({"MaxItemsPath": "$.n"}, "field MaxItems must be positive"),
    ({"MaxItems": -1}, "field MaxItems must be positive"),
])
def test_a_negative_max_items_is_item_reader_failed(config: dict[str, Any], cause: str) -> None:
    reader = {"Resource": "arn:aws:states:::s3:getObject", "ReaderConfig": {"InputType": "JSON", **config},
              "Parameters": {"Bucket": "b", "Key": "k"}}

    def resolve(value: Any, field: str) -> Any:
        return -3 if value == "$.n" else value
    with pytest.raises(StatesRuntimeError) as failed:
        item_io.read_items(reader, resolve, s3=object())  # fails before any S3 call
    assert (failed.value.error, failed.value.cause) == ("States.ItemReaderFailed", cause)


def test_the_map_run_arn_is_named_by_the_label() -> None:
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:sm"
    assert item_io.MapRun(arn, "Each", "inv", "ByLabel").arn.startswith(
        "arn:aws:states:us-east-1:123456789012:mapRun:sm/ByLabel:")
    assert "/Each:" in item_io.MapRun(arn, "Each", "inv").arn
