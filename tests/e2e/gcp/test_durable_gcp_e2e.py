"""A Lambda durable functions handler, unchanged, as Cloud Run function images on the GCP local
stack: images/durable-order in containers behind Pub/Sub push subscriptions (the emulator),
checkpoints in Firestore (the emulator), its wait and wait_for_condition retries as Cloud Tasks
tasks (gcloud-tasks-emulator), the invoke of Tax as a Pub/Sub publish — with the result the
embedded engine gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.local_stack.gcp import start_workflow, wait_for_outcome
from tests.e2e.gcp.test_timers_gcp_e2e import deploy  # noqa: F401 (fixture)
from tests.integration.test_durable_functions import EXPECTED

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[3] / "images" / "durable-order"


def test_the_durable_example_runs_on_cloud_run_images(deploy) -> None:  # noqa: F811
    deployed = deploy(EXAMPLE)
    started = start_workflow(deployed.functions.urls["Order"], json.loads((EXAMPLE / "input.json").read_text()))
    outcome = wait_for_outcome(deployed.store, started["workflow"], timeout=300)
    assert outcome.failure is None, deployed.functions.logs()
    assert outcome.result == EXPECTED, deployed.functions.logs()
