"""serve's RedriveExecution against a redrive whose process died (issue 45): a server killed
after a redrive's claim, or after it cleared the failure record, left the claim; boto3's
`redrive_execution` through the next `python -m builder serve` continues that redrive (its
number, no second attempt) and the execution ends once; two RedriveExecution calls at once on
one failure are one redrive, the other answered as AWS answers a running execution
(ExecutionNotRedrivable)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import ROLE, client, serving, wait_ended

pytestmark = pytest.mark.integration

LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:"
CHAIN = {"First": {"Type": "Task", "Resource": LAMBDA + "Inc", "Next": "Second"},
         "Second": {"Type": "Task", "Resource": LAMBDA + "Flaky", "End": True}}


def functions(root: Path) -> Path:
    """Inc (n + 1, counting its calls) and Flaky (fails its first call, then answers; counted)."""
    code = root / "functions"
    (code / "Inc").mkdir(parents=True)
    (code / "Inc" / "app.py").write_text(
        "from pathlib import Path\nCALLS = Path(%r)\n"
        "def handler(event, context):\n"
        "    CALLS.write_text(str(int(CALLS.read_text()) + 1) if CALLS.exists() else '1')\n"
        "    return {'n': event.get('n', 0) + 1}\n" % str(root / "inc-calls"))
    (code / "Flaky").mkdir()
    (code / "Flaky" / "app.py").write_text(
        "import time\nfrom pathlib import Path\nSEEN = Path(%r)\n"
        "def handler(event, context):\n"
        "    seen = int(SEEN.read_text()) if SEEN.exists() else 0\n"
        "    SEEN.write_text(str(seen + 1))\n"
        "    if seen == 0:\n        raise RuntimeError('first call fails')\n"
        "    time.sleep(0.3)\n"
        "    return {'fixed': event}\n" % str(root / "flaky-calls"))
    return code


class Died(BaseException):
    """The redrive's process died here (nothing after this point ran)."""


class Dying:
    """The store a dying redrive wrote through: after `writes` writes the process is gone."""

    WRITES = ("create", "delete", "transact", "add_to_set", "create_joining")

    def __init__(self, store: Any, writes: int) -> None:
        self._store, self._left = store, writes

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)
        if name not in self.WRITES:
            return method

        def write(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            self._left -= 1
            if self._left == 0:
                raise Died
            return result
        return write


class Lost:
    """A dead process's invoker: what it would have sent never left it."""

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        pass

    def invoke_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        pass


def failed_execution(tmp_path: Path) -> tuple[Path, str, str]:
    """A serve run of the chain that failed in Second: (functions, execution ARN, workflow id)."""
    code = functions(tmp_path)
    with serving(tmp_path, functions=code) as server:
        sfn = client(server.url)
        machine = sfn.create_state_machine(name="flaky", definition=json.dumps({"StartAt": "First", "States": CHAIN}),
                                           roleArn=ROLE)["stateMachineArn"]
        arn = sfn.start_execution(stateMachineArn=machine, name="e", input='{"n": 0}')["executionArn"]
        failed = wait_ended(sfn, arn)
        assert (failed["status"], failed["redriveStatus"]) == ("FAILED", "REDRIVABLE"), failed
        [execution] = list(server.registry.executions())
        return code, arn, execution.workflow


@pytest.mark.parametrize("writes", [1, 2])
def test_a_redrive_whose_server_died_is_continued_by_the_next_servers_redrive_execution(tmp_path: Path,
                                                                                         writes: int) -> None:
    from unum_entry import naming
    from unum_entry.redrive import redrive
    from unum_entry.stores import open_store

    code, arn, workflow = failed_execution(tmp_path)
    store = open_store(str(tmp_path / "unum.db"))
    try:  # the dying server's redrive: its claim (1), then the deletion of the failure record (2)
        with pytest.raises(Died):
            redrive(Dying(store, writes), workflow, Lost())  # type: ignore[arg-type]
        assert store.get(naming.redrive_key(workflow, 0)) is not None
    finally:
        store.close()
    with serving(tmp_path, functions=code) as server:
        sfn = client(server.url)
        assert sfn.redrive_execution(executionArn=arn)["redriveDate"].year >= 2026
        done = wait_ended(sfn, arn)
        assert (done["status"], json.loads(done["output"]), done["redriveCount"]) == \
            ("SUCCEEDED", {"fixed": {"n": 1}}, 1), done
        with pytest.raises(Exception) as refused:
            sfn.redrive_execution(executionArn=arn)
        assert "ExecutionNotRedrivable" in str(refused.value)
    store = open_store(str(tmp_path / "unum.db"))
    try:  # the dead redrive was continued under its number: no second attempt
        assert store.get(naming.redrive_key(workflow, 1)) is None
    finally:
        store.close()
    assert (tmp_path / "flaky-calls").read_text() == "2" and (tmp_path / "inc-calls").read_text() == "1"


def test_two_redrive_execution_calls_at_once_are_one_redrive(tmp_path: Path) -> None:
    code, arn, _ = failed_execution(tmp_path)
    with serving(tmp_path, functions=code) as server:
        barrier = threading.Barrier(2)
        answers: list[str] = []

        def one() -> None:
            sfn = client(server.url)
            barrier.wait(timeout=30)
            try:
                sfn.redrive_execution(executionArn=arn)
                answers.append("redriven")
            except Exception as exc:  # noqa: BLE001 - the API's refusal is the answer under test
                answers.append(str(exc))

        threads = [threading.Thread(target=one) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert answers.count("redriven") == 1, answers
        [other] = [a for a in answers if a != "redriven"]
        assert "ExecutionNotRedrivable" in other, other
        done = wait_ended(client(server.url), arn)
        assert (done["status"], done["redriveCount"]) == ("SUCCEEDED", 1), done
    assert (tmp_path / "flaky-calls").read_text() == "2"


def test_a_timer_armed_before_the_redrive_does_not_time_out_the_redriven_run(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """TimeoutSeconds 2 s (scaled); the execution fails at once and is redriven 1.2 s after its
    start; the redriven Task lasts 1.5 s, past the first attempt's deadline, within its own. The
    server still holds the start's timeout timer, which fires during the redriven run and finds
    the redrive's claim (unum_entry.watchdog, "superseded"): the execution SUCCEEDS."""
    import time

    monkeypatch.setenv("UNUM_ASL_TIME_SCALE", "0.01")
    code = functions(tmp_path)
    flaky = code / "Flaky" / "app.py"
    flaky.write_text(flaky.read_text().replace("time.sleep(0.3)", "time.sleep(1.5)"))
    with serving(tmp_path, functions=code) as server:
        sfn = client(server.url)
        machine = sfn.create_state_machine(name="timed", roleArn=ROLE, definition=json.dumps(
            {"StartAt": "First", "TimeoutSeconds": 200, "States": CHAIN}))["stateMachineArn"]
        began = time.monotonic()
        arn = sfn.start_execution(stateMachineArn=machine, name="t", input='{"n": 0}')["executionArn"]
        assert wait_ended(sfn, arn)["status"] == "FAILED"
        time.sleep(max(0.0, 1.2 - (time.monotonic() - began)))
        sfn.redrive_execution(executionArn=arn)
        done = wait_ended(sfn, arn)
        assert time.monotonic() - began > 2.2  # the start's deadline passed while the redriven run ran
        assert (done["status"], json.loads(done["output"])) == ("SUCCEEDED", {"fixed": {"n": 1}}), done


def test_a_server_killed_right_after_answering_redrive_execution_finishes_it_on_restart(tmp_path: Path) -> None:
    """A real `python -m builder serve` SIGKILLed as soon as RedriveExecution answered (the
    redriven Task still sleeping): what the redrive sent was on disk before the answer, so the
    next server resumes it and the execution SUCCEEDS once (the Task's handler ran again, its
    commit once), not FAILED again from its first attempt's checkpoint."""
    import os
    import re
    import signal
    import subprocess
    import sys

    code, arn, _ = failed_execution(tmp_path)
    flaky = code / "Flaky" / "app.py"
    hold = tmp_path / "hold"
    hold.write_text("30")
    flaky.write_text(flaky.read_text().replace("time.sleep(0.3)", "time.sleep(float(Path(%r).read_text()))"
                                               % str(hold)))
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "builder", "serve", "--port", "0", "--store",
                             str(tmp_path / "unum.db"), "--state-dir", str(tmp_path / "serve"), "--functions", str(code)],
                            cwd=tmp_path, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(repo)})
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        found = re.match(r"serving (http://127\.0\.0\.1:\d+) ", banner)
        assert found, banner
        client(found.group(1)).redrive_execution(executionArn=arn)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    hold.write_text("0")
    with serving(tmp_path, functions=code) as server:
        done = wait_ended(client(server.url), arn)
        assert (done["status"], json.loads(done["output"]), done["redriveCount"]) == \
            ("SUCCEEDED", {"fixed": {"n": 1}}, 1), done
    assert (tmp_path / "inc-calls").read_text() == "1"
