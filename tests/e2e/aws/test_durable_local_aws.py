"""A Lambda durable functions handler, unchanged, in its Lambda container image: the example
images/durable-order through `python -m builder local-aws` (RIE containers, the async Invoke
endpoint, DynamoDB and EventBridge Scheduler on moto) — no durable service: plain async invokes,
DynamoDB checkpoints and scheduler timers — with the result the embedded engine gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.aws.conftest import local_aws_cli
from tests.integration.test_durable_functions import EXPECTED

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "images" / "durable-order"


def test_the_durable_example_runs_in_lambda_containers(built_images) -> None:
    built_images(EXAMPLE)
    proc = local_aws_cli(EXAMPLE, "wf-durable", timeout=600)
    assert json.loads(proc.stdout) == EXPECTED
