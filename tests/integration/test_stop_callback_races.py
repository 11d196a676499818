"""A callback against a stop at every store operation of both (issue 45): a Step Functions Task
waiting for its task token (`task_success`, SendTaskSuccess) and a durable function waiting in
`wait_for_callback` (`durable_functions.callbacks.complete`, SendDurableExecutionCallbackSuccess),
each raced against `stop_workflow` in both directions — the callback (accepted or refused, its
continuation delivered and drained) right before each store operation of the stop, and the stop
right before each store operation of the callback (tests/support/interleaving_store.py) — over
SQLite, the file store, DynamoDB (moto over its wire protocol) and the Firestore emulator.

Judged by the contract:
- one ending: SUCCEEDED with the callback's value (the stop refused) or STOPPED with no result;
- a callback made after the stop's claim is refused (TaskTimedOut / CallbackAlreadyCompleted,
  "has ended (stopped)") and sends nothing, so the step after the wait never runs;
- a reader polling after every store operation of either actor sees one ending, never another
  after it (monotone);
- every reader agrees at the end (tests/support/readers.py).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.interleaving_store import InterleavingStore
from tests.support.readers import every_reader
from unum_entry.outcome import ENDED, WorkflowStatus, read_outcome, stop_workflow
from unum_entry.stores import open_store
from unum_entry.stores.base import Store
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BOUND = 30.0  # seconds any wait below may take
ASK = '''import os
def handler(event, context):
    with open(os.path.join(event["sink"], "handle"), "w") as f:
        f.write(event["token"])
    return {"asked": True}
'''
MARK = '''import os
def handler(event, context):
    with open(os.path.join(event["sink"], "after"), "a") as f:
        f.write("x")
    return event["answer"]
'''
TOKEN_MACHINE = {"StartAt": "Ask", "States": {
    "Ask": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
            "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token", "sink.$": "$.sink"}},
            "TimeoutSeconds": 3600, "ResultPath": "$.answer", "Next": "After"},
    "After": {"Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Mark", "End": True}}}
DURABLE = '''
import json
import os
from aws_durable_execution_sdk_python import durable_execution


@durable_execution
def handler(event, context):
    def hand_out(callback_id, ctx):
        with open(os.path.join(event["sink"], "handle"), "w") as f:
            f.write(callback_id)
    answer = context.wait_for_callback(hand_out, name="approval")
    context.step(lambda _: open(os.path.join(event["sink"], "after"), "a").write("x"), name="after")
    return json.loads(answer)
'''


def _token_folder(tmp_path: Path) -> Path:
    import subprocess
    import sys

    source = tmp_path / "machine"
    for name, code in (("Ask", ASK), ("Mark", MARK)):
        (source / "functions" / name).mkdir(parents=True)
        (source / "functions" / name / "app.py").write_text(code)
    (source / "statemachine.json").write_text(json.dumps(TOKEN_MACHINE))
    done = subprocess.run([sys.executable, "-m", "builder", "compile", str(source / "statemachine.json"), "--out",
                           str(tmp_path / "wf")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return tmp_path / "wf"


def _durable_folder(tmp_path: Path) -> Path:
    return write_workflow(tmp_path / "wf", name="approve", entry="Approve",
                          functions={"Approve": FunctionSource(DURABLE)}).folder


def _token_callback(store: Store, handle: str, value: Any, invoker: Any) -> str:
    from unum_entry.asl.callbacks import task_success
    from unum_entry.errors import TaskTimedOut

    try:
        task_success(handle, value, store=store, invoker=invoker)
    except TaskTimedOut as exc:
        assert "has ended (stopped)" in str(exc), exc
        return "refused"
    return "accepted"


def _durable_callback(store: Store, handle: str, value: Any, invoker: Any) -> str:
    from unum_entry.durable_functions.callbacks import CallbackAlreadyCompleted, complete

    try:
        complete(handle, store=store, invoker=invoker, result=json.dumps(value))
    except CallbackAlreadyCompleted as exc:
        assert "has ended (stopped)" in str(exc), exc
        return "refused"
    return "accepted"


KINDS: dict[str, tuple[Callable[[Path], Path], Callable[[Store, str, Any, Any], str]]] = {
    "task-token": (_token_folder, _token_callback), "durable-callback": (_durable_folder, _durable_callback)}
ORDERS = ["callback-at-every-op-of-the-stop", "stop-at-every-op-of-the-callback"]


class Recording:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.sent.append((function, payload))


@pytest.fixture(params=["sqlite", "file", "dynamodb", "firestore"])
def any_store(request: Any, tmp_path: Path, monkeypatch: Any) -> Iterator[tuple[Store, str]]:
    """(store, its URL for the CLI and the console): the embedded stores and the real emulators."""
    monkeypatch.chdir(tmp_path)  # a remote store's run queue lives in the current directory
    if request.param == "dynamodb":
        server = request.getfixturevalue("moto_server")
        name = f"unum-test-{uuid.uuid4().hex[:12]}"
        url = f"dynamodb://{name}?endpoint={server.endpoint}&create=1"
    elif request.param == "firestore":
        emulator = request.getfixturevalue("firestore_emulator")
        url = f"firestore://unum-test-{uuid.uuid4().hex[:12]}?project={emulator.project}"
    else:
        url = str(tmp_path / ("unum.db" if request.param == "sqlite" else "store"))
    opened = open_store(url)
    try:
        yield opened, url
    finally:
        if request.param == "dynamodb":
            opened.client.delete_table(TableName=name)  # type: ignore[attr-defined]
        opened.close()


class Watched(InterleavingStore):
    """An actor's store: after each of its operations `workflow`'s status, read from the store
    underneath, is appended to `seen` (a reader polling between every two operations)."""

    def __init__(self, inner: Store, seen: list[WorkflowStatus], workflow: str,
                 injected: Callable[[Store], object] | None = None, at: int | None = None) -> None:
        super().__init__(inner, injected, at)
        self.seen, self.workflow = seen, workflow

    def _op(self, name, run):  # type: ignore[no-untyped-def]
        done = super()._op(name, run)
        self.seen.append(read_outcome(self.inner, self.workflow).status)
        return done


def _monotone(seen: list[WorkflowStatus]) -> bool:
    ended = [status for status in seen if status in ENDED]
    return not ended or (len(set(ended)) == 1 and all(s in ENDED for s in seen[seen.index(ended[0]):]))


class Waiters:
    """Workflows started on one platform over the store, each waiting for its callback."""

    def __init__(self, platform: Any, tmp_path: Path, callback: Callable[[Store, str, Any, Any], str]) -> None:
        self.platform, self.tmp_path, self.callback = platform, tmp_path, callback

    def sink(self, workflow: str) -> Path:
        return self.tmp_path / f"sink-{workflow}"

    def start(self, workflow: str) -> None:
        sink = self.sink(workflow)
        sink.mkdir()
        self.platform.start({"sink": str(sink)}, workflow_id=workflow)
        deadline = time.monotonic() + BOUND
        while not ((sink / "handle").is_file() and (sink / "handle").read_text()):
            assert time.monotonic() < deadline, f"{workflow} never handed out its callback"
            time.sleep(0.02)
        self.platform.wait_idle(BOUND, until=time.time())

    def complete(self, store: Store, workflow: str) -> str:
        """The callback (the workflow's id as its value); an accepted one's continuation drained."""
        sent = Recording()
        answer = self.callback(store, (self.sink(workflow) / "handle").read_text(), {"ok": workflow}, sent)
        assert answer == "accepted" or sent.sent == [], "a refused callback sent its continuation"
        for function, payload in sent.sent:
            self.platform.submit(function, payload)
        self.platform.wait_idle(BOUND, until=time.time())
        return answer

    def ran_after(self, workflow: str) -> bool:
        return (self.sink(workflow) / "after").exists()


@pytest.fixture(params=sorted(KINDS))
def waiters(request: Any, tmp_path: Path, any_store: tuple[Store, str]) -> Iterator[Waiters]:
    from unum_entry.local.platform import LocalPlatform

    make, callback = KINDS[request.param]
    platform = LocalPlatform(load_workflow(make(tmp_path)), any_store[0], workers=2)
    try:
        yield Waiters(platform, tmp_path, callback)
    finally:
        platform.close()


def _stop(store: Store, workflow: str) -> bool:
    return stop_workflow(store, workflow)


@pytest.mark.parametrize("order", ORDERS)
def test_a_callback_and_a_stop_at_every_point_of_both_leave_one_ending(waiters, any_store, order):
    store, url = any_store
    stop_first = order == ORDERS[0]
    dry = InterleavingStore(store)
    waiters.start("wf-dry")
    if stop_first:
        assert _stop(dry, "wf-dry")
    else:
        assert waiters.complete(dry, "wf-dry") == "accepted"
        waiters.platform.wait_idle(BOUND, until=time.time())
    runs = []
    for at in range(len(dry.ops) + 1):
        name, seen, answers = f"wf-{at}", [], []  # type: ignore[var-annotated]
        waiters.start(name)
        if stop_first:
            def second(inner: Store, name: str = name, seen: list = seen, answers: list = answers) -> None:
                answers.append(waiters.complete(Watched(inner, seen, name), name))
            watched = Watched(store, seen, name, second, at)
            stopped = _stop(watched, name)
            watched.finish()
            landed = answers[0]
        else:
            def second(inner: Store, name: str = name, seen: list = seen, answers: list = answers) -> None:
                answers.append(_stop(Watched(inner, seen, name), name))
            watched = Watched(store, seen, name, second, at)
            landed = waiters.complete(watched, name)
            watched.finish()
            stopped = answers[0]
        waiters.platform.wait_idle(BOUND, until=time.time())
        seen.append(read_outcome(store, name).status)
        runs.append((name, at, stopped, landed, seen))
    with every_reader(store, url) as readers:
        said = readers.one_ending([name for name, *_ in runs])
    endings = set()
    for name, at, stopped, landed, seen in runs:
        assert _monotone(seen), f"{name}: a reader saw {[str(s) for s in seen]}"
        outcome = read_outcome(store, name)
        assert said[name] == str(outcome.status), (name, said[name], outcome.status)
        if outcome.status is WorkflowStatus.SUCCEEDED:
            assert not stopped and landed == "accepted" and outcome.result == {"ok": name}, (name, outcome)
        else:
            assert outcome.status is WorkflowStatus.STOPPED and stopped and outcome.results == [], (name, outcome)
        if landed == "refused":
            assert not waiters.ran_after(name), f"{name}: a refused callback ran the next step"
        if stop_first and at > dry.ops.index("transact_marker"):  # after the stop's claim
            assert landed == "refused", f"{name}: a callback after the stop's claim was accepted"
        endings.add((outcome.status, landed))
    assert (WorkflowStatus.STOPPED, "refused") in endings and len(endings) >= 2, endings
