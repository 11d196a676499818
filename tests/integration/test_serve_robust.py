"""`serve` under bad requests, load and stops: every refusal in AWS's error shape with a 4xx, 200
clients at once lose nothing, and a server stopped by SIGTERM, Ctrl-C or kill -9 while
executions are in flight leaves them to the next server, which finishes them."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import ROLE, client, serving, wait_ended

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:"


def functions(root: Path) -> Path:
    folder = root / "functions" / "Inc"
    folder.mkdir(parents=True)
    (folder / "app.py").write_text("def handler(event, context):\n    return {'n': event.get('n', 0) + 1}\n")
    return root / "functions"


def two_steps(wait: int = 0) -> str:
    states: dict[str, Any] = {"A": {"Type": "Task", "Resource": LAMBDA + "Inc", "Next": "W" if wait else "B"},
                              "B": {"Type": "Task", "Resource": LAMBDA + "Inc", "End": True}}
    if wait:
        states["W"] = {"Type": "Wait", "Seconds": wait, "Next": "B"}
    return json.dumps({"StartAt": "A", "States": states})


def raw(url: str, body: bytes, headers: dict[str, str], method: str = "POST", path: str = "/") -> tuple[int, Any]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(method, path, body=body, headers={"Host": f"{host}:{port}", **headers})
        answer = conn.getresponse()
        data = answer.read()
        return answer.status, json.loads(data) if data else None
    finally:
        conn.close()


JSON = {"Content-Type": "application/x-amz-json-1.0"}


def target(operation: str) -> dict[str, str]:
    return {**JSON, "X-Amz-Target": f"AWSStepFunctions.{operation}"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Any]:
    with serving(tmp_path, functions=functions(tmp_path)) as running:
        yield running


def test_bad_requests_get_aws_error_shapes_never_a_500(server: Any) -> None:
    url = server.url
    cases = [
        (b"{not json", target("ListStateMachines"), "SerializationException"),
        (b"[1, 2]", target("ListStateMachines"), "SerializationException"),
        (b"{}", target("NoSuchThing"), "UnknownOperationException"),
        (b"{}", {**JSON, "X-Amz-Target": "Other.ListStateMachines"}, "UnknownOperationException"),
        (b"{}", target("DescribeExecution"), "ValidationException"),  # executionArn missing
        (json.dumps({"executionArn": 7}).encode(), target("DescribeExecution"), "SerializationException"),
        (json.dumps({"executionArn": "arn:aws:states:us-east-1:123456789012:stateMachine:x"}).encode(),
         target("DescribeExecution"), "InvalidArn"),
        (json.dumps({"maxResults": 5000}).encode(), target("ListStateMachines"), "ValidationException"),
        (json.dumps({"stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:x",
                     "input": "x" * 262145}).encode(), target("StartExecution"), "ValidationException"),
        (b"\xff\xfe", target("ListStateMachines"), "SerializationException"),
    ]
    for body, headers, code in cases:
        status, answer = raw(url, body, headers)
        assert 400 <= status < 500 and answer["__type"] == code and answer["message"], (body[:40], status, answer)
    status, answer = raw(url, b"", {}, method="GET", path="/no/such/path")
    assert status == 404 and answer["message"]
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)  # the answer comes before the body is sent
    conn.putrequest("POST", "/", skip_host=True)
    for name, value in {**target("ListStateMachines"), "Host": f"{host}:{port}",
                        "Content-Length": str(2 << 20)}.items():
        conn.putheader(name, value)
    conn.endheaders()
    answer = conn.getresponse()
    assert answer.status == 413 and json.loads(answer.read())["__type"] == "RequestEntityTooLargeException"
    conn.close()
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request("POST", "/", body=b"{}", headers={**target("ListStateMachines"), "Host": "evil.example:80"})
    answer = conn.getresponse()
    assert answer.status == 403 and json.loads(answer.read())["__type"] == "AccessDeniedException"
    conn.close()
    # and it still answers
    assert client(url).list_state_machines()["stateMachines"] == []


def test_two_hundred_clients_at_once_lose_nothing(server: Any) -> None:
    sfn = client(server.url)
    arn = sfn.create_state_machine(name="two", definition=two_steps(), roleArn=ROLE)["stateMachineArn"]
    outputs: dict[int, Any] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        try:
            mine = client(server.url)
            execution = mine.start_execution(stateMachineArn=arn, name=f"c{i}", input=json.dumps({"n": i}))
            done = wait_ended(mine, execution["executionArn"], timeout=240)
            with lock:
                outputs[i] = (done["status"], json.loads(done.get("output") or "null"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors[:3]
    assert outputs == {i: ("SUCCEEDED", {"n": i + 2}) for i in range(200)}
    listed: list[dict[str, Any]] = []
    token: dict[str, str] = {}
    while True:
        page = sfn.list_executions(stateMachineArn=arn, maxResults=70, **token)
        listed += page["executions"]
        if "nextToken" not in page:
            break
        token = {"nextToken": page["nextToken"]}
    assert sorted(e["name"] for e in listed) == sorted(f"c{i}" for i in range(200))


def start_serve(tmp: Path, port_file: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "builder", "serve", "--port", "0", "--store", str(tmp / "unum.db"),
                             "--state-dir", str(tmp / "serve"), "--functions", str(tmp / "functions")],
                            cwd=tmp, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"serving (http://127\.0\.0\.1:\d+)", line)
    assert found, line + (proc.stderr.read() if proc.poll() is not None else "")
    return proc, found.group(1)


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_a_stopped_server_leaves_its_executions_to_the_next_one(tmp_path: Path, stop: str) -> None:
    functions(tmp_path)
    proc, url = start_serve(tmp_path)
    try:
        sfn = client(url)
        arn = sfn.create_state_machine(name="waits", definition=two_steps(wait=2), roleArn=ROLE)["stateMachineArn"]
        started = [sfn.start_execution(stateMachineArn=arn, name=f"w{i}", input=json.dumps({"n": i}))["executionArn"]
                   for i in range(5)]
        assert all(sfn.describe_execution(executionArn=a)["status"] == "RUNNING" for a in started)
        proc.send_signal(getattr(signal, stop))
        _, err = proc.communicate(timeout=60)
        expected_code = {"SIGTERM": 143, "SIGINT": 130, "SIGKILL": -9}[stop]
        assert proc.returncode == expected_code, err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    again, url = start_serve(tmp_path)
    try:
        sfn = client(url)
        for i, execution in enumerate(started):
            done = wait_ended(sfn, execution, timeout=60)
            assert (done["status"], json.loads(done["output"])) == ("SUCCEEDED", {"n": i + 2})
    finally:
        again.send_signal(signal.SIGTERM)
        again.communicate(timeout=60)
    assert again.returncode == 143


def test_serve_refuses_a_port_in_use_in_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "builder", "serve", "--port", str(port), "--store",
                               str(tmp_path / "unum.db"), "--state-dir", str(tmp_path / "serve")],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and f"127.0.0.1:{port}" in done.stderr
