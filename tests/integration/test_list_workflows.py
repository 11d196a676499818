"""`Store.workflows` on the file store and DynamoDB (moto), and `python -m builder list` / `rm`
through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from unum_entry.stores.base import Kind
from unum_entry.stores.file import FileStore

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.fixture(params=["file", "dynamodb"])
def store(request, tmp_path):
    if request.param == "file":
        s = FileStore(tmp_path / "store")
        yield s
        s.close()
    else:
        yield request.getfixturevalue("dynamodb_store")


def test_store_lists_workflows_with_kinds_and_expiries(store):
    now = int(time.time())
    store.create("c-a1", b"x", workflow="wf-a", expires_at=now + 100)
    store.create("c-a2", b"y" * 5000, workflow="wf-a", expires_at=now + 300)
    store.create("r-a", b"z", workflow="wf-a", kind=Kind.RESULT, expires_at=now + 300)
    store.add_to_set("s-b", 0, "c-b1", size=2, workflow="wf-b", expires_at=now + 50)
    store.create("f-b", b"boom", workflow="wf-b", kind=Kind.FAILURE, expires_at=now + 200)
    store.create("c-gone", b"old", workflow="wf-gone", expires_at=now - 1)  # expired: not listed
    entries = {e.workflow: e for e in store.workflows()}
    assert sorted(entries) == ["wf-a", "wf-b"]
    a, b = entries["wf-a"], entries["wf-b"]
    assert dict(a.objects) == {Kind.CHECKPOINT: 2, Kind.RESULT: 1}
    assert (a.results, a.failure, a.first_expiry, a.last_expiry) == (("r-a",), None, now + 100, now + 300)
    assert dict(b.objects) == {Kind.SET: 1, Kind.FAILURE: 1}
    assert (b.results, b.failure, b.first_expiry, b.last_expiry) == ((), "f-b", now + 50, now + 200)


def test_list_and_rm_on_a_file_store(tmp_path):
    store = str(tmp_path / "store")
    assert cli("run", "images/chain", "--input", '{"name": "a"}', "--store", store, "--workflow-id", "wf-ok").returncode == 0
    assert cli("run", "images/map-aggregate", "--input", '{"nope": 1}', "--store", store, "--workflow-id", "wf-bad").returncode == 1
    listed = cli("list", "--store", store, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["workflow"]: r for r in json.loads(listed.stdout)}
    assert {w: r["status"] for w, r in rows.items()} == {"wf-ok": "succeeded", "wf-bad": "failed"}
    assert all(0 <= r["age_seconds"] < 120 and r["objects"] >= 2 for r in rows.values())
    table = cli("list", "--store", store).stdout.splitlines()
    assert table[0].split() == ["WORKFLOW", "STATUS", "AGE", "OBJECTS", "RETAINED", "UNTIL"] and len(table) == 3

    # a finished workflow younger than the redelivery window is kept unless forced
    young = cli("rm", "wf-ok", "--store", store)
    assert young.returncode == 2 and young.stderr.count("\n") == 1 and "redelivery window" in young.stderr
    assert cli("rm", "--finished", "--older-than", "1d", "--store", store).stderr.strip() == "nothing to remove"
    gone = cli("rm", "wf-ok", "--store", store, "--force")
    assert gone.returncode == 0 and gone.stdout.startswith("removed wf-ok (succeeded,")
    assert [r["workflow"] for r in json.loads(cli("list", "--store", store, "--json").stdout)] == ["wf-bad"]
    assert cli("inspect", "wf-ok", "--store", store).returncode == 2  # nothing left of it
    missing = cli("rm", "wf-ok", "--store", store)
    assert missing.returncode == 2 and "no workflow 'wf-ok'" in missing.stderr
    assert cli("list", "--store", str(tmp_path / "typo")).returncode == 2
    assert cli("list", "--store", store, "--older-than", "soon").returncode == 2


def test_list_and_rm_on_dynamodb(dynamodb_store, moto_server):
    url = f"dynamodb://{dynamodb_store.table}?endpoint={moto_server.endpoint}"
    assert cli("run", "images/parallel", "--input", "@images/parallel/input.json", "--store", url,
               "--workflow-id", "wf-par").returncode == 0
    rows = json.loads(cli("list", "--store", url, "--json").stdout)
    assert [(r["workflow"], r["status"]) for r in rows] == [("wf-par", "succeeded")]
    removed = cli("rm", "wf-par", "--store", url, "--force")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(cli("list", "--store", url, "--json").stdout) == []
