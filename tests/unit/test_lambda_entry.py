"""builder.serve.lambda_entry: a function URL event becomes a checked Step Functions call and
its answer the function URL response; refusals are AWS's error shape."""

from __future__ import annotations

import base64
import json
from typing import Any

from builder.serve.lambda_entry import answer


class FakeStates:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, op: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((op, params))
        return {"stateMachines": []}


def event(target: str, body: str, *, b64: bool = False, method: str = "POST") -> dict[str, Any]:
    return {"headers": {"x-amz-target": target, "content-type": "application/x-amz-json-1.0"},
            "requestContext": {"http": {"method": method}},
            "body": base64.b64encode(body.encode()).decode() if b64 else body, "isBase64Encoded": b64}


def test_call_and_render() -> None:
    states = FakeStates()
    out = answer(event("AWSStepFunctions.ListStateMachines", "{}"), states)
    assert out["statusCode"] == 200
    assert json.loads(out["body"]) == {"stateMachines": []}
    assert states.calls == [("ListStateMachines", {})]


def test_base64_body() -> None:
    states = FakeStates()
    out = answer(event("AWSStepFunctions.ListStateMachines", '{"maxResults": 5}', b64=True), states)
    assert out["statusCode"] == 200
    assert states.calls[0][1].get("maxResults") == 5


def test_refusals() -> None:
    states = FakeStates()
    bad_target = answer(event("Nope.X", "{}"), states)
    assert bad_target["statusCode"] == 400 and "UnknownOperation" in bad_target["body"]
    bad_json = answer(event("AWSStepFunctions.ListStateMachines", "{not json"), states)
    assert bad_json["statusCode"] == 400 and "SerializationException" in bad_json["body"]
    assert answer(event("AWSStepFunctions.ListStateMachines", "{}", method="GET"), states)["statusCode"] == 400
    assert states.calls == []


def test_bug_is_500_without_traceback() -> None:
    class Broken:
        def call(self, op: str, params: dict[str, Any]) -> dict[str, Any]:
            raise RuntimeError("boom")

    out = answer(event("AWSStepFunctions.ListStateMachines", "{}"), Broken())
    assert out["statusCode"] == 500 and "Traceback" not in out["body"] and "boom" not in out["body"]
