"""Lambda durable functions handlers (aws-durable-execution-sdk-python), unchanged, on unum:
through the real CLI (`python -m builder run`, `callback-success|callback-failure`) in a
subprocess, on the embedded engine's SQLite store and on DynamoDB (moto server over HTTP); the
example's result is compared with AWS's own local runner (aws-durable-execution-sdk-python-testing).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "images" / "durable-order"
EXPECTED = {"order": "o-42", "subtotal": 4.0, "tax": 0.8, "checks": ["in-stock", "low-risk"],
            "shipping": {"label": "label-o-42", "carrier": "unum-post"}, "warehouse_polls": 2,
            "approval": "auto-approved", "charged": 4.8}


def cli(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_runs_through_the_cli_with_the_result_of_aws_local_runner(tmp_path: Path) -> None:
    done = cli("run", EXAMPLE, "--input", f"@{EXAMPLE / 'input.json'}", "--store", tmp_path / "unum.db", "--compact")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == EXPECTED

    from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner

    order = _load(EXAMPLE / "Order" / "app.py", "durable_order_app")
    tax = _load(EXAMPLE / "Tax" / "app.py", "durable_tax_app")
    with DurableFunctionTestRunner(handler=order.handler) as runner:
        runner.register_durable_function("Tax", tax.handler)
        aws = runner.run(input=(EXAMPLE / "input.json").read_text(), execution_timeout=60)
    assert aws.result is not None and json.loads(aws.result) == json.loads(done.stdout)


def _order_waiting_for_approval(tmp_path: Path) -> tuple[Path, str]:
    store = tmp_path / "unum.db"
    order = {"id": "o-7", "lines": [{"sku": "fig", "qty": 4, "price": 2.5}],
             "callback_file": str(tmp_path / "callback-id")}
    waiting = cli("run", EXAMPLE, "--input", json.dumps(order), "--store", store)
    assert waiting.returncode == 0, waiting.stderr
    assert waiting.stdout == ""  # no result: the execution waits for its callback
    callback_id = (tmp_path / "callback-id").read_text()
    # Its callback has a timeout (a timer): `run` still says which callback waits and how to complete it.
    assert "durable function callback(s)" in waiting.stderr and "for a timer" not in waiting.stderr
    [command] = _printed_commands(waiting.stderr)
    assert command[3:] == ["callback-success", callback_id, "--result", "JSON", "--store", str(store),
                           "--workflow", str(EXAMPLE)]
    return store, callback_id


def _printed_commands(stderr: str) -> list[list[str]]:
    """The callback-success commands `run` printed, as argument lists."""
    import shlex

    return [shlex.split(line[line.index("python -m builder"):]) for line in stderr.splitlines()
            if "python -m builder callback-success" in line]


def test_callback_success_resumes_the_execution_once_and_a_second_completion_is_refused(tmp_path: Path) -> None:
    store, callback_id = _order_waiting_for_approval(tmp_path)
    first = cli("callback-success", callback_id, "--result", '{"by": "ana"}', "--store", store,
                "--workflow", EXAMPLE, "--compact")  # the command `run` printed, with the result
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["approval"] == {"by": "ana"} and result["charged"] == 12.0
    second = cli("callback-success", callback_id, "--result", '{"by": "bob"}', "--store", store, "--workflow", EXAMPLE)
    assert second.returncode == 2
    assert "already completed" in second.stderr and "Traceback" not in second.stderr
    forged = cli("callback-failure", callback_id[:-4] + "AAAA", "--store", store, "--workflow", EXAMPLE)
    assert forged.returncode == 2 and "Traceback" not in forged.stderr


def test_callback_failure_fails_the_execution_and_the_workflow(tmp_path: Path) -> None:
    store, callback_id = _order_waiting_for_approval(tmp_path)
    failed = cli("callback-failure", callback_id, "--error", "Rejected", "--cause", "over budget", "--store", store,
                 "--workflow", EXAMPLE)
    assert failed.returncode == 1, failed.stderr
    assert "over budget" in failed.stderr and "Traceback" not in failed.stderr


RETRIES = '''
from pathlib import Path

from aws_durable_execution_sdk_python import durable_execution
from aws_durable_execution_sdk_python.config import CallbackConfig, Duration, JitterStrategy, StepConfig
from aws_durable_execution_sdk_python.exceptions import CallbackTimeoutError
from aws_durable_execution_sdk_python.retries import RetryStrategyConfig, create_retry_strategy


def flaky(folder):
    counter = Path(folder) / "attempts"
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    if n < 3:
        raise RuntimeError(f"attempt {n} fails")
    return n


def doomed(_):
    raise ValueError("always")


@durable_execution
def handler(event, context):
    retry = create_retry_strategy(RetryStrategyConfig(max_attempts=5, initial_delay=Duration.from_seconds(1),
                                                      backoff_rate=1, jitter_strategy=JitterStrategy.NONE))
    attempts = context.step(lambda _: flaky(event["folder"]), name="flaky", config=StepConfig(retry_strategy=retry))
    try:
        context.step(doomed, name="doomed",
                     config=StepConfig(retry_strategy=create_retry_strategy(RetryStrategyConfig(max_attempts=1))))
        failure = None
    except Exception as exc:
        failure = type(exc).__name__
    callback = context.create_callback(name="late", config=CallbackConfig(timeout=Duration.from_seconds(1)))
    Path(event["folder"], "callback-id").write_text(callback.callback_id)
    try:
        callback.result()
        timed_out = False
    except CallbackTimeoutError:
        timed_out = True
    return {"attempts": attempts, "doomed": failure, "timed_out": timed_out}
'''

AFTER = "def handler(event, context):\n    return {**event, 'after': 'a plain unum function'}\n"


def _retries_workflow(folder: Path) -> Path:
    write_workflow(folder, name="durable-retries", entry="Durable", functions={
        "Durable": FunctionSource(RETRIES, instructions=[{"op": "invoke", "function": "After"}]),
        "After": FunctionSource(AFTER)})
    return folder


def test_step_retries_a_failed_step_and_a_callback_timeout_then_a_plain_function(tmp_path: Path) -> None:
    workflow = _retries_workflow(tmp_path / "wf")
    done = cli("run", workflow, "--input", json.dumps({"folder": str(tmp_path)}), "--store", tmp_path / "unum.db",
               "--compact")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"attempts": 3, "doomed": "StepError", "timed_out": True,
                                       "after": "a plain unum function"}
    assert (tmp_path / "attempts").read_text() == "3"  # two failed attempts, one success, never re-run
    late = cli("callback-success", (tmp_path / "callback-id").read_text(), "--result", "1", "--store",
               tmp_path / "unum.db", "--workflow", workflow)
    assert late.returncode == 2 and "already completed (TIMED_OUT)" in late.stderr


def test_the_example_on_dynamodb_through_the_cli(moto_server, tmp_path: Path) -> None:
    url = f"dynamodb://unum-durable-{tmp_path.name[-8:].replace('_', '-')}?endpoint={moto_server.endpoint}&create=1"
    done = cli("run", EXAMPLE, "--input", f"@{EXAMPLE / 'input.json'}", "--store", url, "--compact")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == EXPECTED


BIG = '''
from aws_durable_execution_sdk_python import durable_execution


@durable_execution
def handler(event, context):
    blob = context.step(lambda _: "x" * event["size"], name="blob")
    child = context.run_in_child_context(lambda ctx: ctx.step(lambda _: "y" * event["size"], name="inner"),
                                         name="big-child")
    return {"blob": len(blob), "child": len(child)}
'''


def test_values_over_256_kb_are_checkpointed_by_reference_on_dynamodb(moto_server, tmp_path: Path) -> None:
    workflow = write_workflow(tmp_path / "wf", name="durable-big", entry="Big", functions={"Big": FunctionSource(BIG)})
    url = f"dynamodb://unum-durable-big-{tmp_path.name[-8:].replace('_', '-')}?endpoint={moto_server.endpoint}&create=1"
    size = 600 * 1024  # over Lambda's 256 KB checkpoint limit and DynamoDB's 400 KB item limit
    done = cli("run", workflow.folder, "--input", json.dumps({"size": size}), "--store", url, "--compact")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"blob": size, "child": size}


STATE_MACHINE = {"StartAt": "Prepare", "States": {
    "Prepare": {"Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Plain",
                "ResultPath": "$.prepared", "Next": "Durable"},
    "Durable": {"Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Durable",
                "Parameters": {"n.$": "$.n"}, "ResultPath": "$.durable", "End": True}}}

DURABLE_TASK = '''
from aws_durable_execution_sdk_python import durable_execution
from aws_durable_execution_sdk_python.config import Duration


@durable_execution
def handler(event, context):
    doubled = context.step(lambda _: event["n"] * 2, name="double")
    context.wait(Duration.from_seconds(1), name="pause")
    return {"doubled": doubled}
'''


def test_a_step_functions_task_may_be_a_durable_function(tmp_path: Path) -> None:
    """The Task's state input (Parameters, ResultPath) survives the wait: the re-delivery sends
    the first delivery's envelope again."""
    (tmp_path / "functions" / "Plain").mkdir(parents=True)
    (tmp_path / "functions" / "Durable").mkdir(parents=True)
    (tmp_path / "functions" / "Plain" / "app.py").write_text("def handler(event, context):\n    return {'seen': event['n']}\n")
    (tmp_path / "functions" / "Durable" / "app.py").write_text(DURABLE_TASK)
    (tmp_path / "statemachine.json").write_text(json.dumps(STATE_MACHINE))
    done = cli("run", tmp_path / "statemachine.json", "--input", '{"n": 21}', "--store", tmp_path / "unum.db",
               "--compact")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"n": 21, "prepared": {"seen": 21}, "durable": {"doubled": 42}}


APPROVAL = '''
from aws_durable_execution_sdk_python import durable_execution


@durable_execution
def handler(event, context):
    callback = context.create_callback(name="approve")
    return {"approved": callback.result()}
'''


def test_run_prints_how_to_complete_a_waiting_callback_and_that_command_works(tmp_path: Path) -> None:
    workflow = write_workflow(tmp_path / "wf", name="approval", entry="W", functions={"W": FunctionSource(APPROVAL)})
    waiting = cli("run", workflow.folder, "--input", "{}", "--store", tmp_path / "unum.db")
    assert waiting.returncode == 0 and waiting.stdout == "", waiting.stderr
    [command] = _printed_commands(waiting.stderr)
    assert command[:4] == ["python", "-m", "builder", "callback-success"]
    command[command.index("JSON")] = '"yes"'
    done = cli(*command[3:], "--compact")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"approved": '"yes"'}  # the SDK hands a callback's payload over as text


HEARTBEATS = '''
from pathlib import Path

from aws_durable_execution_sdk_python import durable_execution
from aws_durable_execution_sdk_python.config import CallbackConfig, Duration
from aws_durable_execution_sdk_python.exceptions import CallbackTimeoutError


@durable_execution
def handler(event, context):
    callback = context.create_callback(name="worker", config=CallbackConfig(
        timeout=Duration.from_seconds(60), heartbeat_timeout=Duration.from_seconds(3)))
    Path(event["folder"], "callback-id").write_text(callback.callback_id)
    try:
        return {"result": callback.result()}
    except CallbackTimeoutError as exc:
        return {"timed_out": str(exc)}
'''


def test_heartbeats_keep_a_callback_alive_until_they_stop(tmp_path: Path) -> None:
    import time

    workflow = write_workflow(tmp_path / "wf", name="heartbeats", entry="W", functions={"W": FunctionSource(HEARTBEATS)})
    store = tmp_path / "unum.db"
    run = subprocess.Popen([sys.executable, "-m", "builder", "run", str(workflow.folder), "--input",
                            json.dumps({"folder": str(tmp_path)}), "--store", str(store), "--compact"],
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):  # bounded: the execution writes its callback id within a few seconds
            if (tmp_path / "callback-id").exists():
                break
            time.sleep(0.05)
        callback_id = (tmp_path / "callback-id").read_text()
        first = time.monotonic()
        while time.monotonic() - first < 5.0:  # back to back (each a CLI process, about a second): 5 s alive
            beat = cli("callback-heartbeat", callback_id, "--store", store)  # with a 3 s heartbeat timeout
            assert beat.returncode == 0, beat.stderr
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 0, err
    assert json.loads(out) == {"timed_out": "Callback heartbeat timed out"}
    late = cli("callback-heartbeat", callback_id, "--store", store)
    assert late.returncode == 2 and "TIMED_OUT" in late.stderr


def test_inspect_history_lists_every_durable_operation(tmp_path: Path) -> None:
    store = tmp_path / "unum.db"
    done = cli("run", EXAMPLE, "--input", f"@{EXAMPLE / 'input.json'}", "--store", store, "--compact")
    assert done.returncode == 0, done.stderr
    workflow_id = done.stderr.split()[1]
    shown = cli("inspect", workflow_id, "--store", store, "--history", "--json")
    assert shown.returncode == 0, shown.stderr
    operations = json.loads(shown.stdout)["durable"]
    named = {(op["type"], op["name"]): op for op in operations}
    assert {("CONTEXT", "price-lines"), ("CHAINED_INVOKE", "tax"), ("CONTEXT", "checks"), ("WAIT", "cool-off"),
            ("STEP", "warehouse"), ("STEP", "charge")} <= set(named)
    assert all(op["status"] == "SUCCEEDED" for op in operations)
    assert named[("STEP", "warehouse")]["attempt"] == 2  # wait_for_condition polled twice
    text = cli("inspect", workflow_id, "--store", store, "--history")
    assert "durable operations (in log order)" in text.stdout and "cool-off" in text.stdout


ITEM = '''
from aws_durable_execution_sdk_python import durable_execution
from aws_durable_execution_sdk_python.config import Duration


@durable_execution
def handler(event, context):
    length = context.step(lambda _: len(event), name="measure")
    context.wait(Duration.from_seconds(1), name="settle")
    return {"word": event, "length": length}
'''


def test_an_ir_map_fans_durable_functions_out_as_separate_invocations(tmp_path: Path) -> None:
    """The fan-out the SDK's own map cannot do (its branches are threads): an IR map whose item
    function is a durable handler, each item its own execution (and log), joined by a fan-in."""
    workflow = write_workflow(tmp_path / "wf", name="durable-map", entry="Split", functions={
        "Split": FunctionSource("def handler(event, context):\n    return {'words': event['text'].split()}\n",
                                instructions=[{"op": "create_set", "function": "Join", "shape": "aggregate"},
                                              {"op": "map", "function": "Measure", "items": "$.words"}]),
        "Measure": FunctionSource(ITEM, instructions=[{"op": "fan_in", "function": "Join"}]),
        "Join": FunctionSource("def handler(event, context):\n    return [m['length'] for m in event]\n")})
    done = cli("run", workflow.folder, "--input", '{"text": "durable functions fan out"}', "--store",
               tmp_path / "unum.db", "--compact")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [7, 9, 3, 3]
