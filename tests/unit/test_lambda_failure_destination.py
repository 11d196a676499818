"""Issue 44: `deploy --publish` gives each build alias the on-failure destination of its build.

Lambda keeps one asynchronous invoke configuration per qualifier: the template's (retries, event
age, on-failure destination = the function itself) is `$LATEST`'s, and an invoke of
`FUNCTION:<build>` (every invoke of a pinned workflow) would get Lambda's defaults and no
destination. `pin_failure_destination` copies it onto the build alias with the destination
qualified (`FUNCTION:<build>`). Checked with botocore's Stubber: the exact requests, validated
against Lambda's service model."""

from __future__ import annotations

import pytest

from builder.deploy.aws_versions import AliasError, pin_failure_destination
from unum_entry.invokers.aws_lambda import build_client

ARN = "arn:aws:lambda:us-east-1:123456789012:function:orders-Confirm"


def _stubbed():
    from botocore.stub import Stubber  # type: ignore[import-untyped]

    client = build_client(endpoint="http://127.0.0.1:9", region="us-east-1")
    return client, Stubber(client)


def test_the_build_alias_gets_the_template_config_with_a_qualified_destination() -> None:
    client, stub = _stubbed()
    stub.add_response("get_function_event_invoke_config", {
        "FunctionArn": f"{ARN}:$LATEST", "MaximumRetryAttempts": 1, "MaximumEventAgeInSeconds": 600,
        "DestinationConfig": {"OnFailure": {"Destination": ARN}}}, {"FunctionName": "orders-Confirm"})
    stub.add_response("put_function_event_invoke_config", {}, {
        "FunctionName": "orders-Confirm", "Qualifier": "v0123456789abcdef", "MaximumRetryAttempts": 1,
        "MaximumEventAgeInSeconds": 600,
        "DestinationConfig": {"OnFailure": {"Destination": f"{ARN}:v0123456789abcdef"}}})
    with stub:
        put = pin_failure_destination(client, "orders-Confirm", "v0123456789abcdef")
        stub.assert_no_pending_responses()
    assert put is not None and put["DestinationConfig"]["OnFailure"]["Destination"] == f"{ARN}:v0123456789abcdef"


def test_another_destination_is_kept_and_no_config_puts_nothing() -> None:
    client, stub = _stubbed()
    other = "arn:aws:sqs:us-east-1:123456789012:dead-letters"
    stub.add_response("get_function_event_invoke_config", {
        "MaximumRetryAttempts": 2, "DestinationConfig": {"OnFailure": {"Destination": other}}})
    stub.add_response("put_function_event_invoke_config", {}, {
        "FunctionName": "orders-Confirm", "Qualifier": "vb", "MaximumRetryAttempts": 2,
        "DestinationConfig": {"OnFailure": {"Destination": other}}})
    stub.add_client_error("get_function_event_invoke_config", "ResourceNotFoundException", http_status_code=404)
    stub.add_client_error("get_function_event_invoke_config", "AccessDeniedException", "no", http_status_code=403)
    with stub:
        pin_failure_destination(client, "orders-Confirm", "vb")
        assert pin_failure_destination(client, "orders-Confirm", "vb") is None
        with pytest.raises(AliasError, match="AccessDeniedException"):
            pin_failure_destination(client, "orders-Confirm", "vb")
        stub.assert_no_pending_responses()
