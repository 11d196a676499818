"""Earlier failed attempts of an invocation in `python -m builder inspect --history` (error and
time of each, not only a count): carried by the retry envelope (`Envelope.failures`) into the
invocation's commit stamp or failure record, so the fault-free path pays nothing (unum_entry.history)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_cli_history import check_numbering, cli, history, write_workflow

pytestmark = pytest.mark.integration

FLAKY = '''from pathlib import Path

COUNT = Path(__file__).with_name("count")


def handler(event, context):
    n = int(COUNT.read_text()) + 1 if COUNT.exists() else 1
    COUNT.write_text(str(n))
    if n <= FAILS:
        raise ConnectionError(f"attempt {n} lost the connection")
    return event
'''


def flaky(tmp: Path, fails: int, max_attempts: int) -> Path:
    folder = write_workflow(tmp / f"flaky{fails}", {"A": (FLAKY.replace("FAILS", str(fails)), [])}, entry="A")
    ir = json.loads((folder / "A" / "unum-ir.json").read_text())
    (folder / "A" / "unum-ir.json").write_text(json.dumps({**ir, "max_attempts": max_attempts}))
    return folder


def test_a_retried_invocation_shows_each_failed_attempt(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    ran = cli("run", str(flaky(tmp_path, 2, 3)), "--input", "7", "--store", store, "--workflow-id", "wf-flaky")
    assert ran.returncode == 0 and ran.stdout.strip() == "7", ran.stderr
    document = history("wf-flaky", store)
    check_numbering(document)
    [step] = document["steps"]
    assert step["attempts"] == 3 and "output" in step
    assert [a["error"] for a in step["failed_attempts"]] == [f"ConnectionError: attempt {n} lost the connection"
                                                               for n in (1, 2)]
    assert step["failed_attempts"][0]["failed"] <= step["failed_attempts"][1]["failed"] <= step["started"]
    failed = [e for e in document["events"] if e["type"] == "LambdaFunctionFailed"]
    assert [(e["attempts"], e["details"]["error"], e["details"]["cause"]) for e in failed] == [
        (1, "ConnectionError", "attempt 1 lost the connection"), (2, "ConnectionError", "attempt 2 lost the connection")]
    text = cli("inspect", "wf-flaky", "--store", store, "--history").stdout
    assert "attempt 2 lost the connection" in text, text


def test_the_failed_attempts_before_the_last_are_in_the_failure_history(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    ran = cli("run", str(flaky(tmp_path, 5, 3)), "--input", "7", "--store", store, "--workflow-id", "wf-down")
    assert ran.returncode == 1 and "after 3 attempt(s): ConnectionError: attempt 3 lost" in ran.stderr, ran.stderr
    [step] = history("wf-down", store)["steps"]
    assert step["error"]["Error"] == "ConnectionError" and step["attempts"] == 3
    assert [a["error"] for a in step["failed_attempts"]] == [f"ConnectionError: attempt {n} lost the connection"
                                                               for n in (1, 2)]


def test_a_first_attempt_that_succeeds_records_no_attempts(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    assert cli("run", str(flaky(tmp_path, 0, 3)), "--input", "7", "--store", store, "--workflow-id", "wf-ok").returncode == 0
    [step] = history("wf-ok", store)["steps"]
    assert step["attempts"] == 1 and "failed_attempts" not in step
