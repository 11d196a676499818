"""Step Functions service integrations run by the compiled function itself, through boto3.

A Task whose `Resource` is an integration ARN has no user code: its function's "handler" is the
integration call. `parse(resource)` says which integration a resource names (None: not one);
`handler_for(resource)` builds the callable the state runner calls with the Task's effective
parameters (Parameters / Arguments resolved). It returns the service's result in Step Functions'
shape and raises `TaskFailed` with Step Functions' error name (`DynamoDB.ConditionalCheckFailed
Exception`, `S3.NoSuchKeyException`, ...) and cause, so Retry and Catch see what they see on AWS.

Supported (docs/step-functions.md, "Service integrations"):
- optimized: `dynamodb:getItem|putItem|updateItem|deleteItem`, `sqs:sendMessage`, `sns:publish`,
  `events:putEvents` (each also `.waitForTaskToken` where AWS supports it);
- `aws-sdk:SERVICE:ACTION`: any boto3 operation, the SDK response with AWS's key casing.

Endpoints come from the environment as boto3 reads them (`AWS_ENDPOINT_URL`,
`AWS_ENDPOINT_URL_<SERVICE>`), so tests and local runs talk to moto server over HTTP.
"""

from __future__ import annotations

from unum_entry.asl.integrations.resources import (CALLBACK, Integration, TaskFailed, parse, unsupported_reason)


def handler_for(resource: str):
    """The callable `(parameters, context) -> result` of an integration resource. Raises
    ValueError when `resource` is not a supported integration (the compiler rejects it first)."""
    from unum_entry.asl.integrations.call import IntegrationHandler

    integration = parse(resource)
    if integration is None:
        raise ValueError(f"not a supported service integration: {resource!r}")
    return IntegrationHandler(integration)


__all__ = ["CALLBACK", "Integration", "TaskFailed", "handler_for", "parse", "unsupported_reason"]
