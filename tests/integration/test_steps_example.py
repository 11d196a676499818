"""images/money-transfer through the real CLI (`python -m builder run`): a transfer that succeeds
and one that aborts and is compensated, on the file store and on DynamoDB (moto server)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from unum_entry.codec import decode
from unum_entry.stores import open_store

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "images" / "money-transfer"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", "run", str(EXAMPLE), *args, "--compact"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.fixture(params=["file", "dynamodb"])
def store_url(request, tmp_path):
    if request.param == "file":
        yield str(tmp_path / "store")
        return
    server = request.getfixturevalue("moto_server")
    url = f"dynamodb://unum-{uuid.uuid4().hex[:10]}?endpoint={server.endpoint}&create=1"
    store = open_store(url)
    for table in ("accounts", "outbox"):  # the application's own tables
        if table in store.client.list_tables()["TableNames"]:
            store.client.delete_table(TableName=table)
        store.client.create_table(TableName=table, KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                                  AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                                  BillingMode="PAY_PER_REQUEST")
    store.close()
    yield url


def balances(url: str) -> dict:
    store = open_store(url)
    try:
        return {k: decode(v.value)["balance"] for k, v in store.app_read("accounts", ["alice", "bob"]).items()}
    finally:
        store.close()


def test_transfer_then_aborted_transfer(store_url):
    ok = run_cli("--input", f"@{EXAMPLE / 'input.json'}", "--store", store_url)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == json.loads((EXAMPLE / "expected.json").read_text())
    assert balances(store_url) == {"alice": 70, "bob": 50}

    failed = run_cli("--input", json.dumps({"transfer": "T-2", "from": "alice", "to": "dave", "amount": 25}),
                     "--store", store_url)
    assert failed.returncode == 1
    assert "AccountUnavailable" in failed.stderr and "'dave'" in failed.stderr and "Traceback" not in failed.stderr
    assert balances(store_url) == {"alice": 70, "bob": 50}  # debited 25, refunded by the compensation

    poor = run_cli("--input", json.dumps({"transfer": "T-3", "from": "bob", "to": "alice", "amount": 500}),
                   "--store", store_url)
    assert poor.returncode == 1 and "InsufficientFunds" in poor.stderr
    assert balances(store_url) == {"alice": 70, "bob": 50}
