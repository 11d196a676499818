"""The local Invoke endpoint's version/alias API through boto3's Lambda client (botocore's model
parses every reply): PublishVersion keeps the URLs a function had when published, invokes of
NAME:VERSION / NAME:ALIAS / qualified ARNs reach that version, an alias's weights split invokes,
and bad input is Lambda's error type with nothing changed."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError

from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry
from tests.integration.test_lambda_endpoint import FakeRie
from unum_entry.invokers.aws_lambda import build_client

pytestmark = pytest.mark.integration


def _code(error: ClientError) -> str:
    return str(error.response["Error"]["Code"])


def test_versions_aliases_and_qualified_invokes() -> None:
    old, new = FakeRie(), FakeRie()
    try:
        with AsyncInvokeEndpoint(retry=LambdaRetry(delays=(0.05,), request_timeout=10)) as endpoint:
            client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
            endpoint.register("f", old.url, image="sha256:old")
            one = client.publish_version(FunctionName="f")
            assert one["Version"] == "1" and one["FunctionArn"].endswith(":f:1")
            assert client.publish_version(FunctionName="f")["Version"] == "1"  # unchanged code: same version
            endpoint.register("f", new.url, image="sha256:new")
            two = client.publish_version(FunctionName="f", Description="new")
            assert two["Version"] == "2" and two["CodeSha256"] != one["CodeSha256"]
            listed = [v["Version"] for v in client.list_versions_by_function(FunctionName="f")["Versions"]]
            assert listed == ["$LATEST", "1", "2"]

            client.invoke(FunctionName="f:1", Payload=b"{\"n\": 1}")
            client.invoke(FunctionName=one["FunctionArn"], Payload=b"{\"n\": 2}")
            reply = client.invoke(FunctionName="f", Qualifier="2", Payload=b"{\"n\": 3}")
            assert reply["ExecutedVersion"] == "2"
            assert [b["n"] for b in old.bodies] == [1, 2] and [b["n"] for b in new.bodies] == [3]

            alias = client.create_alias(FunctionName="f", Name="live", FunctionVersion="1")
            assert alias["AliasArn"].endswith(":f:live") and "RoutingConfig" not in alias
            client.invoke(FunctionName="f:live", InvocationType="Event", Payload=b"{\"n\": 4}")
            assert endpoint.wait_idle(10)
            assert old.bodies[-1]["n"] == 4

            client.update_alias(FunctionName="f", Name="live",
                                RoutingConfig={"AdditionalVersionWeights": {"2": 0.5}})
            got = client.get_alias(FunctionName="f", Name="live")
            assert got["FunctionVersion"] == "1" and got["RoutingConfig"]["AdditionalVersionWeights"] == {"2": 0.5}
            before_old, before_new = len(old.bodies), len(new.bodies)
            executed = [client.invoke(FunctionName="f", Qualifier="live", Payload=b"{}")["ExecutedVersion"]
                        for _ in range(200)]
            assert 60 <= executed.count("2") <= 140  # 0.5 of 200, far outside 6 sigma otherwise
            assert len(new.bodies) - before_new == executed.count("2")
            assert len(old.bodies) - before_old == executed.count("1")

            for bad, code in [
                (lambda: client.create_alias(FunctionName="f", Name="live", FunctionVersion="1"),
                 "ResourceConflictException"),
                (lambda: client.create_alias(FunctionName="f", Name="x", FunctionVersion="9"),
                 "ResourceNotFoundException"),
                (lambda: client.update_alias(FunctionName="f", Name="live",
                                             RoutingConfig={"AdditionalVersionWeights": {"2": 1.5}}),
                 "InvalidParameterValueException"),
                (lambda: client.invoke(FunctionName="f:7", Payload=b"{}"), "ResourceNotFoundException"),
                (lambda: client.invoke(FunctionName="f:nosuch", Payload=b"{}"), "ResourceNotFoundException"),
                (lambda: client.get_alias(FunctionName="g", Name="live"), "ResourceNotFoundException"),
            ]:
                with pytest.raises(ClientError) as caught:
                    bad()
                assert _code(caught.value) == code
            assert client.get_alias(FunctionName="f", Name="live")["RoutingConfig"]["AdditionalVersionWeights"] == {"2": 0.5}

            client.update_alias(FunctionName="f", Name="live", FunctionVersion="2", RoutingConfig={})
            assert "RoutingConfig" not in client.get_alias(FunctionName="f", Name="live")
            assert [a["Name"] for a in client.list_aliases(FunctionName="f")["Aliases"]] == ["live"]
            client.delete_alias(FunctionName="f", Name="live")
            assert client.list_aliases(FunctionName="f")["Aliases"] == []
            assert json.loads(client.invoke(FunctionName="f", Payload=b"{}")["Payload"].read()) == {"ok": True}
    finally:
        old.close()
        new.close()
