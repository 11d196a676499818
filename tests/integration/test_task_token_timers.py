"""`task-success --workflow STATEMACHINE` (the embedded engine) keeps the timers its continuation
arms in `run`'s durable delivery queue and says what the workflow waits for next, as `run` and
`callback-success` do (builder.commands.waiting): the next task token with the command that
completes it, or the next timer with the `run --resume` that delivers it; each printed command,
run as printed, takes the workflow on to its result. Real CLI subprocesses, a real SQLite store,
Waits shortened by UNUM_ASL_TIME_SCALE."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

AWS = "arn:aws:states:::"
SCALE = 0.01  # a Wait of 200 s lasts 2 s
ASK = '''import os
def handler(event, context):
    with open(os.path.join(os.environ["TOKEN_DIR"], event["name"]), "w") as f:
        f.write(event["token"])
    return {"asked": event["name"]}
'''


def builder(*args: str | Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "UNUM_ASL_TIME_SCALE": str(SCALE), "TOKEN_DIR": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], capture_output=True, text=True,
                          timeout=60, env=env)


def printed(stderr: str, command: str) -> list[list[str]]:
    """The `python -m builder <command> …` lines of `stderr`, as argument lists after `builder`
    (a line's trailing `(or: …)` remark cut off)."""
    marker = f"python -m builder {command} "
    return [shlex.split(line[line.index(marker):].split("   (or:")[0])[3:]
            for line in stderr.splitlines() if marker in line]


def ask(name: str) -> dict[str, object]:
    return {"Type": "Task", "Resource": f"{AWS}lambda:invoke.waitForTaskToken", "ResultPath": f"$.{name}",
            "Parameters": {"FunctionName": "Ask", "Payload": {"token.$": "$$.Task.Token", "name": name}}}


def test_task_success_keeps_the_next_timer_and_prints_the_next_token_and_the_resume(tmp_path: Path) -> None:
    functions = tmp_path / "code"  # not ./functions next to the machine: every printed command needs --functions
    (functions / "Ask").mkdir(parents=True)
    (functions / "Ask" / "app.py").write_text(ASK)
    machine = tmp_path / "statemachine.json"
    machine.write_text(json.dumps({"StartAt": "First", "States": {
        "First": {**ask("first"), "Next": "Pause"},
        "Pause": {"Type": "Wait", "Seconds": 200, "Next": "Second"},
        "Second": {**ask("second"), "Next": "Cool"},
        "Cool": {"Type": "Wait", "Seconds": 300, "Next": "Done"},
        "Done": {"Type": "Pass", "Parameters": {"first.$": "$.first", "second.$": "$.second"}, "End": True}}}))
    store = tmp_path / "unum.db"
    began = time.monotonic()
    started = builder("run", machine, "--input", "{}", "--functions", functions, "--store", store,
                      "--workflow-id", "wf-tt", tmp_path=tmp_path)
    assert started.returncode == 0 and started.stdout == "", started.stderr
    [hint] = printed(started.stderr, "task-success")
    first = (tmp_path / "first").read_text()
    assert f"First: {first}" in started.stderr

    # The first token completed: the 2 s Pause is waited for (within this command's --timeout), then
    # the workflow waits for the second token: it is listed, with the command that completes it.
    complete_first = [first if a == "TOKEN" else '{"by": "ana"}' if a == "JSON" else a for a in hint]
    after_first = builder(*complete_first, tmp_path=tmp_path)
    assert after_first.returncode == 0 and after_first.stdout == "", after_first.stderr
    second = (tmp_path / "second").read_text()
    assert "is waiting for 1 task-token callback(s) at 'Second'" in after_first.stderr, after_first.stderr
    assert f"  Second: {second}" in after_first.stderr
    [next_hint] = printed(after_first.stderr, "task-success")
    assert next_hint == ["task-success", "TOKEN", "--output", "JSON", "--store", str(store), "--workflow", str(machine),
                         "--functions", str(functions)]

    # The second completed with --timeout 1: the 3 s Cool is left, past the timeout: its timer and
    # the exact command that delivers it; the timer outlives this command in the store's database.
    complete_second = [second if a == "TOKEN" else '{"by": "bob"}' if a == "JSON" else a for a in next_hint]
    after_second = builder(*complete_second, "--timeout", "1", tmp_path=tmp_path)
    assert after_second.returncode == 0 and after_second.stdout == "", after_second.stderr
    assert "workflow wf-tt is waiting until " in after_second.stderr and "for a timer;" in after_second.stderr, \
        after_second.stderr
    assert "keeps no delivery queue" not in after_second.stderr
    [resume] = printed(after_second.stderr, "run")
    assert resume == ["run", str(machine), "--workflow-id", "wf-tt", "--resume", "--store", str(store),
                      "--functions", str(functions)]
    waiting = json.loads(builder("inspect", "wf-tt", "--store", store, tmp_path=tmp_path).stdout)
    assert waiting["status"] == "waiting" and "next_timer" in waiting, waiting

    done = builder(*resume, "--compact", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "resuming: 1 " in done.stderr, done.stderr
    assert json.loads(done.stdout) == {"first": {"by": "ana"}, "second": {"by": "bob"}}
    assert time.monotonic() - began >= 200 * SCALE + 300 * SCALE  # both Waits were waited for, not skipped
