"""Pause / Resume of a durable execution through boto3's `lambda` client: refused as unsupported
(501, `UnsupportedOperationException`; docs/api.md says why) without touching the execution,
and `ResourceNotFoundException` for an execution serve does not know."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.integration.test_serve_durable_api import SOURCES
from tests.support.serve import client, serving

pytestmark = pytest.mark.integration


@pytest.fixture
def lam(tmp_path: Path) -> Iterator[Any]:
    folder = tmp_path / "functions"
    (folder / "Sleepy").mkdir(parents=True)
    (folder / "Sleepy" / "app.py").write_text(SOURCES["Sleepy"])
    with serving(tmp_path, functions=folder) as server:
        yield client(server.url, "lambda")


def test_pause_and_resume_are_refused_and_leave_the_execution_running(lam: Any) -> None:
    arn = lam.invoke(FunctionName="Sleepy", InvocationType="Event", Payload=b"{}")["DurableExecutionArn"]
    for call in (lambda: lam.pause_durable_execution(DurableExecutionArn=arn, Reason="maintenance"),
                 lambda: lam.resume_durable_execution(DurableExecutionArn=arn)):
        with pytest.raises(ClientError) as error:
            call()
        assert error.value.response["Error"]["Code"] == "UnsupportedOperationException"
        assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 501
        assert "\n" not in error.value.response["Error"]["Message"]
    assert lam.get_durable_execution(DurableExecutionArn=arn)["Status"] == "RUNNING"
    lam.stop_durable_execution(DurableExecutionArn=arn)


def test_pause_of_an_unknown_execution_is_not_found(lam: Any) -> None:
    unknown = "arn:aws:lambda:us-east-1:123456789012:function:Sleepy:$LATEST/durable-execution/nope/0"
    with pytest.raises(ClientError) as error:
        lam.pause_durable_execution(DurableExecutionArn=unknown)
    assert error.value.response["Error"]["Code"] == "ResourceNotFoundException"
