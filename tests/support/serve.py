"""`serve` in a test: a server on a free loopback port over a temporary store, and AWS's own
clients pointed at it (boto3 as users write it, with `endpoint_url`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from builder.serve.app import Serving, Settings

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/unum-test"


@contextmanager
def serving(tmp: Path, *, functions: str | Path | None = None, **settings: Any) -> Iterator[Serving]:
    """A started server over `tmp/unum.db` with its state in `tmp/serve`; closed on exit."""
    server = Serving(Settings(store=str(tmp / "unum.db"), state_dir=str(tmp / "serve"),
                              functions=str(functions) if functions else None, port=0, **settings))
    server.start()
    try:
        yield server
    finally:
        server.close()


def client(url: str, service: str = "stepfunctions", **config: Any) -> Any:
    """A boto3 client of `service` at `url`, with dummy credentials and no retries."""
    import boto3
    from botocore.config import Config

    return boto3.client(service, endpoint_url=url, region_name=REGION, aws_access_key_id="test",
                        aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 1}, **config))


def wait_ended(sfn: Any, execution_arn: str, timeout: float = 60.0) -> dict[str, Any]:
    """DescribeExecution until the execution is no longer RUNNING (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            return described
        time.sleep(0.05)
