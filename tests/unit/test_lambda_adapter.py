"""The Lambda adapter's decisions, with an in-memory store and a recording invoker: which events
start workflows, how handler failures are retried (by re-invoking itself with attempt + 1) or
recorded, how on-failure destination records become failure records, what is raised to Lambda."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from unum_entry.codec import decode
from unum_entry.envelope import Envelope
from unum_entry.errors import ConfigurationError, StoreError
from unum_entry.invokers import open_invoker
from unum_entry.invokers.aws_lambda import LambdaInvoker, parse_invoker_url
from unum_entry.invokers.lambda_event import to_event
from unum_entry.naming import failure_key
from unum_entry.platforms.aws_lambda import LambdaAdapter, RetryPolicy
from unum_entry.platforms.common import FunctionSettings, LoadedFunction, load_function
from unum_entry.runtime import new_workflow
from unum_entry.handlers import load_handler
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.unit


class RecordingInvoker:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        self.calls.append((function, payload))


@dataclass
class Context:
    aws_request_id: str = "req-1"


def adapter_for(tmp_path: Path, code: str, instructions=(), **ir_fields) -> tuple[LambdaAdapter, MemoryStore, RecordingInvoker]:
    workflow = write_workflow(tmp_path / "wf", name="wf", entry="F",
                              functions={"F": FunctionSource(code, instructions, ir_fields), "G": FunctionSource(
                                  "def handler(event, context):\n    return event\n")})
    store, invoker = MemoryStore(), RecordingInvoker()
    settings = FunctionSettings.from_env({"UNUM_FUNCTION_DIR": str(workflow.functions["F"].folder),
                                          "UNUM_STORE": "unused", "UNUM_INVOKER": "unused"})
    from unum_entry.ir import load_ir
    from unum_entry.runtime import Runtime

    ir = load_ir(settings.function_dir / "unum-ir.json")
    runtime = Runtime(ir, load_handler(settings.function_dir, ir.handler, function="F"), store, invoker)
    loaded = LoadedFunction(ir=ir, runtime=runtime, store=store, invoker=invoker)
    return LambdaAdapter(loaded, retry=RetryPolicy(base=0.0), sleep=lambda s: None), store, invoker


def test_raw_input_starts_a_workflow_named_after_the_request(tmp_path) -> None:
    adapter, store, invoker = adapter_for(tmp_path, "def handler(e, c):\n    return e * 2\n",
                                          [{"op": "invoke", "function": "G"}])
    summary = adapter.handle(21, Context("abc"))
    assert summary["workflow"] == "wf-abc" and summary["committed"] is True
    assert [(f, Envelope.from_wire(p).inputs[0].value) for f, p in invoker.calls] == [("G", 42)]
    # Lambda's retry of the same start event (same request id) is the same workflow: nothing new runs
    again = adapter.handle(21, Context("abc"))
    assert again["workflow"] == "wf-abc" and again.get("committed") is not True


def test_handler_failure_reinvokes_itself_until_max_attempts_then_fails(tmp_path) -> None:
    adapter, store, invoker = adapter_for(tmp_path, "def handler(e, c):\n    raise KeyError('nope')\n", max_attempts=3)
    env = new_workflow("in", "wf-x")
    first = adapter.handle(json.loads(to_event(env.to_wire(), store=store)), Context())
    assert first["retrying"] == 1
    (function, payload), = invoker.calls
    assert function == "F" and Envelope.from_wire(payload).attempt == 1
    second = adapter.handle(payload, Context())
    assert second["retrying"] == 2
    last = adapter.handle(invoker.calls[-1][1], Context())
    assert "failed" in last and len(invoker.calls) == 2
    record = decode(store.get(failure_key("wf-x")))
    assert (record["Function"], record["Error"], record["Attempts"]) == ("F", "KeyError", 3)


def test_destination_record_becomes_the_failure_record(tmp_path) -> None:
    adapter, store, _ = adapter_for(tmp_path, "def handler(e, c):\n    return e\n")
    env = new_workflow("in", "wf-d")
    record = {"version": "1.0", "requestContext": {"condition": "RetriesExhausted", "approximateInvokeCount": 3,
                                                   "functionArn": "arn:aws:lambda:us-east-1:1:function:F:$LATEST"},
              "requestPayload": env.to_wire(), "responseContext": {"functionError": "Unhandled"},
              "responsePayload": {"errorType": "Runtime.ExitError", "errorMessage": "exit status 3"}}
    summary = adapter.handle(record, Context())
    assert summary["workflow"] == "wf-d"
    failure = decode(store.get(failure_key("wf-d")))
    assert (failure["Error"], failure["Attempts"]) == ("Runtime.ExitError", 3)
    assert "exit status 3" in failure["Cause"]


def test_malformed_envelope_is_dropped_with_a_message_not_raised(tmp_path) -> None:
    adapter, _, invoker = adapter_for(tmp_path, "def handler(e, c):\n    return e\n")
    summary = adapter.handle({"unum": 2, "workflow": "w", "frames": "bad", "inputs": []}, Context())
    assert "envelope.frames" in summary["error"] and invoker.calls == []


def test_store_trouble_is_raised_to_lambda_for_its_retries(tmp_path) -> None:
    adapter, store, _ = adapter_for(tmp_path, "def handler(e, c):\n    return e\n")

    def broken(*args, **kwargs):
        raise StoreError("throttled")

    store.create = broken  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        adapter.handle("input", Context())


def test_settings_name_the_missing_variable(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="UNUM_INVOKER"):
        FunctionSettings.from_env({"UNUM_STORE": "x"})
    with pytest.raises(ConfigurationError, match="UNUM_INLINE_LIMIT"):
        FunctionSettings.from_env({"UNUM_STORE": "x", "UNUM_INVOKER": "y", "UNUM_INLINE_LIMIT": "big"})
    settings = FunctionSettings.from_env({"UNUM_STORE": "x", "UNUM_INVOKER": "y", "UNUM_FUNCTION_DIR": str(tmp_path)})
    with pytest.raises(ConfigurationError, match="unum-ir.json"):
        load_function(settings)


def test_invoker_urls() -> None:
    assert parse_invoker_url("lambda://?prefix=stack-&region=eu-west-1") == {"prefix": "stack-", "region": "eu-west-1"}
    for bad, message in [("lambda://host", "query"), ("lambda://?bogus=1", "unknown option 'bogus'"),
                         ("lambda://?limit=lots", "limit")]:
        with pytest.raises(ConfigurationError, match=message):
            parse_invoker_url(bad)
    with pytest.raises(ConfigurationError, match="unknown invoker URL"):
        open_invoker("carrier-pigeon://x")
    invoker = open_invoker("lambda://?prefix=s-&endpoint=http://127.0.0.1:9", store=MemoryStore())
    assert isinstance(invoker, LambdaInvoker) and invoker.function_name("F") == "s-F"


def test_store_trouble_reading_a_stored_envelope_is_raised_not_dropped(tmp_path) -> None:
    adapter, store, _ = adapter_for(tmp_path, "def handler(e, c):\n    return e\n")
    event = json.loads(to_event(new_workflow("x" * 4000, "wf-big").to_wire(), store=store, limit=500))

    def broken(*args, **kwargs):
        raise StoreError("connection reset")

    store.get = broken  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        adapter.handle(event, Context())


def _logged_adapters(tmp_path: Path, code: str) -> tuple[Any, Any, Any]:
    """A Lambda and a Cloud Run adapter over one function whose log lines go to a buffer; the
    function hosts the (compiled) state `Charge`."""
    import io
    from dataclasses import replace

    from unum_entry.invocation_log import InvocationLog
    from unum_entry.platforms.cloud_run import CloudRunAdapter

    lam, _, _ = adapter_for(tmp_path, code, max_attempts=1)
    buffer = io.StringIO()
    loaded = replace(lam.loaded, invocation_log=InvocationLog(stream=buffer), state="Charge")
    return (LambdaAdapter(loaded, retry=RetryPolicy(base=0.0), sleep=lambda s: None),
            CloudRunAdapter(loaded, retry=RetryPolicy(base=0.0), sleep=lambda s: None), buffer)


def test_the_log_line_names_the_request_the_state_and_the_users_error_type(tmp_path) -> None:
    import base64

    lam, run, buffer = _logged_adapters(tmp_path, "def handler(e, c):\n    raise ValueError('no card')\n")
    lam.handle({"n": 1}, Context("8f1c-req"))
    data = base64.b64encode(json.dumps({"n": 2}).encode()).decode()
    run.on_message({"data": data, "messageId": "17301"})
    first, second = (json.loads(line) for line in buffer.getvalue().splitlines())
    assert (first["request_id"], first["workflow_id"], first["state"]) == ("8f1c-req", "wf-8f1c-req", "Charge")
    assert (second["request_id"], second["workflow_id"], second["state"]) == ("17301", "wf-17301", "Charge")
    for line in (first, second):
        assert line["outcome"] == "failed" and line["error_type"] == "ValueError"
        assert line["error"] == "ValueError: no card"  # not "HandlerFailed: function 'F' raised ValueError: …"
