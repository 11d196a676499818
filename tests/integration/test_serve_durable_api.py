"""`serve`'s Lambda durable-execution API through AWS's own boto3 `lambda` client over loopback:
Invoke of a durable function (`serve --functions DIR`) to start one, Get / List / History, a
callback completed with SendDurableExecutionCallbackSuccess / Failure, Stop, the SDK's own
Checkpoint / GetState, and the errors the model documents, as botocore raises them
(`ClientError` with AWS's code)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.support.serve import client, serving

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:"
HEADER = "from aws_durable_execution_sdk_python import DurableContext, durable_execution\n" \
         "from aws_durable_execution_sdk_python.config import Duration, WaitForCallbackConfig\n"
SOURCES = {
    "Double": HEADER + ("@durable_execution\ndef handler(event, context: DurableContext):\n"
                        "    n = context.step(lambda _: event['n'] * 2, name='double')\n    return {'n': n}\n"),
    "Approve": HEADER + ("from pathlib import Path\n@durable_execution\ndef handler(event, context: DurableContext):\n"
                         "    def submit(callback_id, ctx):\n        Path(event['file']).write_text(callback_id)\n"
                         "    answer = context.wait_for_callback(submit, name='approval', config=WaitForCallbackConfig("
                         "timeout=Duration.from_seconds(300)))\n"
                         "    return {'approval': answer}\n"),
    "Boom": HEADER + ("@durable_execution\ndef handler(event, context: DurableContext):\n"
                      "    raise ValueError('boom')\n"),
    "Sleepy": HEADER + ("@durable_execution\ndef handler(event, context: DurableContext):\n"
                        "    context.wait(Duration.from_seconds(600), name='nap')\n    return 'woke'\n"),
    "Plain": "def handler(event, context):\n    return event\n",
}


@pytest.fixture
def functions(tmp_path: Path) -> Path:
    folder = tmp_path / "functions"
    for name, source in SOURCES.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "app.py").write_text(source)
    for name in ("Order", "Tax"):  # the durable-order example, as `run` runs it
        shutil.copytree(ROOT / "images" / "durable-order" / name, folder / name)
    return folder


@pytest.fixture
def lam(tmp_path: Path, functions: Path) -> Iterator[Any]:
    with serving(tmp_path, functions=functions) as server:
        yield client(server.url, "lambda")


def wait_status(lam: Any, arn: str, *, until: set[str] | None = None, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        found: dict[str, Any] = lam.get_durable_execution(DurableExecutionArn=arn)
        if (found["Status"] in until if until else found["Status"] != "RUNNING") or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def wait_file(path: Path, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} was not written within {timeout} s")
        time.sleep(0.05)
    return path.read_text()


def code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_request_response_invoke_returns_the_result_and_names_the_execution(lam: Any) -> None:
    answer = lam.invoke(FunctionName="Double", Payload=json.dumps({"n": 21}))
    assert answer["StatusCode"] == 200 and "FunctionError" not in answer
    assert json.loads(answer["Payload"].read()) == {"n": 42}
    arn = answer["DurableExecutionArn"]
    assert arn.startswith(FUNCTION_ARN + "Double:$LATEST/durable-execution/")
    found = lam.get_durable_execution(DurableExecutionArn=arn)
    assert found["Status"] == "SUCCEEDED" and json.loads(found["Result"]) == {"n": 42}
    assert json.loads(found["InputPayload"]) == {"n": 21} and found["EndTimestamp"] >= found["StartTimestamp"]
    assert found["FunctionArn"] == FUNCTION_ARN + "Double:$LATEST"
    lean = lam.get_durable_execution(DurableExecutionArn=arn, IncludeExecutionData=False)
    assert "Result" not in lean and "InputPayload" not in lean and lean["ExecutionDataIncluded"] is False


def test_the_durable_order_example_runs_as_run_runs_it(lam: Any) -> None:
    order = (ROOT / "images" / "durable-order" / "input.json").read_text()
    answer = lam.invoke(FunctionName=FUNCTION_ARN + "Order", Payload=order)
    result = json.loads(answer["Payload"].read())
    assert "FunctionError" not in answer, result
    assert result["order"] == "o-42" and result["tax"] == 0.8 and result["approval"] == "auto-approved"
    history = lam.get_durable_execution_history(DurableExecutionArn=answer["DurableExecutionArn"])["Events"]
    kinds = [event["EventType"] for event in history]
    assert kinds[0] == "ExecutionStarted" and kinds[-1] == "ExecutionSucceeded"
    assert {"StepSucceeded", "WaitStarted", "WaitSucceeded", "ChainedInvokeStarted", "ChainedInvokeSucceeded",
            "ContextSucceeded"} <= set(kinds)
    assert [event["EventId"] for event in history] == list(range(1, len(history) + 1))
    wait = next(event for event in history if event["EventType"] == "WaitStarted")
    assert wait["Name"] == "cool-off" and wait["WaitStartedDetails"]["Duration"] == 1
    tax = next(event for event in history if event["EventType"] == "ChainedInvokeStarted")
    assert tax["ChainedInvokeStartedDetails"]["FunctionName"] == "Tax"


def test_a_callback_completed_through_the_api_resumes_the_execution(lam: Any, tmp_path: Path) -> None:
    file = tmp_path / "callback-id"
    started = lam.invoke(FunctionName="Approve", InvocationType="Event", DurableExecutionName="approve-1",
                         Payload=json.dumps({"file": str(file)}))
    assert started["StatusCode"] == 202
    arn = started["DurableExecutionArn"]
    assert arn.endswith("/durable-execution/approve-1/" + arn.rsplit("/", 1)[1])
    callback_id = wait_file(file)
    lam.send_durable_execution_callback_heartbeat(CallbackId=callback_id)
    assert lam.get_durable_execution(DurableExecutionArn=arn)["Status"] == "RUNNING"
    history = lam.get_durable_execution_history(DurableExecutionArn=arn)["Events"]
    started_event = next(e for e in history if e["EventType"] == "CallbackStarted")
    assert started_event["CallbackStartedDetails"]["CallbackId"] == callback_id
    assert started_event["CallbackStartedDetails"]["Timeout"] == 300
    lam.send_durable_execution_callback_success(CallbackId=callback_id, Result=json.dumps("ana"))
    found = wait_status(lam, arn)
    # the callback's payload reaches the handler as the text sent (the SDK's default serdes, as on AWS)
    assert found["Status"] == "SUCCEEDED" and json.loads(found["Result"]) == {"approval": '"ana"'}
    with pytest.raises(ClientError) as again:
        lam.send_durable_execution_callback_success(CallbackId=callback_id, Result=b"\"bo\"")
    assert code(again) == "InvalidParameterValueException"
    with pytest.raises(ClientError) as beat:
        lam.send_durable_execution_callback_heartbeat(CallbackId=callback_id)
    assert code(beat) == "InvalidParameterValueException"
    kinds = [e["EventType"] for e in lam.get_durable_execution_history(DurableExecutionArn=arn)["Events"]]
    assert "CallbackSucceeded" in kinds and kinds[-1] == "ExecutionSucceeded"


def test_a_failed_callback_fails_the_execution_with_its_error(lam: Any, tmp_path: Path) -> None:
    file = tmp_path / "callback-id"
    arn = lam.invoke(FunctionName="Approve", InvocationType="Event",
                     Payload=json.dumps({"file": str(file)}))["DurableExecutionArn"]
    lam.send_durable_execution_callback_failure(CallbackId=wait_file(file),
                                                Error={"ErrorType": "Rejected", "ErrorMessage": "over budget"})
    found = wait_status(lam, arn)
    assert found["Status"] == "FAILED" and "over budget" in found["Error"]["ErrorMessage"]


def test_a_failing_handler_answers_its_error_as_lambda_does(lam: Any) -> None:
    answer = lam.invoke(FunctionName="Boom", Payload=b"{}")
    assert answer["StatusCode"] == 200 and answer["FunctionError"] == "Unhandled"
    payload = json.loads(answer["Payload"].read())
    assert "boom" in payload["errorMessage"] and payload["errorType"]
    found = lam.get_durable_execution(DurableExecutionArn=answer["DurableExecutionArn"])
    assert found["Status"] == "FAILED" and "boom" in found["Error"]["ErrorMessage"]


def test_stop_ends_a_waiting_execution_and_delete_forgets_it(lam: Any) -> None:
    arn = lam.invoke(FunctionName="Sleepy", InvocationType="Event", Payload=b"{}")["DurableExecutionArn"]
    wait_status(lam, arn, until={"RUNNING"})
    deadline = time.monotonic() + 30
    while not any(e["EventType"] == "WaitStarted"
                  for e in lam.get_durable_execution_history(DurableExecutionArn=arn)["Events"]):
        assert time.monotonic() < deadline, "the wait never started"
        time.sleep(0.05)
    with pytest.raises(ClientError) as running:
        lam.delete_durable_execution(DurableExecutionArn=arn)
    assert code(running) == "ResourceConflictException"
    stopped = lam.stop_durable_execution(DurableExecutionArn=arn, Error={"ErrorType": "Enough",
                                                                          "ErrorMessage": "no more naps"})
    assert stopped["StopTimestamp"]
    found = lam.get_durable_execution(DurableExecutionArn=arn)
    assert found["Status"] == "STOPPED" and found["Error"] == {"ErrorType": "Enough", "ErrorMessage": "no more naps"}
    assert lam.get_durable_execution_history(DurableExecutionArn=arn)["Events"][-1]["EventType"] == "ExecutionStopped"
    lam.stop_durable_execution(DurableExecutionArn=arn)  # stopping a stopped execution again answers its stop
    assert lam.delete_durable_execution(DurableExecutionArn=arn)["DeletionRequestTimestamp"]
    with pytest.raises(ClientError) as gone:
        lam.get_durable_execution(DurableExecutionArn=arn)
    assert code(gone) == "ResourceNotFoundException"


def test_list_filters_by_status_and_name_and_pages(lam: Any) -> None:
    arns = [lam.invoke(FunctionName="Double", Payload=json.dumps({"n": i}), DurableExecutionName=f"d-{i}")
            ["DurableExecutionArn"] for i in range(3)]
    sleepy = lam.invoke(FunctionName="Sleepy", InvocationType="Event", Payload=b"{}")["DurableExecutionArn"]
    listed = lam.list_durable_executions_by_function(FunctionName="Double")["DurableExecutions"]
    assert [e["DurableExecutionArn"] for e in listed] == arns[::-1]  # newest first
    assert all(e["Status"] == "SUCCEEDED" and e["DurableExecutionName"].startswith("d-") for e in listed)
    oldest = lam.list_durable_executions_by_function(FunctionName="Double", ReverseOrder=True)["DurableExecutions"]
    assert [e["DurableExecutionArn"] for e in oldest] == arns
    first = lam.list_durable_executions_by_function(FunctionName="Double", MaxItems=2)
    rest = lam.list_durable_executions_by_function(FunctionName="Double", MaxItems=2, Marker=first["NextMarker"])
    assert [e["DurableExecutionArn"] for e in first["DurableExecutions"] + rest["DurableExecutions"]] == arns[::-1]
    assert "NextMarker" not in rest
    named = lam.list_durable_executions_by_function(FunctionName="Double", DurableExecutionName="d-1")
    assert [e["DurableExecutionArn"] for e in named["DurableExecutions"]] == [arns[1]]
    running = lam.list_durable_executions_by_function(FunctionName="Sleepy", Statuses=["RUNNING"])
    assert [e["DurableExecutionArn"] for e in running["DurableExecutions"]] == [sleepy]
    assert lam.list_durable_executions_by_function(FunctionName="Sleepy", Statuses=["SUCCEEDED"])[
        "DurableExecutions"] == []
    lam.stop_durable_execution(DurableExecutionArn=sleepy)


def test_an_execution_name_is_an_idempotency_key(lam: Any, tmp_path: Path) -> None:
    payload = json.dumps({"file": str(tmp_path / "cb")})
    first = lam.invoke(FunctionName="Approve", InvocationType="Event", DurableExecutionName="once", Payload=payload)
    again = lam.invoke(FunctionName="Approve", InvocationType="Event", DurableExecutionName="once", Payload=payload)
    assert again["DurableExecutionArn"] == first["DurableExecutionArn"]
    with pytest.raises(ClientError) as other:
        lam.invoke(FunctionName="Approve", InvocationType="Event", DurableExecutionName="once", Payload=b"{}")
    assert code(other) == "DurableExecutionAlreadyStartedException"
    assert other.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    lam.stop_durable_execution(DurableExecutionArn=first["DurableExecutionArn"])
    with pytest.raises(ClientError) as ended:
        lam.invoke(FunctionName="Approve", InvocationType="Event", DurableExecutionName="once", Payload=payload)
    assert code(ended) == "DurableExecutionAlreadyStartedException"


def test_checkpoint_and_get_state_serve_the_sdk_over_the_store(lam: Any, tmp_path: Path) -> None:
    file = tmp_path / "callback-id"
    arn = lam.invoke(FunctionName="Approve", InvocationType="Event",
                     Payload=json.dumps({"file": str(file)}))["DurableExecutionArn"]
    wait_file(file)
    execution_id = arn.rsplit("/", 1)[1]
    state = lam.get_durable_execution_state(DurableExecutionArn=arn, CheckpointToken=f"{execution_id}:0")
    types = {op["Type"] for op in state["Operations"]}
    assert {"EXECUTION", "CALLBACK"} <= types
    execution = next(op for op in state["Operations"] if op["Type"] == "EXECUTION")
    assert json.loads(execution["ExecutionDetails"]["InputPayload"]) == {"file": str(file)}
    done = lam.checkpoint_durable_execution(
        DurableExecutionArn=arn, CheckpointToken=f"{execution_id}:0",
        Updates=[{"Id": "outside-1", "Type": "STEP", "Action": "START", "Name": "outside"},
                 {"Id": "outside-1", "Type": "STEP", "Action": "SUCCEED", "Payload": "7"}])
    assert done["CheckpointToken"].startswith(f"{execution_id}:")
    step = next(op for op in done["NewExecutionState"]["Operations"] if op["Id"] == "outside-1")
    assert step["Status"] == "SUCCEEDED" and step["StepDetails"]["Result"] == "7"
    conflict = lam.checkpoint_durable_execution(  # the step's outcome is in the log: first wins, no token
        DurableExecutionArn=arn, CheckpointToken=done["CheckpointToken"],
        Updates=[{"Id": "outside-1", "Type": "STEP", "Action": "SUCCEED", "Payload": "8"}])
    assert "CheckpointToken" not in conflict
    paged = lam.get_durable_execution_state(DurableExecutionArn=arn, CheckpointToken=f"{execution_id}:0", MaxItems=1)
    assert len(paged["Operations"]) == 1 and paged["NextMarker"]
    with pytest.raises(ClientError) as bad_token:
        lam.get_durable_execution_state(DurableExecutionArn=arn, CheckpointToken="forged:1")
    assert code(bad_token) == "InvalidParameterValueException"
    lam.stop_durable_execution(DurableExecutionArn=arn)
    with pytest.raises(ClientError) as ended:
        lam.checkpoint_durable_execution(DurableExecutionArn=arn, CheckpointToken=done["CheckpointToken"], Updates=[])
    assert code(ended) == "InvalidParameterValueException"


def test_pause_and_resume_are_refused_as_unsupported(lam: Any) -> None:
    arn = lam.invoke(FunctionName="Sleepy", InvocationType="Event", Payload=b"{}")["DurableExecutionArn"]
    for call in (lam.pause_durable_execution, lam.resume_durable_execution):
        with pytest.raises(ClientError) as refused:
            call(DurableExecutionArn=arn)
        assert code(refused) == "UnsupportedOperationException"
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 501
    assert lam.get_durable_execution(DurableExecutionArn=arn)["Status"] == "RUNNING"
    lam.stop_durable_execution(DurableExecutionArn=arn)


def test_documented_errors(lam: Any) -> None:
    missing = FUNCTION_ARN + "Double:$LATEST/durable-execution/nope/00000000-0000-0000-0000-000000000000"
    cases = [
        (lambda: lam.invoke(FunctionName="Nobody", Payload=b"{}"), "ResourceNotFoundException"),
        (lambda: lam.invoke(FunctionName="Double:7", Payload=b"{}"), "ResourceNotFoundException"),
        (lambda: lam.invoke(FunctionName="arn:aws:lambda:eu-west-1:123456789012:function:Double", Payload=b"{}"),
         "ResourceNotFoundException"),
        (lambda: lam.invoke(FunctionName="Plain", Payload=b"{}"), "InvalidParameterValueException"),
        (lambda: lam.invoke(FunctionName="Double", Payload=b"{not json"), "InvalidRequestContentException"),
        (lambda: lam.invoke(FunctionName="Double", Payload=b"{}", DurableExecutionName="bad name!"),
         "InvalidParameterValueException"),
        (lambda: lam.get_durable_execution(DurableExecutionArn=missing), "ResourceNotFoundException"),
        (lambda: lam.get_durable_execution(DurableExecutionArn="arn:aws:lambda:bogus"),
         "InvalidParameterValueException"),
        (lambda: lam.get_durable_execution_history(DurableExecutionArn=missing), "ResourceNotFoundException"),
        (lambda: lam.stop_durable_execution(DurableExecutionArn=missing), "ResourceNotFoundException"),
        (lambda: lam.delete_durable_execution(DurableExecutionArn=missing), "ResourceNotFoundException"),
        (lambda: lam.list_durable_executions_by_function(FunctionName="Nobody"), "ResourceNotFoundException"),
        (lambda: lam.list_durable_executions_by_function(FunctionName="Double", Marker="x"),
         "InvalidParameterValueException"),
        (lambda: lam.send_durable_execution_callback_success(CallbackId="not-a-callback", Result=b"1"),
         "InvalidParameterValueException"),
        (lambda: lam.checkpoint_durable_execution(DurableExecutionArn=missing, CheckpointToken="t", Updates=[]),
         "InvalidParameterValueException"),
    ]
    for call, expected in cases:
        with pytest.raises(ClientError) as refused:
            call()
        assert code(refused) == expected, refused.value.response
    dry = lam.invoke(FunctionName="Double", InvocationType="DryRun")
    assert dry["StatusCode"] == 204


def test_the_sdk_with_its_default_boto3_client_reads_its_state_from_serve(
        lam: Any, tmp_path: Path, functions: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler run outside unum, its SDK on its own boto3 client (`AWS_ENDPOINT_URL_LAMBDA` at
    serve): GetDurableExecutionState answers it from the store, and it replays to the callback
    it waits for (PENDING), as on Lambda."""
    import importlib.util

    from aws_durable_execution_sdk_python.lambda_service import LambdaClient

    file = tmp_path / "callback-id"
    arn = lam.invoke(FunctionName="Approve", InvocationType="Event",
                     Payload=json.dumps({"file": str(file)}))["DurableExecutionArn"]
    callback_id = wait_file(file)
    url = lam.meta.endpoint_url
    for key, value in {"AWS_ENDPOINT_URL_LAMBDA": url, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(LambdaClient, "_cached_boto_client", None)
    spec = importlib.util.spec_from_file_location("approve_outside", functions / "Approve" / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Context:
        aws_request_id, function_name = "outside-1", "Approve"
        invoked_function_arn = FUNCTION_ARN + "Approve"
        memory_limit_in_mb, log_group_name, log_stream_name = 128, "", ""

        @staticmethod
        def get_remaining_time_in_millis() -> int:
            return 60_000

    event = {"DurableExecutionArn": arn, "CheckpointToken": f"{arn.rsplit('/', 1)[1]}:0",
             "InitialExecutionState": {"Operations": [], "NextMarker": "0"}}
    out = module.handler(event, Context())
    assert out["Status"] == "PENDING", out
    assert file.read_text() == callback_id  # replayed from the state served: its submitter did not run again
    events = lam.get_durable_execution_history(DurableExecutionArn=arn)["Events"]
    assert [e["EventType"] for e in events].count("CallbackStarted") == 1
    assert LambdaClient._cached_boto_client is not None
    assert LambdaClient._cached_boto_client.meta.endpoint_url == url
    assert lam.get_durable_execution(DurableExecutionArn=arn)["Status"] == "RUNNING"
    lam.stop_durable_execution(DurableExecutionArn=arn)


def test_a_waiting_execution_survives_a_restart_of_serve(tmp_path: Path, functions: Path) -> None:
    file = tmp_path / "callback-id"
    with serving(tmp_path, functions=functions) as server:
        lam = client(server.url, "lambda")
        arn = lam.invoke(FunctionName="Approve", InvocationType="Event",
                         Payload=json.dumps({"file": str(file)}))["DurableExecutionArn"]
        callback_id = wait_file(file)
    with serving(tmp_path, functions=functions) as server:
        lam = client(server.url, "lambda")
        assert lam.get_durable_execution(DurableExecutionArn=arn)["Status"] == "RUNNING"
        lam.send_durable_execution_callback_success(CallbackId=callback_id, Result=b"\"later\"")
        found = wait_status(lam, arn)
        assert found["Status"] == "SUCCEEDED" and json.loads(found["Result"]) == {"approval": '"later"'}
