"""A durable function's `context.invoke` of a compiled Step Functions state machine in the same
workflow folder: the machine (a Pass, a Lambda Task, a 1-second Wait, a second Task in another
function, a Choice to Succeed or Fail) runs as the invoke's own workflow, and its end — its
result, or its Fail state's error — completes the caller's invoke operation exactly once.

Through the real CLI (`python -m builder compile`, then `run` on the folder holding both), and
on the embedded platform under duplicate, concurrent-duplicate and late-duplicate deliveries.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support.faulty_platform import FaultyPlatform
from unum_entry import naming
from unum_entry.envelope import Frame
from unum_entry.local.faults import FaultInjector, FaultRates
from unum_entry.stores import open_store
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:"
MACHINE = {"StartAt": "Prepare", "States": {
    "Prepare": {"Type": "Pass", "Parameters": {"n.$": "$.n", "fail.$": "$.fail", "sink.$": "$.sink"}, "Next": "Double"},
    "Double": {"Type": "Task", "Resource": LAMBDA + "Double", "Next": "Pause"},
    "Pause": {"Type": "Wait", "Seconds": 1, "Next": "Triple"},
    "Triple": {"Type": "Task", "Resource": LAMBDA + "Triple", "Next": "Check"},
    "Check": {"Type": "Choice", "Choices": [{"Variable": "$.fail", "BooleanEquals": True, "Next": "Refuse"}],
              "Default": "Done"},
    "Refuse": {"Type": "Fail", "Error": "Refused", "Cause": "the machine refused"},
    "Done": {"Type": "Succeed"}}}
TASK = '''
from pathlib import Path


def handler(event, context):
    with open(Path(event["sink"]) / "calls", "a") as calls:
        calls.write("{name}\\n")
    if event["n"] < 0:
        raise ValueError("{name} takes no negative n")
    return {{**event, "n": event["n"] * {factor}}}
'''
CALLER = '''
from aws_durable_execution_sdk_python import durable_execution


@durable_execution
def handler(event, context):
    before = context.step(lambda _: event["n"] + 1, name="before")
    try:
        out = context.invoke(event["target"], {"n": before, "fail": event["fail"], "sink": event["sink"]},
                             name="machine")
    except Exception as exc:
        return {"failed": type(exc).__name__, "message": str(exc)}
    after = context.step(lambda _: out["n"] + 1, name="after")
    return {"machine": out["n"], "after": after}
'''


def _folder(tmp_path: Path) -> Path:
    """The state machine compiled by the CLI into the workflow folder, then the durable caller
    added as its entry."""
    source = tmp_path / "machine"
    for name, factor in (("Double", 2), ("Triple", 3)):
        (source / "functions" / name).mkdir(parents=True)
        (source / "functions" / name / "app.py").write_text(TASK.format(name=name, factor=factor))
    (source / "statemachine.json").write_text(json.dumps(MACHINE))
    folder = tmp_path / "wf"
    done = subprocess.run([sys.executable, "-m", "builder", "compile", str(source / "statemachine.json"), "--out",
                           str(folder)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "(entry Double)" in done.stdout
    write_workflow(folder, name="caller", entry="Caller", functions={"Caller": FunctionSource(CALLER)})
    return folder


@pytest.mark.parametrize("target, n, fail, expected", [
    ("Double", 3, False, {"machine": 24, "after": 25}),  # (3 + 1) * 2 * 3, then + 1
    ("Double", 3, True, {"failed": "InvokeError", "message": "the machine refused"}),  # its Fail state
    ("Double", -5, False, {"failed": "InvokeError", "message": "Double takes no negative n"}),  # an uncaught error
    ("Triple", 3, False, {"machine": 12, "after": 13}),  # from another compiled function's first state
])
def test_a_durable_function_invokes_a_compiled_state_machine_through_the_cli(tmp_path: Path, target: str, n: int,
                                                                           fail: bool, expected: dict) -> None:
    folder = _folder(tmp_path)
    (tmp_path / "sink").mkdir()
    store = tmp_path / "unum.db"
    done = subprocess.run([sys.executable, "-m", "builder", "run", str(folder), "--input",
                           json.dumps({"target": target, "n": n, "fail": fail, "sink": str(tmp_path / "sink")}),
                           "--store", str(store),
                           "--compact", "--timeout", "60"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    if "message" in expected:  # the machine's error, its cause as Step Functions gives it (a Task's: Lambda's payload)
        assert out["failed"] == expected["failed"] and expected["message"] in out["message"], out
    else:
        assert out == expected
    workflow_id = done.stderr.split()[1]
    opened = open_store(str(store))
    try:
        _check_one_outcome_per_operation(opened, workflow_id)
    finally:
        opened.close()


def _check_one_outcome_per_operation(store, workflow_id: str) -> None:
    """Every operation of the caller's log, the invoke included, has exactly one outcome."""
    entries, n = [], 0
    invocation = naming.checkpoint_key(workflow_id, "Caller", (Frame(),))
    while (raw := store.get(naming.durable_log_key(invocation, n))) is not None:
        entries.append(json.loads(raw))
        n += 1
    outcomes: Counter[str] = Counter()
    invokes = set()
    for entry in entries:
        for update in entry.get("u", ()):
            if update["Action"] in ("SUCCEED", "FAIL"):
                outcomes[update["Id"]] += 1
            if update["Type"] == "CHAINED_INVOKE":
                invokes.add(update["Id"])
        for completion in entry.get("c", ()):
            outcomes[completion["Id"]] += 1
    assert len(invokes) == 1 and outcomes[next(iter(invokes))] == 1, (invokes, outcomes)
    assert all(count == 1 for count in outcomes.values()), outcomes


def test_the_machine_completes_the_invoke_exactly_once_under_duplicate_deliveries(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (tmp_path / "sink").mkdir()
    store = open_store(str(tmp_path / "unum.db"))
    rates = FaultRates(duplicate=0.5, concurrent_duplicate=0.3, delay=0.3, late_duplicate=1.0)
    platform = FaultyPlatform(load_workflow(folder), store, workers=4, faults=FaultInjector(rates, 7),
                              retry_delay=0.01)
    try:
        outcome = platform.run({"target": "Double", "n": 3, "fail": False, "sink": str(tmp_path / "sink")},
                               timeout=120)
        assert outcome.failure is None, outcome.failure
        assert outcome.result == {"machine": 24, "after": 25}
        platform.redeliver_late()  # every delivery again, the machine's ends included
        platform.wait_idle(60)
        assert platform.outcome(outcome.workflow_id).result == outcome.result
        _check_one_outcome_per_operation(store, outcome.workflow_id)
    finally:
        platform.close()
        store.close()
    calls = Counter((tmp_path / "sink" / "calls").read_text().split())
    assert set(calls) == {"Double", "Triple"}  # at least once each (Tasks are at-least-once, as on AWS)
