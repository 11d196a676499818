"""Issue 44, step 1: a workflow started on a build keeps invoking that build after a newer one is
published. Real unum functions (LambdaAdapter over `load_function`, a shared SQLite store) answer
behind in-process RIE stand-ins, registered with the local Invoke endpoint, published as Lambda
versions, each build's versions named by an alias (the build's version id); each function's
invoker is `lambda://?endpoint=…&qualifier=<build id>`, as deploy sets it.

The running workflow's entry waits on a gate file while build two is published and `$LATEST`
moves to it; released, it invokes its successor, which must be build one's (`"old"`): with
unqualified invokes it reaches `$LATEST` (`"new"`) and the test fails."""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry
from unum_entry.invokers.aws_lambda import LambdaInvoker, QualifiedTimers, build_client
from unum_entry.invokers.lambda_event import to_event
from unum_entry.errors import ConfigurationError
from unum_entry.outcome import read_outcome
from unum_entry.platforms.aws_lambda import LambdaAdapter
from unum_entry.platforms.common import FunctionSettings, RetryPolicy, load_function
from unum_entry.runtime import new_workflow
from unum_entry.stores import open_store
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.integration

ENTRY = """import os, time
def handler(event, context):
    deadline = time.monotonic() + 20
    while not os.path.exists(event["gate"]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return event
"""


class InProcessRie:
    """An RIE stand-in: each POST is one `LambdaAdapter.handle` call, answered with its result."""

    def __init__(self, adapter: LambdaAdapter) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                context = type("Context", (), {"aws_request_id": str(uuid.uuid4())})()
                body = json.dumps(adapter.handle(event, context), default=str).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/2015-03-31/functions/function/invocations"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _build(folder: Path, answer: str) -> Path:
    write_workflow(folder, name="pin", entry="A", functions={
        "A": FunctionSource(ENTRY, [{"op": "invoke", "function": "B"}]),
        "B": FunctionSource(f"def handler(event, context):\n    return {answer!r}\n")})
    return folder


def _serve(folder: Path, store_url: str, endpoint: str, qualifier: str | None, servers: list[InProcessRie]) -> dict[str, str]:
    urls = {}
    for function in ("A", "B"):
        invoker = f"lambda://?endpoint={endpoint}&region=us-east-1" + (f"&qualifier={qualifier}" if qualifier else "")
        loaded = load_function(FunctionSettings.from_env({"UNUM_FUNCTION_DIR": str(folder / function),
                                                          "UNUM_STORE": store_url, "UNUM_INVOKER": invoker,
                                                          "UNUM_WATCHDOG": "0"}))
        servers.append(InProcessRie(LambdaAdapter(loaded, retry=RetryPolicy(base=0.0))))
        urls[function] = servers[-1].url
    return urls


def _publish(endpoint: AsyncInvokeEndpoint, client: Any, urls: dict[str, str], build: str) -> None:
    for function, url in urls.items():
        endpoint.register(function, url, image=f"sha256:{build}")
        number = client.publish_version(FunctionName=function)["Version"]
        client.create_alias(FunctionName=function, Name=build, FunctionVersion=number)


def _start(client: Any, qualifier: str, workflow_id: str, gate: Path) -> None:
    body = to_event(new_workflow({"gate": str(gate)}, workflow_id).to_wire(), store=None)
    client.invoke(FunctionName=f"A:{qualifier}", InvocationType="Event", Payload=body)


def _result(store_url: str, workflow_id: str, timeout: float = 30.0) -> Any:
    store = open_store(store_url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        outcome = read_outcome(store, workflow_id)
        if outcome.results or outcome.failure:
            assert outcome.failure is None, outcome.failure
            return outcome.results[0]
        time.sleep(0.05)
    raise AssertionError(f"{workflow_id}: no result within {timeout} s")


def test_running_workflow_keeps_its_build(tmp_path: Path) -> None:
    store_url = f"sqlite://{tmp_path / 'unum.db'}"
    servers: list[InProcessRie] = []
    try:
        with AsyncInvokeEndpoint(retry=LambdaRetry(delays=(0.05,), request_timeout=30)) as endpoint:
            client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
            one = _serve(_build(tmp_path / "one", "old"), store_url, endpoint.endpoint, "vone", servers)
            _publish(endpoint, client, one, "vone")
            gate = tmp_path / "gate"
            _start(client, "vone", "wf-running", gate)
            assert endpoint.wait_running("A:1", 10)  # published version 1 of A (the endpoint keys it NAME:N)

            two = _serve(_build(tmp_path / "two", "new"), store_url, endpoint.endpoint, "vtwo", servers)
            _publish(endpoint, client, two, "vtwo")  # $LATEST of A and B is build two now
            gate.write_text("go")
            assert _result(store_url, "wf-running") == "old"  # B of build one, not $LATEST

            _start(client, "vtwo", "wf-new", gate)
            assert _result(store_url, "wf-new") == "new"
            assert endpoint.wait_idle(10)
    finally:
        for server in servers:
            server.close()


def test_timers_target_the_qualified_arn() -> None:
    created: list[dict[str, Any]] = []

    class Scheduler:
        def create_schedule(self, **kwargs: Any) -> None:
            created.append(kwargs)

    invoker = LambdaInvoker.from_url("lambda://?prefix=s-&qualifier=v0123456789abcdef&region=us-east-1"
                                     "&schedule_role=arn:aws:iam::123456789012:role/r", client=_FakeLambda(),
                                     scheduler_client=Scheduler())
    assert isinstance(invoker.timers, QualifiedTimers)
    invoker.invoke_at(time.time() + 3600, "B", {"workflow": "w"}, name="t1")
    assert created[0]["Target"]["Arn"] == "arn:aws:lambda:us-east-1:123456789012:function:s-B:v0123456789abcdef"
    assert invoker.function_name("B") == "s-B:v0123456789abcdef"
    assert LambdaInvoker(_FakeLambda(), prefix="s-").function_name("B") == "s-B"
    with pytest.raises(ConfigurationError, match="qualifier"):
        LambdaInvoker.from_url("lambda://?qualifier=bad:one", client=_FakeLambda())


class _FakeLambda:
    class meta:  # noqa: N801 (boto3's attribute)
        region_name = "us-east-1"
