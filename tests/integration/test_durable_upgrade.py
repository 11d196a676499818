"""The durable replay check of `upgrade` (unum_entry/durable_functions/replay_check.py,
builder/commands/versions.py; docs/versions.md), through the real CLI: a durable handler's
retained operation log replayed against the new version's code must give the same operations
(name, type, order) up to where the workflow stands. A code change that keeps them passes and the
workflow finishes on the new code; a renamed step, a removed wait, a reordering, a handler that
returns early or raises are refused in one line naming the first operation that diverges (exit
2), and nothing changes; the replay runs no step body."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

WORKFLOW = {"unum_workflow": 1, "name": "pay", "entry": "Pay"}
IR = {"unum_ir": 1, "function": "Pay", "handler": "app.handler", "instructions": []}
HEAD = ("from aws_durable_execution_sdk_python import DurableContext, durable_execution\n"
        "from aws_durable_execution_sdk_python.config import Duration\n\n\n"
        "@durable_execution\ndef handler(event: dict, context: DurableContext) -> dict:\n")
RESERVE = '    reserved = context.step(lambda _: event["amount"], name="reserve")\n'
WAIT = '    context.wait(Duration.from_seconds(event["cool_off"]), name="cool-off")\n'
CHARGE = '    return context.step(lambda _: {{"charged": reserved, "by": "{by}"}}, name="charge")\n'


def code(*lines: str, by: str = "v1") -> str:
    return HEAD + "".join(lines).replace("{by}", by).replace("{{", "{").replace("}}", "}")


def cli(cwd: Path, *args: object, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ))
    assert "Traceback" not in done.stderr, done.stderr
    return done


def write(cwd: Path, source: str) -> None:
    (cwd / "wf" / "Pay").mkdir(parents=True, exist_ok=True)
    (cwd / "wf" / "unum-workflow.json").write_text(json.dumps(WORKFLOW))
    (cwd / "wf" / "Pay" / "unum-ir.json").write_text(json.dumps(IR))
    (cwd / "wf" / "Pay" / "app.py").write_text(source)


def start(cwd: Path, workflow_id: str, cool_off: int) -> None:
    """Run the workflow until it waits in its `cool-off` (operation 2)."""
    write(cwd, code(RESERVE, WAIT, CHARGE))
    done = cli(cwd, "run", "wf", "--input", json.dumps({"amount": 5, "cool_off": cool_off}),
               "--workflow-id", workflow_id, "--timeout", "1")
    assert done.returncode == 0 and "is waiting until" in done.stderr, done.stderr


def inspected(cwd: Path, workflow_id: str) -> dict[str, object]:
    shown = cli(cwd, "inspect", workflow_id)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


@pytest.fixture(scope="module")
def waiting(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One workflow `p-1` waiting an hour in its cool-off: the refusals change nothing of it."""
    cwd = tmp_path_factory.mktemp("durable-upgrade")
    start(cwd, "p-1", 3600)
    return cwd


def test_a_change_that_keeps_the_operations_passes_and_the_workflow_finishes_on_the_new_code(tmp_path: Path) -> None:
    start(tmp_path, "p-2", 3)
    before = inspected(tmp_path, "p-2")["version"]
    write(tmp_path, code(RESERVE, WAIT, CHARGE, by="v2"))
    moved = cli(tmp_path, "upgrade", "p-2", "--to", "wf")
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.startswith(f"upgraded workflow p-2 from {before} to v"), moved.stdout
    assert "1 durable execution(s) replayed" in moved.stdout
    shown = inspected(tmp_path, "p-2")
    assert shown["upgrades"] == 1 and shown["version"] != before
    finished = cli(tmp_path, "run", "wf", "--workflow-id", "p-2", "--resume", timeout=90)
    assert finished.returncode == 0, finished.stderr
    assert json.loads(finished.stdout) == {"charged": 5, "by": "v2"}


REFUSALS = {
    "renamed step": (code(RESERVE.replace('"reserve"', '"hold"'), WAIT, CHARGE),
                     "operation 1 of handler 'Pay' was step 'reserve' in the old version, step 'hold' in the new one"),
    "removed wait": (code(RESERVE, CHARGE),
                     "operation 2 of handler 'Pay' was wait 'cool-off' in the old version, step 'charge' in the new one"),
    "reordered": (code(WAIT, RESERVE, CHARGE),
                  "operation 1 of handler 'Pay' was step 'reserve' in the old version, wait 'cool-off' in the new one"),
    "returns early": (code(RESERVE, "    return {'early': reserved}\n", WAIT, CHARGE),
                      "operation 2 of handler 'Pay' was wait 'cool-off' in the old version, nothing in the new one "
                      "(its handler returns before it)"),
    "raises": (code("    raise ValueError('no amount today')\n", RESERVE, WAIT, CHARGE),
               "handler 'Pay' raised ValueError in its replay: no amount today"),
}


@pytest.mark.parametrize("change", list(REFUSALS))
def test_a_changed_operation_is_refused_naming_the_first_that_diverges_and_nothing_changes(waiting: Path,
                                                                                          change: str) -> None:
    source, why = REFUSALS[change]
    before = inspected(waiting, "p-1")
    write(waiting, source)
    for dry in ((), ("--dry-run",)):
        refused = cli(waiting, "upgrade", "p-1", "--to", "wf", *dry)
        assert refused.returncode == 2 and refused.stdout == "", (refused.stdout, refused.stderr)
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: upgrade of workflow p-1 to v"), refused.stderr
        assert lines[0].endswith(f"refused, nothing changed: {why}"), lines[0]
    after = inspected(waiting, "p-1")
    assert (after["version"], after.get("upgrades", 0)) == (before["version"], 0)


def test_dry_run_says_what_would_change_and_changes_nothing(waiting: Path) -> None:
    before = inspected(waiting, "p-1")["version"]
    write(waiting, code(RESERVE, WAIT, CHARGE, by="v3"))
    dry = cli(waiting, "upgrade", "p-1", "--to", "wf", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith(f"would upgrade workflow p-1 from {before} to v"), dry.stdout
    assert "replay check passed" in dry.stdout and "1 durable execution(s) replayed" in dry.stdout
    assert inspected(waiting, "p-1").get("upgrades", 0) == 0


def test_the_replay_runs_no_step_body_past_where_the_workflow_stands(tmp_path: Path) -> None:
    """The cool-off's end has passed but its timer has not been delivered: the replay sees the
    wait ended, so the new code would go on to its next operation, a new step whose body writes a
    file. The check passes (the log ends at the wait) and the body does not run: the frontier
    stops the code before the step starts."""
    start(tmp_path, "p-3", 2)
    side = tmp_path / "side-effect"
    extra = f'    context.step(lambda _: open({str(side)!r}, "w").write("ran"), name="extra")\n'
    write(tmp_path, code(RESERVE, WAIT, extra, CHARGE))
    time.sleep(2.5)  # the 2 s cool-off began before `run` stopped waiting (1 s): its end has passed
    dry = cli(tmp_path, "upgrade", "p-3", "--to", "wf", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert not side.exists()


# ---- durable `invoke` children stay on the version they were started on ----------------------

PARENT = ("from aws_durable_execution_sdk_python import DurableContext, durable_execution\n\n\n"
          "@durable_execution\ndef handler(event: dict, context: DurableContext) -> dict:\n"
          "    slow = context.invoke('Slow', {'n': event['n']}, name='slow')\n"
          "    return context.step(lambda _: {'child': slow, 'parent': 'PARENT'}, name='finish')\n")
CHILD = ("from aws_durable_execution_sdk_python import DurableContext, durable_execution\n"
         "from aws_durable_execution_sdk_python.config import Duration\n\n\n"
         "@durable_execution\ndef handler(event: dict, context: DurableContext) -> dict:\n"
         "    context.wait(Duration.from_seconds(3), name='nap')\n"
         "    return context.step(lambda _: {'n': event['n'], 'by': 'CHILD'}, name='answer')\n")


def family(cwd: Path, parent: str, child: str) -> None:
    """A durable parent P that invokes a durable child Slow, which naps 3 s."""
    (cwd / "wf").mkdir(exist_ok=True)
    (cwd / "wf" / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "family", "entry": "P"}))
    for function, source in (("P", PARENT.replace("PARENT", parent)), ("Slow", CHILD.replace("CHILD", child))):
        (cwd / "wf" / function).mkdir(exist_ok=True)
        (cwd / "wf" / function / "unum-ir.json").write_text(json.dumps({**IR, "function": function}))
        (cwd / "wf" / function / "app.py").write_text(source)


def start_family(cwd: Path, workflow_id: str) -> str:
    family(cwd, "p1", "c1")
    done = cli(cwd, "run", "wf", "--input", '{"n": 7}', "--workflow-id", workflow_id, "--timeout", "1")
    assert done.returncode == 0 and "is waiting until" in done.stderr, done.stderr  # the child naps
    return str(inspected(cwd, workflow_id)["version"])


def test_an_invoked_child_runs_the_version_it_was_started_on(tmp_path: Path) -> None:
    """The folder's child code changes: an upgrade of the parent is refused while the child is in
    flight (nothing changes), and the resumed workflow's child runs the old code anyway."""
    started = start_family(tmp_path, "f-1")
    family(tmp_path, "p1", "c2")
    refused = cli(tmp_path, "upgrade", "f-1", "--to", "wf")
    assert refused.returncode == 2, refused.stdout
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("error: upgrade of workflow f-1 to v") and line.endswith(
        f"(function 'Slow') is still running on version {started}, and 'Slow' is not the same in the new version: "
        "a child runs the version it was started on; upgrade after it ends"), line
    assert "its invoked child f-1~" in line
    assert inspected(tmp_path, "f-1").get("upgrades", 0) == 0
    resumed = cli(tmp_path, "run", "wf", "--workflow-id", "f-1", "--resume", timeout=90)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"child": {"n": 7, "by": "c1"}, "parent": "p1"}


def test_a_parent_upgraded_mid_flight_finishes_on_its_new_code_its_child_on_the_old(tmp_path: Path) -> None:
    start_family(tmp_path, "f-2")
    family(tmp_path, "p2", "c1")  # only the parent's code changed
    moved = cli(tmp_path, "upgrade", "f-2", "--to", "wf")
    assert moved.returncode == 0, moved.stderr
    resumed = cli(tmp_path, "run", "wf", "--workflow-id", "f-2", "--resume", timeout=90)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"child": {"n": 7, "by": "c1"}, "parent": "p2"}


# ---- docs/versions.md's durable example, run as written -----------------------------------------

def test_docs_durable_upgrade_commands_run_as_written(tmp_path: Path) -> None:
    import shutil

    from tests.support.doc_commands import REPO, doc_commands

    shutil.copytree(REPO / "images" / "durable-versions", tmp_path / "images" / "durable-versions")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')  # this interpreter, as `python`
    (bin_dir / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    commands = [c for c in doc_commands("docs/versions.md") if "images/durable-versions" in c.text]
    assert len(commands) == 5, [c.text for c in commands]
    outputs = []
    for command in commands:
        done = subprocess.run(["bash", "-c", command.text], cwd=tmp_path, capture_output=True, text=True,
                              timeout=90, env=env)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{command.text}: {done.stderr}"
        if command.comment.startswith("{"):
            assert json.loads(done.stdout) == json.loads(command.comment), f"{command.text}: {done.stdout}"
        outputs.append(done)
    assert "is waiting until" in outputs[0].stderr
    assert outputs[2].stdout.startswith("would upgrade workflow pay-1 from v")
    assert outputs[2].stdout.rstrip().endswith("(replay check passed: Pay; 1 durable execution(s) replayed)")
    assert outputs[3].stdout.startswith("upgraded workflow pay-1 from v")
    assert inspected(tmp_path, "pay-1")["upgrades"] == 1


MAP = ("from aws_durable_execution_sdk_python import DurableContext, durable_execution\n"
       "from aws_durable_execution_sdk_python.config import Duration, MapConfig\n\n\n"
       "def item(ctx, x, i, _all):\n"
       "    ctx.step(lambda _: open(f'{SIDE}-{x}-{TAG}', 'w').write('x'), name='touch')\n"
       "    ctx.wait(Duration.from_seconds(3600), name='NAP')\n"
       "    return x\n\n\n"
       "@durable_execution\ndef handler(event: dict, context: DurableContext) -> dict:\n"
       "    return {'out': context.map(event['xs'], item, name='items',\n"
       "                               config=MapConfig(max_concurrency=1)).get_results()}\n")


def test_a_map_in_flight_replays_its_started_items_and_starts_none(tmp_path: Path) -> None:
    """A map of 3 items, one at a time: item 0 waits, items 1 and 2 have not started. The
    replay of changed code passes and runs no item's step (no file of the check's tag appears);
    a renamed wait inside item 0 is refused at its nested number (map 1, item 0, operation 2)."""
    side = tmp_path / "side"

    def source(tag: str, nap: str = "nap") -> str:
        return MAP.replace("{SIDE}", str(side)).replace("{TAG}", tag).replace("NAP", nap)

    write(tmp_path, source("run"))
    done = cli(tmp_path, "run", "wf", "--input", '{"xs": [1, 2, 3]}', "--workflow-id", "m-1", "--timeout", "1.5")
    assert done.returncode == 0 and "is waiting until" in done.stderr, done.stderr
    assert sorted(p.name for p in tmp_path.glob("side-*")) == ["side-1-run"]
    write(tmp_path, source("check"))
    dry = cli(tmp_path, "upgrade", "m-1", "--to", "wf", "--dry-run")
    assert dry.returncode == 0 and "replay check passed" in dry.stdout, dry.stderr
    write(tmp_path, source("check", nap="doze"))
    refused = cli(tmp_path, "upgrade", "m-1", "--to", "wf")
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith("operation 1.0.2 of handler 'Pay' was wait 'nap' in the old version, "
                                           "wait 'doze' in the new one"), refused.stderr
    assert sorted(p.name for p in tmp_path.glob("side-*")) == ["side-1-run"]


def test_a_durable_step_functions_task_is_replayed_too(tmp_path: Path) -> None:
    """A compiled state machine whose Task is a durable function (functions/Pay/app.py): its
    handler is found behind the Task's wrapper, a kept change passes, a renamed step is refused."""
    (tmp_path / "m" / "functions" / "Pay").mkdir(parents=True)
    (tmp_path / "m" / "statemachine.json").write_text(json.dumps({"StartAt": "Pay", "States": {"Pay": {
        "Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Pay", "End": True}}}))
    app = tmp_path / "m" / "functions" / "Pay" / "app.py"
    app.write_text(code(RESERVE, WAIT, CHARGE))
    done = cli(tmp_path, "run", "m/statemachine.json", "--input", '{"amount": 3, "cool_off": 3600}',
               "--workflow-id", "t-1", "--timeout", "1")
    assert done.returncode == 0 and "is waiting until" in done.stderr, done.stderr
    app.write_text(code(RESERVE, WAIT, CHARGE, by="v2"))
    kept = cli(tmp_path, "upgrade", "t-1", "--to", "m/statemachine.json", "--dry-run")
    assert kept.returncode == 0 and "1 durable execution(s) replayed" in kept.stdout, kept.stderr
    app.write_text(code(RESERVE.replace('"reserve"', '"hold"'), WAIT, CHARGE))
    refused = cli(tmp_path, "upgrade", "t-1", "--to", "m/statemachine.json")
    assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1].endswith(
        "operation 1 of handler 'Pay' was step 'reserve' in the old version, step 'hold' in the new one"), refused.stderr
