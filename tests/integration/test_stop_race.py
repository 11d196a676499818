"""A stopped workflow never records a result afterwards, and a stop never hides a result that
came first (unum_entry.outcome.stop_workflow: the stop claims the root result record).

Both orders and the true race, on the SQLite store and on DynamoDB over moto's wire protocol:
a terminal invocation's result write (through the Runtime, unchanged on the fault-free path)
against `stop_workflow`; and through the real CLI, `stop` while the last function runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from unum_entry.checkpoint import record_result
from unum_entry.envelope import Envelope
from unum_entry.ir import parse_ir
from unum_entry.outcome import WorkflowStatus, read_outcome, stop_workflow
from unum_entry.retention import store_retention
from unum_entry.runtime import Runtime
from unum_entry.stores import open_store
from unum_entry.stores.base import Kind, Store

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RACES = 12  # workflows raced per store (bounded)


@pytest.fixture(params=["sqlite", "dynamodb"])
def store(request, tmp_path) -> Store:
    if request.param == "dynamodb":
        return request.getfixturevalue("dynamodb_store")
    opened = open_store(str(tmp_path / "unum.db"))
    request.addfinalizer(opened.close)
    return opened


class _NoInvoker:
    def invoke(self, function: str, payload: dict) -> None:
        raise AssertionError(f"a terminal function invoked {function}")


def _terminal(store: Store) -> Runtime:
    """The Runtime of a terminal function: its commit IS the workflow's root result record."""
    ir = parse_ir({"unum_ir": 1, "function": "Last", "handler": "app.handler"})
    return Runtime(ir, lambda event, ctx: {"done": event}, store, _NoInvoker())


def _delivery(workflow: str, store: Store) -> Envelope:
    return Envelope.from_wire({"unum": 2, "workflow": workflow, "frames": [[0, 1, 0]], "inputs": [{"value": 7}],
                               "deadline": store_retention(store).deadline()})


def _results(store: Store, workflow: str) -> list[str]:
    return [r.key for r in store.records(workflow) if r.kind is Kind.RESULT]


def test_a_result_after_the_stop_is_refused_by_the_store(store):
    runtime = _terminal(store)
    try:
        assert stop_workflow(store, "wf-stop-first", error="Ops.Cancelled", cause="test")
        report = runtime.handle(_delivery("wf-stop-first", store))
        assert report is not None and report.created is False and report.value is None  # lost to the claim
        assert _results(store, "wf-stop-first") == []
        outcome = read_outcome(store, "wf-stop-first")
        assert outcome.status is WorkflowStatus.STOPPED and outcome.results == []
        assert outcome.failure is not None and outcome.failure["Error"] == "Ops.Cancelled"
        # a redelivery of the terminal invocation changes nothing either
        assert runtime.handle(_delivery("wf-stop-first", store)) is not None
        assert _results(store, "wf-stop-first") == []
    finally:
        runtime.close()


def test_a_result_before_the_stop_wins_and_the_stop_is_refused(store):
    runtime = _terminal(store)
    try:
        report = runtime.handle(_delivery("wf-result-first", store))
        assert report is not None and report.created and report.value == {"done": 7}
        assert not stop_workflow(store, "wf-result-first")
        outcome = read_outcome(store, "wf-result-first")
        assert outcome.status is WorkflowStatus.SUCCEEDED and outcome.results == [{"done": 7}]
    finally:
        runtime.close()


def test_a_stop_racing_the_result_leaves_exactly_one_ending(store, race):
    """Result write and stop released at the same instant, RACES times: whichever wins, the
    other leaves no trace (never a result under a stop, never a stop over a result)."""
    retention = store_retention(store)
    stops_won = 0
    for n in range(RACES):
        workflow = f"wf-race-{n}"
        env = _delivery(workflow, store)

        def work(i: int, env: Envelope = env, workflow: str = workflow) -> bool:
            if i == 0:
                time.sleep((n % 4) * 0.002)  # staggered: the rounds land at different points of the stop's writes
                record_result(store, retention, env, {"n": n})
                return False
            return stop_workflow(store, workflow)

        stopped = race(2, work)[1]
        outcome = read_outcome(store, workflow)
        if stopped:
            stops_won += 1
            assert outcome.status is WorkflowStatus.STOPPED and _results(store, workflow) == []
        else:
            assert outcome.status is WorkflowStatus.SUCCEEDED and outcome.results == [{"n": n}]
            assert outcome.failure is None
    print(f"stop won {stops_won} of {RACES} races")


def test_a_stop_that_died_half_way_reads_stopped_and_completes_when_repeated(tmp_path):
    from unum_entry.outcome import failure_record, claim_result

    store = open_store(str(tmp_path / "unum.db"))
    try:
        record = failure_record("Unum.Stopped", "half", function="", invocation="", attempts=0)
        record["Stopped"] = True
        assert claim_result(store, "wf-half", record)  # the claim alone: the process died before the failure record
        assert read_outcome(store, "wf-half").status is WorkflowStatus.STOPPED
        listed = subprocess.run([sys.executable, "-m", "builder", "list", "--json", "--store", str(tmp_path / "unum.db")],
                                cwd=REPO, capture_output=True, text=True, timeout=120)
        assert [row["status"] for row in json.loads(listed.stdout)] == ["stopped"], listed.stderr
        assert stop_workflow(store, "wf-half")  # completes it: the failure record is written
        assert stop_workflow(store, "wf-half") is False  # then it has ended
        outcome = read_outcome(store, "wf-half")
        assert outcome.status is WorkflowStatus.STOPPED and outcome.failure is not None
        assert outcome.failure["Cause"] == "stopped by request"  # the failure record's, not the claim's
    finally:
        store.close()


def test_stop_while_the_last_function_runs_through_the_cli(tmp_path):
    """`python -m builder stop` while the terminal function's handler runs: `run` ends stopped
    (exit 1) and the store holds no result record; the handler's commit lost to the stop."""
    started, release = tmp_path / "started", tmp_path / "release"
    folder = tmp_path / "late"
    folder.mkdir()
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "late", "entry": "First"}))
    code = {"First": "def handler(event, context):\n    return event\n",
            "Last": (f"import pathlib, time\ndef handler(event, context):\n    pathlib.Path({str(started)!r}).touch()\n"
                     f"    for _ in range(600):\n        if pathlib.Path({str(release)!r}).exists():\n            break\n"
                     f"        time.sleep(0.05)\n    return {{'done': event}}\n")}
    for name, instructions in (("First", [{"op": "invoke", "function": "Last"}]), ("Last", [])):
        (folder / name).mkdir()
        (folder / name / "app.py").write_text(code[name])
        (folder / name / "unum-ir.json").write_text(json.dumps(
            {"unum_ir": 1, "function": name, "handler": "app.handler", "instructions": instructions}))
    db = str(tmp_path / "unum.db")
    run = subprocess.Popen([sys.executable, "-m", "builder", "run", str(folder), "--input", "1", "--store", db,
                            "--workflow-id", "wf-late"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert time.monotonic() < deadline and run.poll() is None, "the last function never started"
            time.sleep(0.05)
        stopped = subprocess.run([sys.executable, "-m", "builder", "stop", "wf-late", "--store", db], cwd=REPO,
                                 capture_output=True, text=True, timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        release.touch()
        _, err = run.communicate(timeout=60)
        assert run.returncode == 1 and "was stopped" in err.splitlines()[-1], err
    finally:
        release.touch()
        run.kill()
        run.wait()
    store = open_store(db)
    try:
        assert _results(store, "wf-late") == []  # the handler returned, its result write was refused
        assert read_outcome(store, "wf-late").status is WorkflowStatus.STOPPED
    finally:
        store.close()
