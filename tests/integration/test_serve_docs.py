"""README's "The Step Functions API" section and docs/api.md, run as written: `python -m builder
serve` started as its line says (in the background, on port 8083), then each `aws` line through
the pinned AWS CLI and each Python block through the interpreter, from a folder holding `images/`."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.doc_commands import DocCommand, doc_commands

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("serve-port-8083")]

REPO = Path(__file__).resolve().parents[2]
PORT = 8083


def section(page: str, heading: str) -> str:
    text = (REPO / page).read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end != -1 else None]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def env_for(tmp: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)  # `python` and `aws` of this interpreter's environment
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "HOME": str(tmp)}


def wait_for_port(proc: subprocess.Popen[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            with socket.create_connection(("127.0.0.1", PORT), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"serve did not listen on {PORT} within {timeout} s")


@pytest.fixture
def here(tmp_path: Path) -> Path:
    (tmp_path / "images").symlink_to(REPO / "images")
    return tmp_path


class Session:
    """A shell session as the page's reader has it: exported variables kept, `&` in the background."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.env = env_for(cwd)
        self.background: list[subprocess.Popen[str]] = []

    def run(self, command: DocCommand) -> subprocess.CompletedProcess[str] | None:
        text = command.text
        if text.startswith("export "):
            for assignment in shlex.split(text)[1:]:
                name, _, value = assignment.partition("=")
                self.env[name] = value
            return None
        if text.endswith("&"):
            proc = subprocess.Popen(shlex.split(text[:-1]), cwd=self.cwd, env=self.env, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.background.append(proc)
            wait_for_port(proc)
            return None
        done = subprocess.run(shlex.split(text), cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{text}: {done.stderr}"
        return done

    def python(self, source: str) -> str:
        done = subprocess.run([sys.executable, "-c", source], cwd=self.cwd, env=self.env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def close(self) -> list[tuple[int, str]]:
        ended = []
        for proc in self.background:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
            ended.append((proc.returncode, err))
        return ended


@pytest.fixture
def session(here: Path) -> Iterator[Session]:
    shell = Session(here)
    try:
        yield shell
    finally:
        for proc in shell.background:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=30)


def test_the_readme_step_functions_api_section_works_as_written(session: Session) -> None:
    text = section("README.md", "## The Step Functions API")
    commands = [c for c in doc_commands("README.md") if c.text in text]
    assert [c.text.split()[:3] for c in commands if c.text.startswith("aws ")] == [
        ["aws", "stepfunctions", "create-state-machine"], ["aws", "stepfunctions", "start-execution"],
        ["aws", "stepfunctions", "describe-execution"], ["aws", "stepfunctions", "get-execution-history"]]
    expected = json.loads((REPO / "images/asl-order/expected.json").read_text())
    for command in commands:
        done = session.run(command)
        if done is None:
            continue
        answer = json.loads(done.stdout)
        if "describe-execution" in command.text:
            deadline = time.monotonic() + 60
            while answer["status"] == "RUNNING" and time.monotonic() < deadline:  # a reader looks again
                time.sleep(0.2)
                answer = json.loads(session.run(command).stdout)  # type: ignore[union-attr]
            assert answer["status"] == "SUCCEEDED" and json.loads(answer["output"]) == expected
        if "get-execution-history" in command.text:
            types = [event["type"] for event in answer["events"]]
            assert types[0] == "ExecutionStarted" and types[-1] == "ExecutionSucceeded"
    [block] = python_blocks(text)
    printed = session.python(block).splitlines()
    assert printed[0].startswith("SUCCEEDED ") and json.loads(printed[0].split(" ", 1)[1]) == expected
    assert "'ExecutionStarted'" in printed[1] and "'ExecutionSucceeded'" in printed[1]
    [(code, err)] = session.close()
    assert code == 143 and "Traceback" not in err


MOCKS = {"StateMachines": {"Hello": {"TestCases": {"HappyPath": {"Say": "Greeting"}}}},
         "MockedResponses": {"Greeting": {"0": {"Return": {"greeting": "hi from the mock"}}}}}
HELLO = {"StartAt": "Say", "States": {"Say": {"Type": "Task", "End": True,
                                              "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Say"}}}


def test_docs_api_commands_work_as_written(session: Session) -> None:
    synopsis, started, *rest, mocked = doc_commands("docs/api.md")
    assert synopsis.required == "python -m builder serve"
    session.run(started)
    for command in rest:
        done = session.run(command)
        if done is not None:
            assert json.loads(done.stdout) == {"stateMachines": []}
    [client_block] = python_blocks((REPO / "docs/api.md").read_text())
    session.python(client_block + "\nprint(sfn.list_state_machines()['stateMachines'])\n")
    [(code, _)] = session.close()
    assert code == 143
    # the mocks section's line, with a mock file in the reader's folder: a test case runs mocked
    assert mocked.required == "python -m builder serve --mock-config MockConfigFile.json"
    (session.cwd / "MockConfigFile.json").write_text(json.dumps(MOCKS))
    session.background.clear()
    session.run(DocCommand(mocked.doc, mocked.required + " &", ""))
    printed = session.python(client_block + f"""
import json, time
arn = sfn.create_state_machine(name="Hello", definition={json.dumps(json.dumps(HELLO))},
                               roleArn="arn:aws:iam::123456789012:role/unum")["stateMachineArn"]
run = sfn.start_execution(stateMachineArn=arn + "#HappyPath")
while (d := sfn.describe_execution(executionArn=run["executionArn"]))["status"] == "RUNNING":
    time.sleep(0.05)
print(d["status"], d["output"])
""")
    assert printed.split(" ", 1)[0] == "SUCCEEDED" and json.loads(printed.split(" ", 1)[1]) == \
        {"greeting": "hi from the mock"}
    [(code, _)] = session.close()
    assert code == 143
