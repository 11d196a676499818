"""Distributed Map's S3 data: `ItemReader` (the items) and `ResultWriter` (the results), via boto3.

`read_items(reader, resolve)` returns the Map's items from S3, as Step Functions reads them:
- `s3:getObject` with `ReaderConfig.InputType` JSON (an array), JSONL (one value per line),
  CSV (`CSVHeaderLocation` FIRST_ROW or GIVEN with `CSVHeaders`; `CSVDelimiter`; every value a
  string) or MANIFEST (an S3 Inventory `manifest.json`: one item per row of its CSV files, gzipped
  or not, keyed by its `fileSchema`);
- `s3:listObjectsV2` (`Bucket`, `Prefix`): one item per object, `{Etag, Key, LastModified (epoch
  seconds), Size, StorageClass}`.
`ReaderConfig.MaxItems` / `MaxItemsPath` keep the first n. Any failure is `States.ItemReaderFailed`.

`write_results(writer, results, failed, run)` writes AWS's export: `<Prefix>/<map run id>/`
`SUCCEEDED_0.json` (and `FAILED_0.json`), then `manifest.json` listing them, and returns the
Map's result `{"MapRunArn", "ResultWriterDetails": {"Bucket", "Key"}}`. The map run id is derived
from the joining invocation, so a duplicate join writes the same objects with the same bytes
(idempotent PUTs). Any failure is `States.ResultWriterFailed`.

Both use `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_S3` like every boto3 client (tests: moto server).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from unum_entry.asl import map_limits
from unum_entry.errors import StatesRuntimeError

Resolve = Callable[[Any, str], Any]  # (template or value, field name) -> resolved value
GET_OBJECT, LIST_OBJECTS = "s3:getObject", "s3:listObjectsV2"
INPUT_TYPES = ("JSON", "JSONL", "CSV", "MANIFEST")
DELIMITERS = {"COMMA": ",", "PIPE": "|", "SEMICOLON": ";", "SPACE": " ", "TAB": "\t"}
READ_FAILED, WRITE_FAILED = "States.ItemReaderFailed", "States.ResultWriterFailed"


def check_reader(reader: Any) -> tuple[str, str] | None:
    """A static problem of an ItemReader as (field, problem), or None."""
    if not isinstance(reader, Mapping):
        return "ItemReader", "expected an object with Resource and Parameters"
    resource = _action(reader.get("Resource"))
    if resource not in (GET_OBJECT, LIST_OBJECTS):
        return "ItemReader.Resource", (f"expected arn:aws:states:::{GET_OBJECT} or arn:aws:states:::{LIST_OBJECTS}, "
                                       f"found {reader.get('Resource')!r}")
    config = reader.get("ReaderConfig", {})
    if not isinstance(config, Mapping):
        return "ItemReader.ReaderConfig", "expected an object"
    if resource == GET_OBJECT and config.get("InputType") not in INPUT_TYPES:
        return "ItemReader.ReaderConfig.InputType", f"expected one of {', '.join(INPUT_TYPES)}, found {config.get('InputType')!r}"
    if config.get("CSVHeaderLocation", "FIRST_ROW") not in ("FIRST_ROW", "GIVEN"):
        return "ItemReader.ReaderConfig.CSVHeaderLocation", "expected FIRST_ROW or GIVEN"
    if config.get("CSVHeaderLocation") == "GIVEN" and not isinstance(config.get("CSVHeaders"), list):
        return "ItemReader.ReaderConfig.CSVHeaders", "CSVHeaderLocation GIVEN needs CSVHeaders, a list of names"
    if config.get("CSVDelimiter", "COMMA") not in DELIMITERS:
        return "ItemReader.ReaderConfig.CSVDelimiter", f"expected one of {', '.join(DELIMITERS)}"
    return None


def check_writer(writer: Any) -> tuple[str, str] | None:
    """A static problem of a ResultWriter as (field, problem), or None."""
    if not isinstance(writer, Mapping) or not ({"Resource", "WriterConfig"} & set(writer)):
        return "ResultWriter", "expected an object with Resource and Parameters (and/or WriterConfig)"
    if "Resource" in writer and _action(writer["Resource"]) != "s3:putObject":
        return "ResultWriter.Resource", f"expected arn:aws:states:::s3:putObject, found {writer['Resource']!r}"
    config = writer.get("WriterConfig", {})
    if config.get("Transformation", "NONE") not in ("NONE", "COMPACT", "FLATTEN"):
        return "ResultWriter.WriterConfig.Transformation", "expected NONE, COMPACT or FLATTEN"
    if config.get("OutputType", "JSON") not in ("JSON", "JSONL"):
        return "ResultWriter.WriterConfig.OutputType", "expected JSON or JSONL"
    return None


# ---- reading ----------------------------------------------------------------------------------

def read_items(reader: Mapping[str, Any], resolve: Resolve, *, s3: Any = None) -> list[Any]:
    """The items an ItemReader names (module docstring). Raises StatesRuntimeError."""
    params = resolve(reader.get("Parameters", reader.get("Arguments", {})), "ItemReader.Parameters") or {}
    config = dict(reader.get("ReaderConfig", {}))
    limit = map_limits.max_items(config, lambda key: resolve(config[key], f"ItemReader.ReaderConfig.{key}"))
    client = s3 if s3 is not None else s3_client()
    try:
        if _action(reader.get("Resource")) == LIST_OBJECTS:
            items = _list_objects(client, params, limit)
        else:
            items = _parse(_get(client, params), config, client)
    except StatesRuntimeError:
        raise
    except Exception as exc:  # boto3 errors, bad encodings: the reader failed (AWS: States.ItemReaderFailed)
        raise StatesRuntimeError(READ_FAILED, f"{_describe(exc)}") from exc
    return items[:limit] if limit else items


def _get(client: Any, params: Mapping[str, Any]) -> bytes:
    wanted = {k: params[k] for k in ("Bucket", "Key", "VersionId") if k in params}
    body = client.get_object(**wanted)["Body"].read()
    return gzip.decompress(body) if str(params.get("Key", "")).endswith(".gz") else body


def _parse(data: bytes, config: Mapping[str, Any], client: Any) -> list[Any]:
    kind = config.get("InputType")
    text = data.decode("utf-8-sig")
    if kind == "JSON":
        array = json.loads(text)
        if not isinstance(array, list):
            raise StatesRuntimeError(READ_FAILED, f"the JSON object is not an array, found {type(array).__name__}")
        return array
    if kind == "JSONL":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if kind == "CSV":
        delimiter = DELIMITERS[config.get("CSVDelimiter", "COMMA")]
        rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
        headers: list[Any] = (list(config.get("CSVHeaders") or []) if config.get("CSVHeaderLocation") == "GIVEN"
                              else (rows.pop(0) if rows else []))
        if len(set(headers)) < len(headers):
            raise StatesRuntimeError(READ_FAILED, "CSV headers cannot contain duplicates.")
        # AWS: a row shorter than the header gets "" for the missing columns
        return [{h: row[i] if i < len(row) else "" for i, h in enumerate(headers)} for row in rows if row]
    manifest = json.loads(text)  # MANIFEST: an S3 Inventory manifest
    schema = [name.strip() for name in str(manifest.get("fileSchema", "Bucket, Key")).split(",")]
    bucket = str(manifest.get("destinationBucket", "")).removeprefix("arn:aws:s3:::")
    items: list[Any] = []
    for file in manifest.get("files", []):
        body = _get(client, {"Bucket": bucket, "Key": file["key"]})
        items.extend(dict(zip(schema, row)) for row in csv.reader(io.StringIO(body.decode("utf-8"))) if row)
    return items


def _list_objects(client: Any, params: Mapping[str, Any], limit: int | None) -> list[Any]:
    wanted = {k: v for k, v in params.items() if k in ("Bucket", "Prefix", "Delimiter", "StartAfter", "RequestPayer")}
    items: list[Any] = []
    for page in client.get_paginator("list_objects_v2").paginate(**wanted):
        for obj in page.get("Contents", []):
            items.append({"Etag": obj.get("ETag"), "Key": obj["Key"], "LastModified": int(obj["LastModified"].timestamp()),
                          "Size": obj.get("Size"), "StorageClass": obj.get("StorageClass", "STANDARD")})
        if limit and len(items) >= limit:
            break
    return items


# ---- writing ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class MapRun:
    """Who writes: the state machine's ARN, the Map's name, the joining invocation (for the id),
    and the Map's `Label`, which names the map run in its ARN instead of the state's name (AWS)."""

    state_machine_arn: str
    map_name: str
    invocation: str
    label: str | None = None

    @property
    def id(self) -> str:
        digest = hashlib.sha256(f"{self.invocation}/{self.map_name}".encode()).hexdigest()
        return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"

    @property
    def arn(self) -> str:
        base = self.state_machine_arn.replace(":stateMachine:", ":mapRun:", 1)
        return f"{base}/{self.label or self.map_name}:{self.id}"


def write_results(writer: Mapping[str, Any], results: Sequence[Any], failed: Sequence[int], run: MapRun,
                  resolve: Resolve, *, s3: Any = None) -> Any:
    """Export the Map's results (module docstring); returns the Map's result."""
    config = writer.get("WriterConfig", {})
    transformation = config.get("Transformation", "NONE")
    if "Resource" not in writer:  # WriterConfig only: format the results, write nothing
        return _transformed(results, failed, transformation if "Transformation" in config else "COMPACT")
    params = resolve(writer.get("Parameters", writer.get("Arguments", {})), "ResultWriter.Parameters") or {}
    bucket, prefix = params.get("Bucket"), str(params.get("Prefix", "")).strip("/")
    if not isinstance(bucket, str) or not bucket:
        raise StatesRuntimeError(WRITE_FAILED, f"ResultWriter needs a Bucket, found {bucket!r}")
    base = f"{prefix}/{run.id}" if prefix else run.id
    jsonl = config.get("OutputType") == "JSONL"
    failed_set = set(failed)
    succeeded = [(i, r) for i, r in enumerate(results) if i not in failed_set]
    failures = [(i, r) for i, r in enumerate(results) if i in failed_set]
    client = s3 if s3 is not None else s3_client()
    files: dict[str, list[dict[str, Any]]] = {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
    try:
        for status, entries in (("SUCCEEDED", succeeded), ("FAILED", failures)):
            if not entries and status == "FAILED":
                continue
            body = _render([_entry(run, i, r, status, transformation) for i, r in entries], jsonl, transformation)
            key = f"{base}/{status}_0.json"
            client.put_object(Bucket=bucket, Key=key, Body=body)
            files[status].append({"Key": key, "Size": len(body)})
        manifest = {"DestinationBucket": bucket, "MapRunArn": run.arn, "ResultFiles": files}
        client.put_object(Bucket=bucket, Key=f"{base}/manifest.json", Body=json.dumps(manifest).encode())
    except Exception as exc:  # boto3 errors: the writer failed (AWS: States.ResultWriterFailed)
        raise StatesRuntimeError(WRITE_FAILED, _describe(exc)) from exc
    return {"MapRunArn": run.arn, "ResultWriterDetails": {"Bucket": bucket, "Key": f"{base}/manifest.json"}}


def _entry(run: MapRun, index: int, result: Any, status: str, transformation: str) -> Any:
    if status == "SUCCEEDED" and transformation in ("COMPACT", "FLATTEN"):
        return result
    name = f"{run.id}_{index}"
    entry: dict[str, Any] = {"ExecutionArn": f"{run.arn.replace(':mapRun:', ':execution:', 1)}:{name}",
                             "Name": name, "StateMachineArn": run.arn, "Status": status,
                             "RedriveCount": 0, "RedriveStatus": "NOT_REDRIVABLE"}
    if status == "SUCCEEDED":
        entry.update(Output=json.dumps(result), OutputDetails={"Included": True})
    else:
        error = result if isinstance(result, Mapping) else {}
        entry.update(Error=error.get("Error"), Cause=error.get("Cause"))
    return entry


def _render(entries: list[Any], jsonl: bool, transformation: str) -> bytes:
    if transformation == "FLATTEN":
        entries = [x for e in entries for x in (e if isinstance(e, list) else [e])]
    if jsonl:
        return "".join(json.dumps(e) + "\n" for e in entries).encode()
    return json.dumps(entries).encode()


def _transformed(results: Sequence[Any], failed: Sequence[int], transformation: str) -> list[Any]:
    if transformation == "FLATTEN":
        return [x for r in results for x in (r if isinstance(r, list) else [r])]
    return list(results)


def s3_client() -> Any:
    import boto3  # lazy: only Maps with ItemReader / ResultWriter need it

    from unum_entry.asl.integrations.call import region
    return boto3.client("s3", region_name=region())


def _action(resource: Any) -> str | None:
    if not isinstance(resource, str) or ":states:::" not in resource:
        return None
    return resource.split(":states:::", 1)[1]


def _describe(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping) and "Error" in response:
        err = response["Error"]
        return f"{err.get('Code')}: {err.get('Message')}"
    return f"{type(exc).__name__}: {exc}"
