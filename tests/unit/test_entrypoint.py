"""`python3 -m unum_entry` picks the platform adapter from the environment, and says clearly
when the image lacks it; a Lambda process without its configuration exits with one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import unum_entry.__main__ as entry

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_platform_detection() -> None:
    assert entry._adapter_module({"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}) == "unum_entry.platforms.aws_lambda"
    assert entry._adapter_module({"PORT": "8080"}) == "unum_entry.platforms.cloud_run"


def test_missing_adapter_is_a_clear_error(monkeypatch, capsys) -> None:
    monkeypatch.setattr(entry, "_adapter_module", lambda environ: "unum_entry.platforms.no_such_cloud")
    assert entry.main() == 2
    assert "platform adapter unum_entry.platforms.no_such_cloud is not installed" in capsys.readouterr().err


def test_lambda_process_without_configuration_exits_with_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNUM_")}
    env.update(AWS_LAMBDA_RUNTIME_API="127.0.0.1:1", UNUM_FUNCTION_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "unum_entry"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("unum_entry: cannot start: environment variable UNUM_STORE is not set "
                                   "(UNUM_STORE: a store URL, UNUM_INVOKER: an invoker URL)")
