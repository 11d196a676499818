"""Step Functions parity (issue 11) through the real CLI: each group of behaviours that used to
differ from AWS runs as a small state machine with `python -m builder run`, and each compile-time
rejection goes through `python -m builder compile` (one line naming file, state and field, exit 2)."""

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


def cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "UNUM_ASL_TIME_SCALE": "0.001", **(env or {})})


def machine(tmp_path: Path, definition: dict[str, Any] | str, functions: dict[str, str] | None = None) -> Path:
    """A state machine file (and its functions' code) in `tmp_path`."""
    path = tmp_path / "statemachine.json"
    path.write_text(definition if isinstance(definition, str) else json.dumps(definition))
    for name, source in (functions or {}).items():
        (tmp_path / "functions" / name).mkdir(parents=True)
        (tmp_path / "functions" / name / "app.py").write_text(source)
    return path


def run(tmp_path: Path, path: Path, value: Any, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cli("run", path, "--input", json.dumps(value), "--store", tmp_path / "store", "--compact", *extra, env=env)


def test_intrinsics_behave_as_on_aws(tmp_path: Path) -> None:
    path = machine(tmp_path, {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True, "Parameters": {
        "halfUp.$": "States.MathAdd($.a, $.b)", "halves.$": "States.MathAdd($.c, $.d)",
        "blank.$": "States.StringToJson($.blank)", "text.$": "States.Format('args: {}', $.o)"}}}})
    proc = run(tmp_path, path, {"a": -1.49, "b": -1.5, "c": -0.5, "d": 0.5, "blank": " ", "o": {"Arg1": 1, "Arg2": []}})

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"halfUp": -2, "halves": 1, "blank": None, "text": "args: {Arg1=1, Arg2=[]}"}


def test_jsonata_literals_boolean_conditions_and_singletons(tmp_path: Path) -> None:
    path = machine(tmp_path, {"QueryLanguage": "JSONata", "StartAt": "C", "States": {
        "C": {"Type": "Choice", "Choices": [{"Condition": True, "Next": "P"}], "Default": "P"},
        "P": {"Type": "Pass", "End": True, "Output": {"literal": "total: {% 1 + 1 %}", "one": "{% $range(1, 9, 9) %}"}}}})
    proc = run(tmp_path, path, {})

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"literal": "total: {% 1 + 1 %}", "one": 1}


def test_jsonata_map_over_a_non_array_fails_with_query_evaluation_error(tmp_path: Path) -> None:
    path = machine(tmp_path, {"QueryLanguage": "JSONata", "StartAt": "M", "States": {"M": {
        "Type": "Map", "Items": "{% $states.input.things %}", "End": True,
        "ItemProcessor": {"StartAt": "I", "States": {"I": {"Type": "Pass", "End": True}}}}}})
    proc = run(tmp_path, path, {"things": {"a": 1}})

    assert proc.returncode == 1, proc.stderr
    assert ("States.QueryEvaluationError: "
            "An error occurred while executing the state 'M' (entered at the event id #2). "
            "The JSONata expression '$states.input.things' specified for the field 'Items' "
            "returned an unexpected result type. Expected 'array', but was 'object'") in proc.stderr


def test_jsonpath_keys_jayway_indices_and_nested_choice_comments(tmp_path: Path) -> None:
    path = machine(tmp_path, {"StartAt": "C", "States": {
        "C": {"Type": "Choice", "Choices": [{"And": [
            {"Comment": "a quoted key", "Variable": "$['it\\'s']", "BooleanEquals": True},
            {"Not": {"Comment": "not empty", "Variable": "$.list[0]", "IsPresent": False}}], "Next": "P"}],
              "Default": "F"},
        "P": {"Type": "Pass", "End": True, "Parameters": {"last.$": "$.list[(@.length-1)]", "slash.$": "$['a\\\\b']"}},
        "F": {"Type": "Fail", "Error": "NoMatch"}}})
    proc = run(tmp_path, path, {"it's": True, "list": [1, 2, 3], "a\\b": "x"})

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"last": 3, "slash": "x"}


def test_wait_seconds_path_that_is_not_an_integer_fails(tmp_path: Path) -> None:
    path = machine(tmp_path, {"StartAt": "W", "States": {"W": {"Type": "Wait", "SecondsPath": "$.s", "End": True}}})

    assert run(tmp_path, path, {"s": 2}).returncode == 0
    proc = run(tmp_path, path, {"s": 1.5})
    assert proc.returncode == 1 and "States.Runtime" in proc.stderr and "Traceback" not in proc.stderr


def test_lambda_bytes_and_the_payload_limit(tmp_path: Path) -> None:
    path = machine(tmp_path, {"StartAt": "Bytes", "States": {
        "Bytes": {"Type": "Task", "Resource": "Bytes", "ResultPath": "$.got", "Next": "Big"},
        "Big": {"Type": "Task", "Resource": "Big", "End": True, "OutputPath": "$.size",
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}]},
        "Caught": {"Type": "Pass", "End": True, "Result": "caught"}}}, {
        "Bytes": 'import json\ndef handler(event, context):\n    return json.dumps({"n": 1}).encode()\n',
        "Big": 'def handler(event, context):\n    return {"size": 300000, "blob": "x" * 300000}\n'})

    proc = run(tmp_path, path, {})
    assert proc.returncode == 1, proc.stdout
    assert "States.DataLimitExceeded: The state/task 'Big' returned a result with a size exceeding" in proc.stderr

    lifted = run(tmp_path, path, {}, env={"UNUM_ASL_DATA_LIMIT": "off"})
    assert lifted.returncode == 0, lifted.stderr
    assert json.loads(lifted.stdout) == 300000


def test_run_and_compile_accept_substitutions(tmp_path: Path) -> None:
    path = machine(tmp_path, '{"StartAt": "D", "States": {"D": {"Type": "Task", "Resource": "${DoubleArn}", '
                             '"Next": "W"}, "W": {"Type": "Wait", "Seconds": ${Wait}, "End": true}}}',
                   {"Double": "def handler(event, context):\n    return event * 2\n"})
    subs = ["--substitution", "DoubleArn=arn:aws:lambda:us-east-1:123456789012:function:Double:live",
            "--substitution", "Wait=1"]
    proc = run(tmp_path, path, 21, *subs)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == 42

    compiled = cli("compile", path, "--out", tmp_path / "wf", *subs)
    assert compiled.returncode == 0, compiled.stderr
    assert "Task 'D' -> Double" in compiled.stdout

    bad = cli("compile", path, "--out", tmp_path / "wf2", "--substitution", "Wait")
    assert bad.returncode == 2 and "--substitution 'Wait': expected KEY=VALUE" in bad.stderr


@pytest.mark.parametrize("definition, expected", [
    ({"StartAt": "M", "States": {"M": {"Type": "Map", "End": True, "ItemBatcher": {
        "MaxItemsPerBatch": 2, "MaxItemsPerBatchPath": "$.n"}, "ItemProcessor": {
        "StartAt": "I", "States": {"I": {"Type": "Pass", "End": True}}}}}},
     "state 'M': ItemBatcher.MaxItemsPerBatchPath: only one of MaxItemsPerBatch, MaxItemsPerBatchPath may be given"),
    ({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True, "Parameters": {"x.$": "States.MathAdd(1,'-1')"}}}},
     "state 'P': Parameters.x.$: \"States.MathAdd(1,'-1')\": the second argument of States.MathAdd must be a number"),
    ({"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "B"}, "B": {"Type": "Pass", "Next": "A"}}},
     "StartAt: no terminal state is reachable from 'A'"),
    ({"StartAt": "T", "States": {"T": {"Type": "Task", "End": True,
                                       "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Double:"}}},
     "state 'T': Resource: 'arn:aws:lambda:us-east-1:123456789012:function:Double:' has an empty qualifier"),
    ({"StartAt": "T", "States": {"T": {"Type": "Task", "End": True, "Resource": "${DoubleArn}"}}},
     "state 'T': Resource: unresolved substitution ${DoubleArn}: pass its value with --substitution DoubleArn=VALUE"),
    ({"StartAt": "T", "States": {"T": {"Type": "Task", "End": True, "Resource": {"Fn::GetAtt": ["Double", "Arn"]}}}},
     "state 'T': Resource: the CloudFormation intrinsic"),
    ({"QueryLanguage": "JSONata", "StartAt": "T", "States": {"T": {
        "Type": "Task", "End": True, "Resource": "arn:aws:states:::lambda:invoke",
        "Arguments": {"FunctionName": "{% $states.input.fn %}"}}}},
     "state 'T': Arguments.FunctionName: a dynamic FunctionName (a JSONata expression) cannot be compiled"),
])
def test_compile_rejects_with_state_field_and_problem(tmp_path: Path, definition: dict[str, Any], expected: str) -> None:
    path = machine(tmp_path, definition)
    proc = cli("compile", path, "--out", tmp_path / "out")

    assert proc.returncode == 2, proc.stdout
    assert expected in proc.stderr and str(path) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
