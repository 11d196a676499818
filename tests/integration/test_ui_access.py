"""Who may use `python -m builder ui` (builder/ui/access.py), through the real CLI over HTTP on
127.0.0.1: by default only requests addressed to 127.0.0.1/localhost (a DNS-rebinding page is
refused); `--host` needs an access token, then carried as ?access_token= (a cookie follows),
the cookie, or a Bearer header."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.ui import running_ui

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def get(port: int, path: str = "/", **headers: str) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, dict(answer.headers)
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    ran = subprocess.run([sys.executable, "-m", "builder", "run", "images/chain", "--input", '{"name": "x"}', "--store",
                          str(path)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    return path


def test_by_default_only_requests_addressed_to_loopback(store):
    with running_ui(store) as port:
        assert get(port)[0] == 200
        assert get(port, Host=f"localhost:{port}")[0] == 200
        assert get(port, "/api/workflows", Host=f"evil.example:{port}")[0] == 403  # a DNS-rebinding page


def test_host_needs_a_token_and_the_token_is_required(store):
    refused = subprocess.run([sys.executable, "-m", "builder", "ui", "--store", str(store), "--host", "127.0.0.1"],
                             cwd=REPO, capture_output=True, text=True, timeout=60, env={**os.environ, "UNUM_UI_TOKEN": ""})
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().startswith("error: ui --host 127.0.0.1: give an access token too")
    with running_ui(store, "--host", "127.0.0.1", "--access-token", "s3cret") as port:
        assert get(port)[0] == 401
        assert get(port, "/?access_token=wrong")[0] == 401
        status, headers = get(port, "/?access_token=s3cret")
        assert status == 200 and headers["Set-Cookie"].startswith("unum_ui_access=s3cret;")
        assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
        assert get(port, "/api/workflows", Cookie="unum_ui_access=s3cret")[0] == 200
        assert get(port, "/api/workflows", Authorization="Bearer s3cret")[0] == 200
        assert get(port, "/api/workflows", Authorization="Bearer nope")[0] == 401
