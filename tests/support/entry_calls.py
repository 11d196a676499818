"""Step Functions calls made through the API's function entry (builder.serve.lambda_entry.answer),
as a Lambda function URL (payload 2.0) or the Cloud Run entry hands them on: the front-door tests
of both clouds drive StatesApi this way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from builder.serve.lambda_entry import answer

MACHINE = Path(__file__).parent / "front_door"  # the state machine (and its functions) both deploy
ROLE = "arn:aws:iam::123456789012:role/unum"


def entry_event(operation: str, body: dict[str, Any]) -> dict[str, Any]:
    """A function URL event carrying the AWS JSON 1.0 request `operation` with `body`."""
    return {"version": "2.0", "headers": {"x-amz-target": f"AWSStepFunctions.{operation}",
                                          "content-type": "application/x-amz-json-1.0"},
            "requestContext": {"http": {"method": "POST"}}, "body": json.dumps(body), "isBase64Encoded": False}


class Api:
    """Calls through `answer`, as the API's entry makes them: `api(op, **body)` is (status, answer);
    `api.ok(op, **body)` asserts 200."""

    def __init__(self, states: Any) -> None:
        self.states = states

    def __call__(self, operation: str, **body: Any) -> tuple[int, dict[str, Any]]:
        response = answer(entry_event(operation, body), self.states)
        return response["statusCode"], json.loads(response["body"])

    def ok(self, operation: str, **body: Any) -> dict[str, Any]:
        status, answered = self(operation, **body)
        assert status == 200, answered
        return answered
