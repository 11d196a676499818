"""A workflow the deadline watchdog ended (unum_entry.watchdog: its failure record has
`"Watchdog": true`) is `timed out` everywhere a status is shown (README's status table):
`list` (table, --json, --status), `inspect` (exit 1), `inspect --history` and the web UI, through
the real CLI over a file store. The workflow is run by the embedded engine with a 4 s TTL and a
lost delivery (tests/support/watchdog_schedules.py); its store's clock runs 10 minutes fast so
that its objects outlive the CLI calls (the watchdog fires 2 s after the start by that clock)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.support.ui import running_ui
from tests.support.watchdog_schedules import TTL, _platform, chain, wait_for_outcome
from unum_entry.outcome import WorkflowStatus
from unum_entry.stores.file import FileStore

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
FAST_BY = 600.0  # seconds the engine's store clock runs ahead of the CLI's


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=180)


def page(port: int, path: str, query: dict[str, str]) -> str:
    url = f"http://127.0.0.1:{port}{path}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.read().decode()


@pytest.fixture(scope="module")
def timed_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding `wf-late` (ended by the watchdog) and `wf-ok` (succeeded)."""
    tmp = tmp_path_factory.mktemp("timed-out")
    store = FileStore(tmp / "store", ttl_seconds=TTL, clock=lambda: time.time() + FAST_BY)
    with _platform(chain(tmp / "wf"), store, lose="C") as platform:
        platform.run({"x": 1}, workflow_id="wf-late", timeout=30)
        outcome = wait_for_outcome(store, "wf-late")
    assert outcome.status is WorkflowStatus.TIMED_OUT and outcome.failure is not None, outcome
    assert outcome.failure["Watchdog"] is True and outcome.failure["Error"] == "Unum.RetentionExpired"
    ran = cli("run", "images/chain", "--input", '{"name": "ada"}', "--store", str(tmp / "store"),
              "--workflow-id", "wf-ok")
    assert ran.returncode == 0, ran.stderr
    return tmp / "store"


def test_list_and_inspect_say_timed_out(timed_out: Path) -> None:
    store = str(timed_out)
    rows = {row["workflow"]: row["status"] for row in json.loads(cli("list", "--json", "--store", store).stdout)}
    assert rows == {"wf-late": "timed out", "wf-ok": "succeeded"}
    only = cli("list", "--json", "--status", "timed out", "--store", store)
    assert [row["workflow"] for row in json.loads(only.stdout)] == ["wf-late"], only.stderr
    table = cli("list", "--store", store).stdout
    assert re.search(r"^wf-late\s+timed out\s", table, re.M), table
    shown = cli("inspect", "wf-late", "--store", store)
    report = json.loads(shown.stdout)
    assert shown.returncode == 1 and report["status"] == "timed out", shown
    assert report["failure"]["Watchdog"] is True
    history = cli("inspect", "wf-late", "--store", store, "--history", "--json")
    document = json.loads(history.stdout)
    assert history.returncode == 1 and document["status"] == "timed out", history.stderr
    assert document["events"][-1]["type"] == "ExecutionTimedOut", document["events"][-1]


def test_the_ui_says_timed_out(timed_out: Path) -> None:
    with running_ui(timed_out) as port:
        listing = page(port, "/fragment/list", {})
        assert "<span class='status timed-out'>timed out</span>" in listing, listing
        filtered = page(port, "/fragment/list", {"status": "timed out"})
        assert "wf-late" in filtered and "wf-ok" not in filtered, filtered
        assert "<option value='timed out' selected>timed out</option>" in page(port, "/fragment/filters",
                                                                                   {"status": "timed out"})
        run = page(port, "/fragment/workflow", {"w": "wf-late"})
        assert "<span id='status' class='status timed-out'>timed out</span>" in run, run
