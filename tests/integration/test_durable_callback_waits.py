"""`callback-success --workflow FOLDER` (the embedded engine) says what the workflow waits for
after the callback it completed, as `run` does: the next callback with the exact command that
completes it, or its next timer with the `run --resume` that delivers it; each printed command,
run as printed, takes the workflow on to its result. Real CLI subprocesses, a real SQLite store."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.integration

TWO_CALLBACKS_THEN_A_WAIT = '''
import json
from pathlib import Path

from aws_durable_execution_sdk_python import durable_execution
from aws_durable_execution_sdk_python.config import Duration


@durable_execution
def handler(event, context):
    def hand_out(name):
        def submit(callback_id, ctx):
            Path(event["folder"], name).write_text(callback_id)
        return submit

    first = context.wait_for_callback(hand_out("first"), name="first")
    second = context.wait_for_callback(hand_out("second"), name="second")
    context.wait(Duration.from_seconds(event["pause"]), name="pause")
    return {"first": json.loads(first), "second": json.loads(second)}
'''


def builder(*args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def printed(stderr: str, command: str) -> list[list[str]]:
    """The `python -m builder <command> …` lines of `stderr`, as argument lists after `builder`."""
    marker = f"python -m builder {command} "
    return [shlex.split(line[line.index(marker):])[3:] for line in stderr.splitlines() if marker in line]


def test_callback_success_lists_the_next_callback_then_the_timer_each_with_its_command(tmp_path: Path) -> None:
    folder = write_workflow(tmp_path / "wf", name="two-callbacks", entry="Approve",
                            functions={"Approve": FunctionSource(TWO_CALLBACKS_THEN_A_WAIT)}).folder
    store = tmp_path / "unum.db"
    started = builder("run", folder, "--input", json.dumps({"folder": str(tmp_path), "pause": 4}), "--store", store,
                      "--workflow-id", "wf-two")
    assert started.returncode == 0 and started.stdout == "", started.stderr
    [first] = printed(started.stderr, "callback-success")
    assert first[1] == (tmp_path / "first").read_text()

    # The first callback completed: the workflow now waits for the second, and says how to complete it.
    after_first = builder(*[('"a"' if a == "JSON" else a) for a in first])
    assert after_first.returncode == 0 and after_first.stdout == "", after_first.stderr
    assert "is waiting for 1 durable function callback(s)" in after_first.stderr, after_first.stderr
    [second] = printed(after_first.stderr, "callback-success")
    assert second == ["callback-success", (tmp_path / "second").read_text(), "--result", "JSON", "--store", str(store),
                      "--workflow", str(folder)]

    # The second completed: only the 4 s wait is left (past this command's --timeout): its timer and
    # the command that delivers it; the timer stays queued in the store's database.
    after_second = builder(*[('"b"' if a == "JSON" else a) for a in second], "--timeout", "1")
    assert after_second.returncode == 0 and after_second.stdout == "", after_second.stderr
    assert "is waiting until " in after_second.stderr and "for a timer;" in after_second.stderr, after_second.stderr
    assert "keeps no delivery queue" not in after_second.stderr
    [resume] = printed(after_second.stderr, "run")
    assert resume == ["run", str(folder), "--workflow-id", "wf-two", "--resume", "--store", str(store)]

    done = builder(*resume, "--compact")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"first": "a", "second": "b"}
    assert "resuming: 1 " in done.stderr, done.stderr
