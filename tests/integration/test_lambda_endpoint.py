"""The local Invoke endpoint's Lambda semantics through boto3's Lambda client: errors by type,
payload limits, RequestResponse pass-through, and events for an unreachable function retried
until their maximum age, then sent to the on-failure destination. The 'RIE' here is a small
recording HTTP server (the real RIE is exercised in test_lambda_local and the e2e suite)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from botocore.exceptions import ClientError

from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry, function_name_from_path
from builder.local_stack.process import free_port
from unum_entry.invokers.aws_lambda import build_client

pytestmark = pytest.mark.integration


class FakeRie:
    """Answers like the RIE: 200 with the handler's result, or 200 with an errorMessage body."""

    def __init__(self, fail: bool = False) -> None:
        self.bodies: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                owner.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                body = json.dumps({"errorMessage": "boom", "errorType": "ValueError", "stackTrace": []} if fail
                                  else {"ok": True}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/2015-03-31/functions/function/invocations"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    with AsyncInvokeEndpoint(retry=LambdaRetry(delays=(0.05, 0.05), unavailable_delay=0.05, max_event_age=0.5)) as running:
        yield running


def test_errors_limits_and_sync_invokes(endpoint) -> None:
    ok, failing = FakeRie(), FakeRie(fail=True)
    try:
        endpoint.register("ok", ok.url)
        endpoint.register("failing", failing.url, on_failure=None)
        client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
        with pytest.raises(ClientError) as missing:
            client.invoke(FunctionName="nope", InvocationType="Event", Payload=b"{}")
        assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
        with pytest.raises(ClientError) as too_big:
            client.invoke(FunctionName="ok", InvocationType="Event", Payload=json.dumps("x" * 300_000))
        assert too_big.value.response["Error"]["Code"] == "RequestEntityTooLargeException"
        sync = client.invoke(FunctionName="ok", Payload=b'{"a": 1}')
        assert sync["StatusCode"] == 200 and "FunctionError" not in sync and json.load(sync["Payload"]) == {"ok": True}
        failed = client.invoke(FunctionName="failing", Payload=b"{}")
        assert failed["FunctionError"] == "Unhandled"
        arn = "arn:aws:lambda:us-east-1:123456789012:function:ok"
        assert client.invoke(FunctionName=arn, InvocationType="Event", Payload=b'{"b": 2}')["StatusCode"] == 202
        assert endpoint.wait_idle(10)
        assert ok.bodies == [{"a": 1}, {"b": 2}]
    finally:
        ok.close()
        failing.close()


def test_function_errors_retry_twice_then_go_to_the_destination(endpoint) -> None:
    failing, sink = FakeRie(fail=True), FakeRie()
    try:
        endpoint.register("failing", failing.url, on_failure="sink")
        endpoint.register("sink", sink.url)
        endpoint.accept("failing", b'{"n": 1}')
        assert endpoint.wait_idle(10)
        assert len(failing.bodies) == 3
        (record,) = sink.bodies
        assert record["requestContext"]["condition"] == "RetriesExhausted"
        assert record["requestContext"]["approximateInvokeCount"] == 3
        assert record["requestPayload"] == {"n": 1}
        assert record["responsePayload"]["errorMessage"] == "boom"
    finally:
        failing.close()
        sink.close()


def test_unreachable_function_is_retried_until_the_event_is_too_old(endpoint) -> None:
    sink = FakeRie()
    try:
        endpoint.register("down", f"http://127.0.0.1:{free_port()}/2015-03-31/functions/function/invocations", on_failure="sink")
        endpoint.register("sink", sink.url)
        endpoint.accept("down", b'{"n": 2}')
        assert endpoint.wait_idle(10)
        outcomes = [a.outcome for a in endpoint.attempts if a.function == "down"]
        assert outcomes.count("unavailable") >= 3 and outcomes[-1] == "destination"
        assert sink.bodies[0]["requestContext"]["condition"] == "EventAgeExceeded"
    finally:
        sink.close()


@pytest.mark.parametrize("path, name", [
    ("/2015-03-31/functions/Hello/invocations", "Hello"),
    ("/2015-03-31/functions/Hello:live/invocations", "Hello"),
    ("/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A1%3Afunction%3AHello/invocations", "Hello"),
    ("/2015-03-31/functions/Hello", None),
])
def test_function_names_from_paths(path, name) -> None:
    assert function_name_from_path(path) == name


def test_a_failing_destination_record_is_not_routed_again(endpoint) -> None:
    endpoint.register("alone", f"http://127.0.0.1:{free_port()}/2015-03-31/functions/function/invocations")  # its own destination
    endpoint.accept("alone", b"{}")
    assert endpoint.wait_idle(10), "a destination record went round in circles"
    destinations = [a.detail for a in endpoint.attempts if a.outcome == "destination"]
    assert destinations == ["EventAgeExceeded -> alone", "EventAgeExceeded -> None"]
