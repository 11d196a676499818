"""The IAM permissions a compiled function needs for its integrations (the deploy template).

Exactly the actions its Task (and Map ItemReader / ResultWriter) call, on the resources the
definition names literally; a resource chosen at run time (`TableName.$`, a JSONata expression)
can only be granted on "*". ARNs are CloudFormation `Fn::Sub` strings (`${AWS::Region}` ...).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from unum_entry.asl.integrations.resources import parse

PARTITION = "arn:${AWS::Partition}"
HERE = "${AWS::Region}:${AWS::AccountId}"
# aws-sdk service names whose IAM prefix differs
IAM_PREFIX = {"sfn": "states", "eventbridge": "events", "cloudwatchlogs": "logs", "acmpca": "acm-pca",
              "elasticloadbalancingv2": "elasticloadbalancing"}


def function_statements(folder: str | Path) -> list[dict[str, Any]]:
    """The statements of one compiled function folder (empty when it calls no integration)."""
    path = Path(folder) / "unum-asl.json"
    if not path.is_file():
        return []
    fragment = json.loads(path.read_text())
    states: Mapping[str, Any] = fragment.get("states", {})
    out: list[dict[str, Any]] = []
    task = fragment.get("task")
    if task and task in states:
        out.extend(task_statements(states[task]))
    for state in states.values():
        if state.get("Type") == "Map":
            out.extend(map_statements(state))
    return _merged(out)


def started_functions(folder: str | Path) -> set[str]:
    """The functions a compiled function folder invokes outside its IR: the entry of the child a
    fire-and-forget startExecution Task starts (unum_entry/asl/detached.py); the deploy template
    grants it lambda:InvokeFunction on them."""
    from unum_entry.asl.detached import MARK

    path = Path(folder) / "unum-asl.json"
    if not path.is_file():
        return set()
    fragment = json.loads(path.read_text())
    marker = fragment.get("states", {}).get(fragment.get("task") or "", {}).get(MARK)
    return {str(marker["entry"])} if isinstance(marker, Mapping) and marker.get("entry") else set()


def task_statements(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    integration = parse(str(state.get("Resource", "")))
    if integration is None:
        return []
    params = state.get("Parameters", state.get("Arguments", {}))
    params = params if isinstance(params, Mapping) else {}
    spec = integration.optimized
    if spec is None:
        prefix = IAM_PREFIX.get(integration.service, integration.service)
        action = f"{prefix}:{integration.action[0].upper()}{integration.action[1:]}"
        return [_allow(action, "*")]
    if integration.service == "dynamodb":
        return [_allow(spec.iam_action, _arn_or(params, "TableName", lambda v: f"{PARTITION}:dynamodb:{HERE}:table/{v}"))]
    if integration.service == "sqs":
        return [_allow(spec.iam_action, _arn_or(params, "QueueUrl", _queue_arn))]
    if integration.service == "sns":
        return [_allow(spec.iam_action, _arn_or(params, "TopicArn", lambda v: v))]
    buses = []
    entries = params.get("Entries")
    for entry in entries if isinstance(entries, list) else [None]:
        entry = entry if isinstance(entry, Mapping) else {}
        if "EventBusName" not in entry and not any(k.startswith("EventBusName") for k in entry):
            entry = {**entry, "EventBusName": "default"}
        buses.append(_arn_or(entry, "EventBusName", lambda v: f"{PARTITION}:events:{HERE}:event-bus/{v}"))
    if not isinstance(entries, list):
        buses = ["*"]
    return [_allow(spec.iam_action, bus) for bus in buses]


def map_statements(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """s3:GetObject / s3:ListBucket for an ItemReader, s3:PutObject for a ResultWriter."""
    out = []
    reader = state.get("ItemReader")
    if isinstance(reader, Mapping):
        params = reader.get("Parameters", reader.get("Arguments", {})) or {}
        bucket = _literal(params, "Bucket")
        if str(reader.get("Resource", "")).endswith("listObjectsV2"):
            out.append(_allow("s3:ListBucket", f"{PARTITION}:s3:::{bucket}" if bucket else "*"))
        else:
            key = _literal(params, "Key")
            manifest = (reader.get("ReaderConfig") or {}).get("InputType") == "MANIFEST"
            target = f"{PARTITION}:s3:::{bucket}/{'*' if manifest or not key else key}" if bucket else "*"
            out.append(_allow("s3:GetObject", target))
    writer = state.get("ResultWriter")
    if isinstance(writer, Mapping) and ("Resource" in writer):
        params = writer.get("Parameters", writer.get("Arguments", {})) or {}
        bucket = _literal(params, "Bucket")
        prefix = _literal(params, "Prefix") or ""
        out.append(_allow("s3:PutObject", f"{PARTITION}:s3:::{bucket}/{prefix}*" if bucket else "*"))
    return out


def _literal(params: Mapping[str, Any], key: str) -> str | None:
    value = params.get(key) if isinstance(params, Mapping) else None
    if isinstance(value, str) and not (value.startswith("{%") and value.endswith("%}")):
        return value
    return None


def _arn_or(params: Mapping[str, Any], key: str, make) -> str:
    value = _literal(params, key)
    if value is None:
        return "*"
    return value if value.startswith("arn:") else make(value)


def _queue_arn(url: str) -> str:
    parsed = urlparse(url)
    parts = [p for p in parsed.path.split("/") if p]
    if len(parts) == 2 and parsed.netloc.startswith("sqs."):
        region = parsed.netloc.split(".")[1]
        return f"{PARTITION}:sqs:{region}:{parts[0]}:{parts[1]}"
    return f"{PARTITION}:sqs:{HERE}:{parts[-1]}" if parts else "*"


def _allow(action: str, resource: str) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": [action], "Resource": resource}


def _merged(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One statement per resource, its actions sorted; no duplicates."""
    by_resource: dict[str, set[str]] = {}
    for st in statements:
        by_resource.setdefault(st["Resource"], set()).update(st["Action"])
    return [{"Effect": "Allow", "Action": sorted(actions),
             "Resource": {"Fn::Sub": res} if "${" in res else res} for res, actions in by_resource.items()]
