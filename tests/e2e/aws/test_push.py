"""`python -m builder push`: the chain's function images to a real local registry (Debian's
docker-registry), directly and through the ECR path (GetAuthorizationToken and CreateRepository
against moto's ECR). The digests printed must be the ones the registry serves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from builder.local_stack.lambda_containers import LocalRegistry

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]
CHAIN = REPO / "images" / "chain"


@pytest.fixture(scope="module")
def registry():
    with LocalRegistry() as running:
        yield running


def push(*args: str) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "builder", "push", str(CHAIN), "--tag-prefix", "unum-e2e/", "--json", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_push_to_a_registry_reports_the_served_digests(built_images, registry) -> None:
    built_images(CHAIN)
    pushed = push("--registry", registry.host)
    assert sorted(p["image"] for p in pushed) == ["unum-e2e/chain-hello:latest", "unum-e2e/chain-shout:latest",
                                                   "unum-e2e/chain-sign:latest"]
    for p in pushed:
        repository = p["remote"].split("/", 1)[1].rsplit(":", 1)[0]
        assert p["digest"].startswith("sha256:")
        assert registry.manifest_digest(repository, "latest") == p["digest"]


def test_push_through_ecr_auth_creates_repositories(built_images, registry, aws_moto) -> None:
    built_images(CHAIN)
    pushed = push("--ecr", "--endpoint-url", aws_moto.endpoint, "--region", "us-east-1", "--registry", registry.host)
    ecr = boto3.client("ecr", endpoint_url=aws_moto.endpoint, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    names = {r["repositoryName"] for r in ecr.describe_repositories()["repositories"]}
    assert {"unum-e2e/chain-hello", "unum-e2e/chain-shout", "unum-e2e/chain-sign"} <= names
    for p in pushed:
        repository = p["remote"].split("/", 1)[1].rsplit(":", 1)[0]
        assert registry.manifest_digest(repository, "latest") == p["digest"]


def test_push_without_a_registry_is_one_clear_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "builder", "push", str(CHAIN)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--registry" in proc.stderr and "Traceback" not in proc.stderr
