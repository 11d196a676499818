"""`python -m builder local-aws`: the user's one command for running Lambda images locally (docker
SDK containers, the Invoke endpoint, its own moto), end to end through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.aws.test_lambda_workflows import in_process_result

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", ["map-aggregate"])
def test_local_aws_runs_a_workflow_and_prints_its_result(name: str, built_images) -> None:
    folder = REPO / "images" / name
    built_images(folder)
    proc = subprocess.run([sys.executable, "-m", "builder", "local-aws", str(folder), "--no-build",
                           "--tag-prefix", "unum-e2e/", "--input", f"@{folder / 'input.json'}",
                           "--workflow-id", "wf-cli", "--compact", "--retry-delay", "0.2"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result == json.loads((folder / "expected.json").read_text())
    assert result == in_process_result(folder, json.loads((folder / "input.json").read_text()), "wf-cli")
    assert "function containers behind http://127.0.0.1:" in proc.stderr
