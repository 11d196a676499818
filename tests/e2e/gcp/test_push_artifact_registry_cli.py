"""`python -m builder push --registry LOCATION-docker.pkg.dev/...` goes through Application
Default Credentials (here a service-account key file whose token endpoint is local) and, when the
token cannot be had, stops with one line naming the registry: no traceback, nothing pushed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.gcp.test_artifact_registry_push import TokenEndpoint

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]


def test_push_to_artifact_registry_with_revoked_adc_is_one_clear_line(tmp_path, docker_client) -> None:
    with TokenEndpoint(None) as endpoint:  # answers invalid_grant
        adc = tmp_path / "key.json"  # a service-account key: the one ADC file type that keeps its token_uri
        adc.write_text(json.dumps({"type": "service_account", "project_id": "my-project", "private_key_id": "k1",
                                   "private_key": _private_key_pem(), "client_email": "pusher@my-project.iam.gserviceaccount.com",
                                   "client_id": "1", "token_uri": endpoint.url}))
        env = {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": str(adc)}
        proc = subprocess.run([sys.executable, "-m", "builder", "push", str(REPO / "images" / "chain"),
                               "--registry", "us-docker.pkg.dev/my-project/unum", "--tag-prefix", "unum-e2e-gcp/"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "us-docker.pkg.dev" in proc.stderr and "no usable Google credentials" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert [g["grant_type"] for g in endpoint.grants] == [["urn:ietf:params:oauth:grant-type:jwt-bearer"]]


def _private_key_pem() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()
