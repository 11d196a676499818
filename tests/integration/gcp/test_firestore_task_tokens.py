"""A `.waitForTaskToken` workflow completes on the Firestore store (Google's emulator), through
the real CLI: `python -m builder run --store firestore://…` stops at the waiting Task (its token's
nonce is a journaled step: a Firestore transaction), `task-success` resumes it exactly once, a
second callback is refused, `inspect` says succeeded. (Before Firestore had transactions every
delivery of the waiting Task raised a StoreError, redelivered until the deadline.)"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.integration.test_task_tokens import AWS, _workflow_of, approval_machine, cli

pytestmark = pytest.mark.integration


def test_a_waiting_task_completes_on_firestore(tmp_path: Path, firestore_emulator) -> None:
    store = f"firestore://unum-{uuid.uuid4().hex[:12]}?project={firestore_emulator.project}"
    path = approval_machine(tmp_path, f"{AWS}lambda:invoke.waitForTaskToken",
                            {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token", "order.$": "$.order"}})
    env = {"TOKEN_DIR": str(tmp_path)}
    run = cli("run", path, "--input", '{"order": 7}', "--store", store, "--timeout", "90", env=env)
    assert run.returncode == 0 and run.stdout == "", run.stderr
    token = (tmp_path / "token").read_text()
    assert "is waiting for 1 task-token callback(s) at 'Approve'" in run.stderr, run.stderr
    waiting = json.loads(cli("inspect", _workflow_of(token), "--store", store).stdout)
    assert waiting["status"] == "waiting"

    done = cli("task-success", token, "--output", '{"ok": true}', "--store", store, "--workflow", path, "--compact",
               env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"order": 7, "shipped": True}
    again = cli("task-success", token, "--output", '{"ok": false}', "--store", store, "--workflow", path, env=env)
    assert again.returncode == 2 and "already completed" in again.stderr and "Traceback" not in again.stderr
    finished = json.loads(cli("inspect", _workflow_of(token), "--store", store).stdout)
    assert finished["status"] == "succeeded", finished
