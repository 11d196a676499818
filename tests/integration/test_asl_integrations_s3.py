"""Distributed Map over S3 through the real CLI (`python -m builder run statemachine.json`),
boto3 against moto server: ItemReader (JSON array, JSONL, CSV with a header row or given
headers, an S3 Inventory manifest, listObjectsV2, MaxItems) and ResultWriter (AWS's
manifest.json + SUCCEEDED_0.json / FAILED_0.json export)."""

from __future__ import annotations

import gzip
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_asl_integrations import AWS, client, run

pytestmark = pytest.mark.integration


@pytest.fixture
def bucket(moto_server):
    name = f"it-{uuid.uuid4().hex[:10]}"
    s3 = client("s3", moto_server.endpoint)
    s3.create_bucket(Bucket=name)
    return {"name": name, "s3": s3, "endpoint": moto_server.endpoint}


def distributed_map(reader: dict[str, Any], processor: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"StartAt": "Each", "States": {"Each": {
        "Type": "Map", "ItemReader": reader, "End": True, **extra,
        "ItemProcessor": {"ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}, **processor}}}}


DOUBLE = {"StartAt": "Check", "States": {
    "Check": {"Type": "Choice", "Choices": [{"Variable": "$.bad", "IsPresent": True, "Next": "Bad"}], "Default": "Double"},
    "Bad": {"Type": "Fail", "Error": "Item.Bad", "Cause": "a bad item"},
    "Double": {"Type": "Pass", "Parameters": {"double.$": "States.MathAdd($.n, $.n)"}, "End": True}}}
ECHO = {"StartAt": "Echo", "States": {"Echo": {"Type": "Pass", "End": True}}}


def test_json_items_from_s3_and_results_exported_as_aws_does(bucket, tmp_path: Path) -> None:
    s3, name = bucket["s3"], bucket["name"]
    s3.put_object(Bucket=name, Key="in/items.json", Body=json.dumps([{"n": 1}, {"n": 2}, {"n": 3, "bad": True}]))
    definition = distributed_map(
        {"Resource": f"{AWS}s3:getObject", "ReaderConfig": {"InputType": "JSON"},
         "Parameters": {"Bucket": name, "Key.$": "$.key"}}, DOUBLE, ToleratedFailureCount=1,
        ResultWriter={"Resource": f"{AWS}s3:putObject", "Parameters": {"Bucket": name, "Prefix": "out"}})
    proc = run(definition, tmp_path, bucket["endpoint"], {"key": "in/items.json"})

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"MapRunArn", "ResultWriterDetails"} and ":mapRun:" in out["MapRunArn"]
    details = out["ResultWriterDetails"]
    assert details["Bucket"] == name and details["Key"].startswith("out/") and details["Key"].endswith("/manifest.json")
    manifest = json.loads(s3.get_object(Bucket=name, Key=details["Key"])["Body"].read())
    assert manifest["DestinationBucket"] == name and manifest["MapRunArn"] == out["MapRunArn"]
    assert manifest["ResultFiles"]["PENDING"] == [] and len(manifest["ResultFiles"]["SUCCEEDED"]) == 1
    succeeded = json.loads(s3.get_object(Bucket=name, Key=manifest["ResultFiles"]["SUCCEEDED"][0]["Key"])["Body"].read())
    assert [json.loads(e["Output"]) for e in succeeded] == [{"double": 2}, {"double": 4}]
    assert all(e["Status"] == "SUCCEEDED" for e in succeeded)
    failed = json.loads(s3.get_object(Bucket=name, Key=manifest["ResultFiles"]["FAILED"][0]["Key"])["Body"].read())
    assert [(e["Status"], e["Error"], e["Cause"]) for e in failed] == [("FAILED", "Item.Bad", "a bad item")]


def test_csv_with_a_header_row_and_max_items(bucket, tmp_path: Path) -> None:
    s3, name = bucket["s3"], bucket["name"]
    s3.put_object(Bucket=name, Key="rows.csv", Body="id,qty\na,1\nb,2\nc,3\n")
    definition = distributed_map({"Resource": f"{AWS}s3:getObject",
                                  "ReaderConfig": {"InputType": "CSV", "CSVHeaderLocation": "FIRST_ROW", "MaxItems": 2},
                                  "Parameters": {"Bucket": name, "Key": "rows.csv"}}, ECHO)
    proc = run(definition, tmp_path, bucket["endpoint"], {})

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [{"id": "a", "qty": "1"}, {"id": "b", "qty": "2"}]


def test_csv_with_given_headers_jsonl_and_list_objects(bucket, tmp_path: Path) -> None:
    s3, name = bucket["s3"], bucket["name"]
    s3.put_object(Bucket=name, Key="data/rows.csv", Body="a;1\nb;2\n")
    s3.put_object(Bucket=name, Key="data/lines.jsonl", Body='{"x": 1}\n{"x": 2}\n')
    given = distributed_map({"Resource": f"{AWS}s3:getObject",
                             "ReaderConfig": {"InputType": "CSV", "CSVHeaderLocation": "GIVEN", "CSVDelimiter": "SEMICOLON",
                                              "CSVHeaders": ["id", "qty"]},
                             "Parameters": {"Bucket": name, "Key": "data/rows.csv"}}, ECHO)
    lines = distributed_map({"Resource": f"{AWS}s3:getObject", "ReaderConfig": {"InputType": "JSONL"},
                             "Parameters": {"Bucket": name, "Key": "data/lines.jsonl"}}, ECHO)
    listed = distributed_map({"Resource": f"{AWS}s3:listObjectsV2", "Parameters": {"Bucket": name, "Prefix": "data/"}},
                             ECHO, ItemSelector={"key.$": "$$.Map.Item.Value.Key", "size.$": "$$.Map.Item.Value.Size"})

    assert json.loads(run(given, tmp_path / "g", bucket["endpoint"], {}).stdout) == [{"id": "a", "qty": "1"}, {"id": "b", "qty": "2"}]
    assert json.loads(run(lines, tmp_path / "l", bucket["endpoint"], {}).stdout) == [{"x": 1}, {"x": 2}]
    assert json.loads(run(listed, tmp_path / "o", bucket["endpoint"], {}).stdout) == [
        {"key": "data/lines.jsonl", "size": 18}, {"key": "data/rows.csv", "size": 8}]


def test_an_s3_inventory_manifest(bucket, tmp_path: Path) -> None:
    s3, name = bucket["s3"], bucket["name"]
    s3.put_object(Bucket=name, Key="inv/data/part-0.csv.gz", Body=gzip.compress(b'"src","k1","10"\n"src","k2","20"\n'))
    manifest = {"sourceBucket": "src", "destinationBucket": f"arn:aws:s3:::{name}", "fileFormat": "CSV",
                "fileSchema": "Bucket, Key, Size", "files": [{"key": "inv/data/part-0.csv.gz", "size": 40}]}
    s3.put_object(Bucket=name, Key="inv/manifest.json", Body=json.dumps(manifest))
    definition = distributed_map({"Resource": f"{AWS}s3:getObject", "ReaderConfig": {"InputType": "MANIFEST"},
                                  "Parameters": {"Bucket": name, "Key": "inv/manifest.json"}}, ECHO)
    proc = run(definition, tmp_path, bucket["endpoint"], {})

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [{"Bucket": "src", "Key": "k1", "Size": "10"}, {"Bucket": "src", "Key": "k2", "Size": "20"}]


def test_a_missing_object_is_states_item_reader_failed_and_can_be_caught(bucket, tmp_path: Path) -> None:
    definition = distributed_map({"Resource": f"{AWS}s3:getObject", "ReaderConfig": {"InputType": "JSON"},
                                  "Parameters": {"Bucket": bucket["name"], "Key": "nope.json"}}, ECHO,
                                 Catch=[{"ErrorEquals": ["States.ItemReaderFailed"], "Next": "Caught"}])
    definition["States"]["Caught"] = {"Type": "Pass", "End": True}
    proc = run(definition, tmp_path, bucket["endpoint"], {})

    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["Error"] == "States.ItemReaderFailed" and "NoSuchKey" in out["Cause"]


def test_a_bad_reader_is_rejected_at_compile_time(tmp_path: Path) -> None:
    definition = distributed_map({"Resource": f"{AWS}s3:getObject", "ReaderConfig": {"InputType": "XML"},
                                  "Parameters": {"Bucket": "b", "Key": "k"}}, ECHO)
    proc = run(definition, tmp_path, "http://127.0.0.1:9", {})

    assert proc.returncode == 2
    assert "Each" in proc.stderr and "ItemReader.ReaderConfig.InputType" in proc.stderr and "Traceback" not in proc.stderr
