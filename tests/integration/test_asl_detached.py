"""Fire-and-forget `arn:aws:states:::states:startExecution` (issue 20): the child starts as a
workflow of its own and the Task returns AWS's StartExecution result, through the real CLI
(`python -m builder run`, `inspect`, `list`) and, under injected faults, the embedded platform."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
START = "arn:aws:states:::states:startExecution"
CHILD_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:Child"
DOUBLE = "def handler(event, context):\n    return {'v': event['n'] * 2, 'execution': context.workflow_id}\n"
CHILD = {"StartAt": "Double", "States": {
    "Double": {"Type": "Task", "Resource": "Double", "Next": "Check"},
    "Check": {"Type": "Choice", "Choices": [{"Variable": "$.v", "NumericGreaterThan": 100, "Next": "TooBig"}],
              "Default": "Done"},
    "TooBig": {"Type": "Fail", "Error": "Child.TooBig", "Cause": "over 100"},
    "Done": {"Type": "Succeed"}}}


def folder(tmp_path: Path, parameters: dict[str, Any]) -> Path:
    (tmp_path / "functions" / "Double").mkdir(parents=True, exist_ok=True)
    (tmp_path / "functions" / "Double" / "app.py").write_text(DOUBLE)
    (tmp_path / "Child.asl.json").write_text(json.dumps(CHILD))
    (tmp_path / "statemachine.json").write_text(json.dumps({"StartAt": "Kick", "States": {
        "Kick": {"Type": "Task", "Resource": START, "Parameters": {"StateMachineArn": CHILD_ARN, **parameters},
                 "ResultPath": "$.started", "Next": "After"},
        "After": {"Type": "Pass", "Parameters": {"arn.$": "$.started.ExecutionArn", "date.$": "$.started.StartDate",
                                                 "n.$": "$.n"}, "End": True}}}))
    return tmp_path


def builder(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "UNUM_ASL_TIME_SCALE": "0.001"})


def test_the_task_returns_start_executions_result_and_the_child_runs_as_its_own_workflow(tmp_path: Path) -> None:
    work = folder(tmp_path, {"Input": {"n.$": "$.n"}, "Name": "order-21"})
    store = str(tmp_path / "store")
    run = builder("run", str(work), "--input", '{"n": 21}', "--store", store, "--compact")

    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["arn"] == "arn:aws:states:us-east-1:123456789012:execution:Child:order-21"
    assert isinstance(out["date"], int) and out["date"] > 1_600_000_000_000  # epoch milliseconds
    assert out["n"] == 21
    child = builder("inspect", "Child:order-21", "--store", store)  # the workflow of Child's execution order-21
    assert child.returncode == 0, child.stderr
    record = json.loads(child.stdout)
    assert record["status"] == "succeeded"
    assert record["results"] == [{"v": 42, "execution": "Child:order-21"}]  # its own workflow: MACHINE:NAME
    listed = builder("list", "--store", store)
    assert len([line for line in listed.stdout.splitlines()[1:] if line.strip()]) == 2, listed.stdout


def test_the_parent_does_not_wait_for_the_childs_outcome(tmp_path: Path) -> None:
    """A child that fails leaves the parent succeeded (nothing joins it); Input given as JSON text
    is parsed, and without a Name the child gets a UUID-shaped one."""
    work = folder(tmp_path, {"Input.$": "States.JsonToString($)"})
    store = str(tmp_path / "store")
    run = builder("run", str(work), "--input", '{"n": 60}', "--store", store, "--compact")

    assert run.returncode == 0, run.stderr
    name = json.loads(run.stdout)["arn"].rsplit(":", 1)[1]
    assert len(name) == 36 and name.count("-") == 4, name
    child = builder("inspect", f"Child:{name}", "--store", store)
    assert child.returncode == 1  # inspect's exit code for a failed workflow
    record = json.loads(child.stdout)
    assert record["status"] == "failed"
    assert (record["failure"]["Error"], record["failure"]["Cause"]) == ("Child.TooBig", "over 100")


def test_a_bad_name_fails_the_task_with_aws_error(tmp_path: Path) -> None:
    work = folder(tmp_path, {"Name": "no spaces allowed"})
    run = builder("run", str(work), "--input", '{"n": 1}', "--store", str(tmp_path / "store"), "--compact")

    assert run.returncode == 1
    assert "StepFunctions.InvalidNameException: Invalid Name: 'no spaces allowed'" in run.stderr, run.stderr


@pytest.mark.parametrize("seed", range(3))
def test_the_child_starts_once_under_faults(tmp_path: Path, seed: int) -> None:
    """Duplicated, crashed and failing deliveries: one child workflow, with the fault-free outcome."""
    from builder.compiler import compile_state_machine
    from unum_entry.local.faults import FaultInjector, FaultRates
    from unum_entry.local.platform import local_platform
    from unum_entry.stores import open_store
    from unum_entry.workflow import load_workflow

    work = folder(tmp_path, {"Input": {"n.$": "$.n"}})
    out = compile_state_machine(work / "statemachine.json", tmp_path / "wf").out
    store = open_store(str(tmp_path / "store"))
    with local_platform(load_workflow(out), store, workers=4,
                        faults=FaultInjector(FaultRates.everything(0.2), seed=seed)) as platform:
        outcome = platform.run({"n": 5}, timeout=60)
        assert outcome.failure is None, outcome.failure
        name = outcome.result["arn"].rsplit(":", 1)[1]
        child = platform.outcome(f"Child:{name}")
        others = {entry.workflow for entry in store.workflows()} - {f"Child:{name}"}
    store.close()
    assert child.failure is None and child.result == {"v": 10, "execution": f"Child:{name}"}
    assert len(others) == 1, others  # the parent; no second child


def test_the_deploy_template_lets_the_starting_function_invoke_the_childs_entry(tmp_path: Path) -> None:
    from builder.compiler import compile_state_machine
    from builder.deploy.aws import logical_id, sam_template
    from unum_entry.workflow import load_workflow

    work = folder(tmp_path, {"Input": {"n.$": "$.n"}})
    result = compile_state_machine(work / "statemachine.json", tmp_path / "wf")
    entry = next(name for name, fn in result.functions.items() if fn["head"] == "Child.Double")
    template = sam_template(load_workflow(result.out), image_prefix="123.dkr.ecr.us-east-1.amazonaws.com")
    statements = template["Resources"][logical_id("Kick")]["Properties"]["Policies"][0]["Statement"]
    invoked = next(s["Resource"] for s in statements if s["Action"] == ["lambda:InvokeFunction"])
    assert {"Fn::Sub": f"arn:${{AWS::Partition}}:lambda:${{AWS::Region}}:${{AWS::AccountId}}:function:"
                       f"${{AWS::StackName}}-{entry}"} in invoked, invoked


def test_the_childs_states_keep_their_names_and_count_their_own_history(tmp_path: Path) -> None:
    """The child is compiled as `Child.STATE` but is an execution of its own: `$$.State.Name` and
    a runtime cause name its states as its definition does, with ids from its own history."""
    work = folder(tmp_path, {"Name": "named"})
    (work / "Child.asl.json").write_text(json.dumps({"StartAt": "Prep", "States": {
        "Prep": {"Type": "Pass", "Parameters": {"me.$": "$$.State.Name"}, "Next": "Fast"},
        "Fast": {"Type": "Pass", "Parameters": {"m.$": "$.nope"}, "End": True}}}))
    store = str(tmp_path / "store")
    run = builder("run", str(work), "--input", '{"n": 1}', "--store", store, "--compact")

    assert run.returncode == 0, run.stderr
    record = json.loads(builder("inspect", "Child:named", "--store", store).stdout)
    assert record["failure"]["Error"] == "States.Runtime"
    assert record["failure"]["Cause"] == (
        "An error occurred while executing the state 'Fast' (entered at the event id #4). The JSONPath '$.nope' "
        "specified for the field 'm.$' could not be found in the input '{\"me\":\"Prep\"}'")


WAITING_CHILD = {"StartAt": "Hold", "States": {
    "Hold": {"Type": "Wait", "SecondsPath": "$.hold", "Next": "Double"},
    "Double": {"Type": "Task", "Resource": "Double", "End": True}}}


def twice(tmp_path: Path, second_input: dict[str, Any], pause: int) -> Path:
    """A parent that starts Child's execution `dup` twice: Input {n, hold} then `second_input`,
    `pause` (scaled) seconds apart; the second start's error is caught into `$.second`."""
    (tmp_path / "functions" / "Double").mkdir(parents=True, exist_ok=True)
    (tmp_path / "functions" / "Double" / "app.py").write_text(DOUBLE)
    (tmp_path / "Child.asl.json").write_text(json.dumps(WAITING_CHILD))
    start = {"StateMachineArn": CHILD_ARN, "Name": "dup"}
    (tmp_path / "statemachine.json").write_text(json.dumps({"StartAt": "First", "States": {
        "First": {"Type": "Task", "Resource": START, "Parameters": {**start, "Input": {"n.$": "$.n", "hold.$": "$.hold"}},
                  "ResultPath": "$.first", "Next": "Pause"},
        "Pause": {"Type": "Wait", "Seconds": pause, "Next": "Second"},
        "Second": {"Type": "Task", "Resource": START, "Parameters": {**start, "Input": second_input},
                   "ResultPath": "$.second", "End": True,
                   "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.second", "Next": "Caught"}]},
        "Caught": {"Type": "Pass", "End": True}}}))
    return tmp_path


@pytest.mark.parametrize("case", ["open, same input", "open, other input", "closed, same input"])
def test_a_second_start_of_one_name_is_idempotent_only_while_open_with_the_same_input(tmp_path: Path, case: str) -> None:
    """AWS StartExecution (Standard): same name and input as a running execution succeeds with the
    original's response; another input, or a closed execution, is ExecutionAlreadyExists."""
    open_ = case.startswith("open")
    second = {"n.$": "$.n", "hold.$": "$.hold"} if case.endswith("same input") else {"n": 99, "hold.$": "$.hold"}
    # open: the child holds 3000 s scaled (3 s) while the second start comes at once; closed: the
    # child holds 0 s and the second start comes 2000 s scaled (2 s) later
    work = twice(tmp_path, second, pause=0 if open_ else 2000)
    store = str(tmp_path / "store")
    run = builder("run", str(work), "--input", json.dumps({"n": 4, "hold": 3000 if open_ else 0}), "--store", store,
                  "--compact")

    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    arn = "arn:aws:states:us-east-1:123456789012:execution:Child:dup"
    assert out["first"]["ExecutionArn"] == arn
    if case == "open, same input":
        assert out["second"] == out["first"]  # the original's ExecutionArn and StartDate
    else:
        assert out["second"] == {"Error": "StepFunctions.ExecutionAlreadyExistsException",
                                 "Cause": f"Execution Already Exists: '{arn}'"}
    record = json.loads(builder("inspect", "Child:dup", "--store", store).stdout)
    assert record["status"] == "succeeded" and record["results"] == [{"v": 8, "execution": "Child:dup"}]
    listed = builder("list", "--store", store)
    assert len([line for line in listed.stdout.splitlines()[1:] if line.strip()]) == 2, listed.stdout  # one child


def test_two_machines_may_use_the_same_name(tmp_path: Path) -> None:
    """Execution names are unique per state machine: Child's and Other's `same` are two workflows,
    and a workflow already named `same` in the store is not touched."""
    work = folder(tmp_path, {"Input": {"n.$": "$.n"}, "Name": "same"})
    (work / "Other.asl.json").write_text(json.dumps(CHILD))
    doc = json.loads((work / "statemachine.json").read_text())
    doc["States"]["After"]["Next"] = "KickOther"
    del doc["States"]["After"]["End"]
    doc["States"]["KickOther"] = {"Type": "Task", "Resource": START, "ResultPath": "$.other", "End": True,
                                  "Parameters": {"StateMachineArn": CHILD_ARN.replace(":Child", ":Other"),
                                                 "Input": {"n.$": "$.n"}, "Name": "same"}}
    (work / "statemachine.json").write_text(json.dumps(doc))
    store = str(tmp_path / "store")
    unrelated = builder("run", str(folder(tmp_path / "u", {"Name": "x"})), "--input", '{"n": 1}', "--store", store,
                        "--workflow-id", "same", "--compact")
    assert unrelated.returncode == 0, unrelated.stderr
    run = builder("run", str(work), "--input", '{"n": 7}', "--store", store, "--compact")

    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["other"]["ExecutionArn"] == "arn:aws:states:us-east-1:123456789012:execution:Other:same"
    for machine in ("Child", "Other"):
        record = json.loads(builder("inspect", f"{machine}:same", "--store", store).stdout)
        assert record["status"] == "succeeded" and record["results"] == [{"v": 14, "execution": f"{machine}:same"}]
    mine = json.loads(builder("inspect", "same", "--store", store).stdout)
    assert mine["status"] == "succeeded" and mine["results"][0]["arn"].endswith(":execution:Child:x"), mine


def test_the_childs_context_object_names_the_execution_as_aws_does(tmp_path: Path) -> None:
    """The workflow id is `Child:order-1`; `$$.Execution.Name` / `.Id` are AWS's (`order-1`)."""
    work = folder(tmp_path, {"Name": "order-1"})
    (work / "Child.asl.json").write_text(json.dumps({"StartAt": "Show", "States": {"Show": {
        "Type": "Pass", "Parameters": {"name.$": "$$.Execution.Name", "id.$": "$$.Execution.Id"}, "End": True}}}))
    store = str(tmp_path / "store")
    run = builder("run", str(work), "--input", '{"n": 1}', "--store", store, "--compact")

    assert run.returncode == 0, run.stderr
    record = json.loads(builder("inspect", "Child:order-1", "--store", store).stdout)
    assert record["results"] == [{"name": "order-1",
                                  "id": "arn:aws:states:us-east-1:123456789012:execution:Child:order-1"}]
