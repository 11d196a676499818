"""Stop against a durable function's `context.invoke` child (issue 45): the child runs as its own
workflow (`naming.invoked_workflow`), so stopping the parent must stop it too, once, as a
`.sync` nested machine already is (tests/integration/test_stop_waits.py).

The parent is a durable function (aws-durable-execution-sdk-python) that invokes a compiled
state machine whose Task waits for its task token. The child's result lands (its token
completed with `task_success`, its continuation delivered, and everything it sends drained: the
child's result answers the parent, which runs on to its own result) right before each store
operation of the parent's stop in turn, and after its last (tests/support/interleaving_store.py).
Judged by the contract:

- the parent has exactly one ending: SUCCEEDED with its result (the stop refused) or STOPPED
  with none (the stop said so); a second stop changes nothing;
- the child is never left running: SUCCEEDED when its result landed before the stop reached it
  (the callback accepted), else STOPPED (the callback refused with TaskTimedOut, nothing sent);
  once the stop has passed the child's claim, the result is always refused;
- every reader agrees on both (tests/support/readers.py: read_outcome, inspect, the history,
  list, the console's JSON and page),

over SQLite, the file store and DynamoDB (moto); the Firestore emulator is raced by
tests/integration/test_stop_callback_races.py.

And through the real CLI: `python -m builder stop PARENT` stops the waiting child, whose late
`task-success` is one line, exit 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.interleaving_store import InterleavingStore
from tests.support.readers import every_reader
from unum_entry import naming
from unum_entry.errors import TaskTimedOut
from unum_entry.outcome import WorkflowStatus, read_outcome, stop_workflow
from unum_entry.stores import open_store
from unum_entry.stores.base import Store
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BOUND = 30.0  # seconds any wait below may take
ASK = '''import os
def handler(event, context):
    with open(os.path.join(event["sink"], "token"), "w") as f:
        f.write(event["token"])
    return {"asked": True}
'''
CHILD = {"StartAt": "Ask", "States": {
    "Ask": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
            "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token", "sink.$": "$.sink"}},
            "TimeoutSeconds": 3600, "ResultPath": "$.answer", "Next": "Done"},
    "Done": {"Type": "Pass", "End": True}}}
PARENT = '''
import os
from aws_durable_execution_sdk_python import durable_execution


@durable_execution
def handler(event, context):
    context.step(lambda _: 1, name="before")
    out = context.invoke("Ask", {"sink": event["sink"]}, name="child")
    context.step(lambda _: open(os.path.join(event["sink"], "after"), "a").write("x"), name="after")
    return {"child": out["answer"]}
'''


def _folder(tmp_path: Path) -> Path:
    """The child machine compiled by the CLI, the durable parent added as the folder's entry."""
    source = tmp_path / "machine"
    (source / "functions" / "Ask").mkdir(parents=True)
    (source / "functions" / "Ask" / "app.py").write_text(ASK)
    (source / "statemachine.json").write_text(json.dumps(CHILD))
    folder = tmp_path / "wf"
    done = subprocess.run([sys.executable, "-m", "builder", "compile", str(source / "statemachine.json"), "--out",
                           str(folder)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    write_workflow(folder, name="parent", entry="Parent", functions={"Parent": FunctionSource(PARENT)})
    return folder


def _until(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not within {BOUND} s"
        time.sleep(0.02)


class Recording:
    """An invoker keeping what a callback sends (its continuation), for the platform to deliver."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.sent.append((function, payload))


@pytest.fixture(params=["sqlite", "file", "dynamodb"])
def store_url(request: Any, tmp_path: Path, monkeypatch: Any) -> str:
    """The store's URL: the embedded stores, DynamoDB (moto over its wire protocol), the Firestore emulator."""
    # (firestore is not among the params: 4 minutes more here; its callback races run elsewhere)
    monkeypatch.chdir(tmp_path)  # a remote store's run queue lives in the current directory
    if request.param == "dynamodb":
        return f"dynamodb://unum-test-{uuid.uuid4().hex[:12]}?endpoint={request.getfixturevalue('moto_server').endpoint}" \
               "&create=1"
    if request.param == "firestore":
        return f"firestore://unum-test-{uuid.uuid4().hex[:12]}?project={request.getfixturevalue('firestore_emulator').project}"
    return str(tmp_path / ("unum.db" if request.param == "sqlite" else "store"))


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    try:
        yield opened
    finally:
        if store_url.startswith("dynamodb://"):
            opened.client.delete_table(TableName=store_url.split("//")[1].split("?")[0])  # type: ignore[attr-defined]
        opened.close()


class Family:
    """Parents started on one platform, each waiting for its child's task token."""

    def __init__(self, platform: Any, tmp_path: Path) -> None:
        self.platform, self.tmp_path = platform, tmp_path

    def sink(self, workflow: str) -> Path:
        return self.tmp_path / f"sink-{workflow}"

    def start(self, workflow: str) -> None:
        sink = self.sink(workflow)
        sink.mkdir()
        self.platform.start({"sink": str(sink)}, workflow_id=workflow)
        _until(lambda: (sink / "token").is_file() and (sink / "token").read_text(), f"{workflow}'s child asking")
        self.platform.wait_idle(BOUND, until=time.time())  # nothing left to do but the Task's timeout timer

    def child_result(self, store: Store, workflow: str) -> str:
        """The child's token completed and all it sends drained: 'accepted' or 'refused'."""
        from unum_entry.asl.callbacks import task_success

        sent = Recording()
        try:
            task_success((self.sink(workflow) / "token").read_text(), {"ok": workflow}, store=store,
                         invoker=sent)
        except TaskTimedOut:
            assert sent.sent == [], "a refused callback sent its continuation"
            return "refused"
        for function, payload in sent.sent:
            self.platform.submit(function, payload)
        self.platform.wait_idle(BOUND, until=time.time())
        return "accepted"


@pytest.fixture
def family(tmp_path: Path, store: Store) -> Iterator[Family]:
    from unum_entry.local.platform import LocalPlatform

    platform = LocalPlatform(load_workflow(_folder(tmp_path)), store, workers=2)
    try:
        yield Family(platform, tmp_path)
    finally:
        platform.close()


def _children(store: Store, workflow: str) -> list[str]:
    return [e.workflow for e in store.workflows() if e.workflow.startswith(workflow + naming.INVOKED)]


def test_the_childs_result_at_every_point_of_the_parents_stop_leaves_one_ending_each(family, store, store_url):
    family.start("wf-dry")
    (child_of_dry,) = _children(store, "wf-dry")
    dry = InterleavingStore(store)
    assert stop_workflow(dry, "wf-dry")
    assert read_outcome(store, child_of_dry).status is WorkflowStatus.STOPPED, "the stop left the child running"
    child_claim = dry.ops.index("transact_marker", dry.ops.index("transact_marker") + 1)  # the child's claim
    runs = []
    for at in range(len(dry.ops) + 1):
        name = f"wf-{at}"
        family.start(name)
        (child,) = _children(store, name)
        landed: list[str] = []
        wrapped = InterleavingStore(store, lambda inner, name=name: landed.append(family.child_result(inner, name)),
                                    at)
        stopped = stop_workflow(wrapped, name)
        wrapped.finish()
        family.platform.wait_idle(BOUND, until=time.time())
        runs.append((name, child, at, stopped, landed[0]))
    with every_reader(store, store_url) as readers:
        said = readers.one_ending([w for name, child, *_ in runs for w in (name, child)])
    endings = set()
    for name, child, at, stopped, landed in runs:
        parent_outcome = read_outcome(store, name)
        if parent_outcome.status is WorkflowStatus.SUCCEEDED:
            assert not stopped and landed == "accepted", (name, stopped, landed)
            assert parent_outcome.result == {"child": {"ok": name}}
        else:
            assert parent_outcome.status is WorkflowStatus.STOPPED and stopped, (name, parent_outcome.status)
            assert parent_outcome.results == []
        assert said[child] == ("succeeded" if landed == "accepted" else "stopped"), (name, at, landed, said[child])
        if at > child_claim:
            assert landed == "refused", f"{name}: the child's result landed after the stop claimed it"
        assert not stop_workflow(store, name), "a second stop stopped it again"
        assert said[child] == str(read_outcome(store, child).status), "a second stop changed the child"
        endings.add((parent_outcome.status, said[child]))
    assert (WorkflowStatus.SUCCEEDED, "succeeded") in endings and (WorkflowStatus.STOPPED, "stopped") in endings, \
        endings


def test_stop_of_the_parent_through_the_cli_stops_its_waiting_child(family, store, store_url):
    family.start("wf-cli")
    (child,) = _children(store, "wf-cli")
    stopped = subprocess.run([sys.executable, "-m", "builder", "stop", "wf-cli", "--store", store_url], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    late = subprocess.run([sys.executable, "-m", "builder", "task-success",
                           (family.sink("wf-cli") / "token").read_text(), "--output", '"late"', "--store", store_url,
                           "--workflow", str(family.tmp_path / "wf")],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ})
    assert late.returncode == 2 and "has ended (stopped)" in late.stderr, late.stderr
    assert "Traceback" not in late.stderr and len(late.stderr.strip().splitlines()) == 1, late.stderr
    family.platform.wait_idle(BOUND, until=time.time())
    with every_reader(store, store_url) as readers:
        assert readers.one_ending(["wf-cli", child]) == {"wf-cli": "stopped", child: "stopped"}
    assert not (family.sink("wf-cli") / "after").exists()


def test_a_stop_killed_before_it_reached_the_child_is_completed_by_the_next_stop(family, store, store_url):
    """The parent's ending written (both of its writes), its child not stopped yet (the stop died
    there): the next `stop` of the parent says it had ended (exit 2) and stops the child."""
    from unum_entry.outcome import STOP_FIELD, end_workflow, failure_record

    family.start("wf-half")
    (child,) = _children(store, "wf-half")
    record = {**failure_record("Unum.Stopped", "stopped by request", function="", invocation="", attempts=0),
              STOP_FIELD: True}
    assert end_workflow(store, "wf-half", record)  # the parent's part of the stop only
    assert read_outcome(store, child).status is WorkflowStatus.RUNNING
    again = subprocess.run([sys.executable, "-m", "builder", "stop", "wf-half", "--store", store_url], cwd=REPO,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "already ended (stopped)" in again.stderr, again.stderr
    assert read_outcome(store, child).status is WorkflowStatus.STOPPED
    assert not stop_workflow(store, "wf-half") and read_outcome(store, child).status is WorkflowStatus.STOPPED
