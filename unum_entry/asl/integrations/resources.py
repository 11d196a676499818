"""Which service integration a Task `Resource` names, and why one is refused.

Pure string work (no boto3): the compiler, the deploy template and the runtime share it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from unum_entry.errors import TaskFailed, UnumError

__all__ = ["TaskFailed"]  # its home is unum_entry.errors; integrations raise it from here too

CALLBACK = ".waitForTaskToken"
SYNC = (".sync", ".sync:2")
_ARN = re.compile(r"^arn:aws[a-z-]*:states:::(?P<rest>.+)$")


@dataclass(frozen=True)
class Optimized:
    """How one optimized integration maps onto boto3, and AWS's names for its errors."""

    boto_service: str
    operation: str            # boto3 method name
    error_prefix: str         # `DynamoDB` in `DynamoDB.ConditionalCheckFailedException`
    java_service: str         # the `Service:` of AWS's error cause (its Java SDK v1 client name)
    sdk_metadata: bool        # the result carries SdkHttpMetadata / SdkResponseMetadata
    callback: bool            # AWS supports `.waitForTaskToken` on it
    iam_action: str


OPTIMIZED: dict[tuple[str, str], Optimized] = {
    ("dynamodb", "getItem"): Optimized("dynamodb", "get_item", "DynamoDB", "AmazonDynamoDBv2", True, False, "dynamodb:GetItem"),
    ("dynamodb", "putItem"): Optimized("dynamodb", "put_item", "DynamoDB", "AmazonDynamoDBv2", True, False, "dynamodb:PutItem"),
    ("dynamodb", "updateItem"): Optimized("dynamodb", "update_item", "DynamoDB", "AmazonDynamoDBv2", True, False, "dynamodb:UpdateItem"),
    ("dynamodb", "deleteItem"): Optimized("dynamodb", "delete_item", "DynamoDB", "AmazonDynamoDBv2", True, False, "dynamodb:DeleteItem"),
    ("sqs", "sendMessage"): Optimized("sqs", "send_message", "SQS", "AmazonSQS", True, True, "sqs:SendMessage"),
    ("sns", "publish"): Optimized("sns", "publish", "SNS", "AmazonSNS", True, True, "sns:Publish"),
    ("events", "putEvents"): Optimized("events", "put_events", "EventBridge", "AmazonEventBridge", False, True, "events:PutEvents"),
}


@dataclass(frozen=True)
class Integration:
    """A parsed integration resource: `service:action` (optimized) or `aws-sdk:service:action`."""

    resource: str
    service: str
    action: str
    sdk: bool                 # the generic aws-sdk integration
    callback: bool            # `.waitForTaskToken`: the Task waits for SendTaskSuccess/Failure

    @property
    def optimized(self) -> Optimized | None:
        return None if self.sdk else OPTIMIZED.get((self.service, self.action))


def parse(resource: str) -> Integration | None:
    """The integration `resource` names, or None when it is not one unum runs (a Lambda
    function, `lambda:invoke`, or something `unsupported_reason` explains)."""
    match = _ARN.match(resource) if isinstance(resource, str) else None
    if match is None:
        return None
    rest = match.group("rest")
    callback = rest.endswith(CALLBACK)
    if callback:
        rest = rest[: -len(CALLBACK)]
    parts = rest.split(":")
    if parts[0] == "aws-sdk":
        if len(parts) != 3 or not parts[1] or not re.fullmatch(r"[a-z][A-Za-z0-9]*", parts[2] or ""):
            return None
        return Integration(resource, parts[1], parts[2], sdk=True, callback=callback)
    if len(parts) != 2 or (parts[0], parts[1]) not in OPTIMIZED:
        return None
    spec = OPTIMIZED[(parts[0], parts[1])]
    if callback and not spec.callback:
        return None
    return Integration(resource, parts[0], parts[1], sdk=False, callback=callback)


def unsupported_reason(resource: str) -> str | None:
    """Why a `Resource` that is neither a Lambda function nor a supported integration cannot
    run on unum (one sentence for the compile error), or None when it can."""
    if not isinstance(resource, str):
        return "expected a string"
    if parse(resource) is not None:
        return None
    if re.match(r"^arn:aws[a-z-]*:states:[^:]*:[^:]*:activity:", resource):
        return None  # an activity Task: unum_entry.asl.activities
    match = _ARN.match(resource)
    if match is None:
        return None
    rest = match.group("rest")
    if rest.startswith("lambda:invoke"):
        return None  # the Lambda path decides (lambda:invoke and lambda:invoke.waitForTaskToken)
    if rest.startswith("states:startExecution"):
        return ("a nested state machine runs on unum with .sync, .sync:2 or fire-and-forget (compiled with its "
                "parent, found next to it by name, named literally); the .waitForTaskToken form would start an "
                "execution that nothing joins, so it is not supported")
    if any(rest.endswith(suffix) for suffix in SYNC):
        return ("'.sync' (run a job) needs a poller that watches the job until it ends, a coordinator that unum "
                "does not have; start the job with the request-response form and poll in a Task loop with Wait")
    if rest.endswith(CALLBACK):
        base = rest[: -len(CALLBACK)]
        if tuple(base.split(":")) in OPTIMIZED:
            return f"AWS does not support .waitForTaskToken on {base}"
    if rest.startswith("aws-sdk:"):
        return "expected arn:aws:states:::aws-sdk:SERVICE:ACTION with a camelCase action"
    known = ", ".join(f"{s}:{a}" for s, a in OPTIMIZED)
    return (f"not an integration unum runs (optimized: {known}; any other AWS API through "
            "arn:aws:states:::aws-sdk:SERVICE:ACTION)")
