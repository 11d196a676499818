"""`python -m builder inspect WF --history [--json]`, `--value KEY` and `stop`, through the real
CLI over a file store and moto's DynamoDB (the history is read from the commits the runtime
already makes: unum_entry.history)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=180)


def history(workflow: str, store: str) -> dict:
    shown = cli("inspect", workflow, "--store", store, "--history", "--json")
    assert shown.returncode in (0, 1), shown.stderr
    return json.loads(shown.stdout)


def write_workflow(folder: Path, functions: dict[str, tuple[str, list]], entry: str) -> Path:
    """A workflow folder named like `folder`: function name -> (app.py source, IR instructions),
    each function with two attempts."""
    from unum_entry.workflow import FunctionSource
    from unum_entry.workflow import write_workflow as write

    write(folder, name=folder.name, entry=entry, functions={
        name: FunctionSource(code, instructions, {"max_attempts": 2}) for name, (code, instructions) in functions.items()})
    return folder


def check_numbering(document: dict) -> None:
    """Step Functions' rule: ids 1..n in order, ExecutionStarted first, previousEventId earlier."""
    ids = [e["id"] for e in document["events"]]
    assert ids == list(range(1, len(ids) + 1))
    assert document["events"][0]["type"] == "ExecutionStarted" and document["events"][0]["previousEventId"] == 0
    assert all(0 < e["previousEventId"] < e["id"] for e in document["events"][1:])
    times = [e["timestamp"] for e in document["events"]]
    assert times == sorted(times)


def test_history_of_a_map_names_every_item_with_its_input_and_output(tmp_path):
    store = str(tmp_path / "store")
    ran = cli("run", "images/map-aggregate", "--input", "@images/map-aggregate/input.json", "--store", store,
              "--workflow-id", "wf-map")
    assert ran.returncode == 0, ran.stderr
    document = history("wf-map", store)
    check_numbering(document)
    assert document["status"] == "succeeded"
    assert document["input"] == json.loads((REPO / "images/map-aggregate/input.json").read_text())
    assert document["started"] <= document["ended"] and document["duration_ms"] >= 0
    steps = document["steps"]
    words = steps[0]["output"]["words"]
    assert [s["function"] for s in steps] == ["Split", *["Measure"] * len(words), "Summarize"]
    items = sorted((s for s in steps if s["function"] == "Measure"), key=lambda s: s["index"])
    assert [s["index"] for s in items] == list(range(len(words)))
    assert [s["input"] for s in items] == words          # each item's input: its element of Split's output
    assert all(s["size"] == len(words) and s["attempts"] == 1 for s in items)
    assert all(s["started"] <= s["committed"] and s["duration_ms"] >= 0 for s in steps)
    assert steps[-1]["input"] == [s["output"] for s in items]   # the fan-in's input: every item's output
    assert document["events"][-1]["type"] == "ExecutionSucceeded"
    text = cli("inspect", "wf-map", "--store", store, "--history")
    assert text.returncode == 0 and "LambdaFunctionSucceeded" in text.stdout and "Measure[2/" in text.stdout


def test_history_of_a_failed_map_item_names_the_item_its_input_and_error(tmp_path):
    folder = write_workflow(tmp_path / "failing-map", {
        "Split": ("def handler(event, context):\n    return list(range(5))\n",
                  [{"op": "create_set", "function": "Sum", "shape": "aggregate"}, {"op": "map", "function": "Item"}]),
        "Item": ("def handler(event, context):\n    if event == 3:\n        raise ValueError(f'bad item {event}')\n"
                 "    return event * 10\n", [{"op": "fan_in", "function": "Sum"}]),
        "Sum": ("def handler(event, context):\n    return sum(event)\n", []),
    }, "Split")
    store = str(tmp_path / "store")
    assert cli("run", str(folder), "--store", store, "--workflow-id", "wf-bad").returncode == 1
    document = history("wf-bad", store)
    check_numbering(document)
    assert document["status"] == "failed"
    failed = [s for s in document["steps"] if "error" in s]
    assert len(failed) == 1
    assert failed[0]["function"] == "Item" and failed[0]["index"] == 3 and failed[0]["input"] == 3
    assert failed[0]["attempts"] == 2 and failed[0]["error"]["Error"] == "ValueError"
    types = [e["type"] for e in document["events"]]
    assert "LambdaFunctionFailed" in types and types[-1] == "ExecutionFailed"
    assert document["events"][-1]["details"]["error"] == "ValueError"


def test_large_values_are_shown_by_reference_and_fetched_on_demand(tmp_path):
    folder = write_workflow(tmp_path / "big", {
        "Make": ("def handler(event, context):\n    return 'x' * 10000\n", [{"op": "invoke", "function": "Count"}]),
        "Count": ("def handler(event, context):\n    return len(event)\n", []),
    }, "Make")
    store = str(tmp_path / "store")
    assert cli("run", str(folder), "--store", store, "--workflow-id", "wf-big").returncode == 0
    document = history("wf-big", store)
    big = document["steps"][0]["output"]
    assert set(big) == {"$ref", "bytes"} and big["bytes"] > 10000
    assert document["steps"][1]["input"] == {"$ref": big["$ref"]}
    fetched = cli("inspect", "wf-big", "--store", store, "--value", big["$ref"])
    assert fetched.returncode == 0 and json.loads(fetched.stdout) == "x" * 10000
    wrong = cli("inspect", "wf-big", "--store", store, "--value", "c-nope")
    assert wrong.returncode == 2 and wrong.stderr.strip() == "error: no value 'c-nope' retained for workflow 'wf-big'"


def test_history_of_a_compiled_state_machine_names_its_states(tmp_path):
    store = str(tmp_path / "store")
    ran = cli("run", "images/asl-order/statemachine.json", "--input", "@images/asl-order/input.json",
              "--store", store, "--workflow-id", "wf-asl")
    assert ran.returncode == 0, ran.stderr
    document = history("wf-asl", store)
    check_numbering(document)
    entered = [e["state"] for e in document["events"] if e["type"].endswith("StateEntered")]
    assert {"Received", "PriceLines", "Price", "ReserveStock", "ChargeCard", "Ship"} <= set(entered)
    prices = [s for s in document["steps"] if s["function"] == "Price"]
    assert sorted(json.dumps(s["output"]) for s in prices) == sorted(
        json.dumps(x) for x in ({"sku": "pen", "cents": 450}, {"sku": "ink", "cents": 900}))


def test_history_on_dynamodb(moto_server, tmp_path):
    """The same history over moto's DynamoDB wire protocol (the store contract only)."""
    table = f"unum-h-{uuid.uuid4().hex[:10]}"
    store = f"dynamodb://{table}?endpoint={moto_server.endpoint}&create=1"
    ran = cli("run", "images/map-aggregate", "--input", "@images/map-aggregate/input.json", "--store", store,
              "--workflow-id", "wf-ddb")
    assert ran.returncode == 0, ran.stderr
    document = history("wf-ddb", store)
    check_numbering(document)
    assert [s["function"] for s in document["steps"]][0] == "Split"
    assert document["steps"][-1]["function"] == "Summarize"
    assert document["input"] == json.loads((REPO / "images/map-aggregate/input.json").read_text())


def test_stop_ends_a_running_workflow_stopped_everywhere(tmp_path):
    """`stop` while the first function runs: `inspect`, `list` and the history say stopped (exit 1
    like a failure), no result is reported although the in-flight invocations ran on; a second
    stop, and a stop of an ended workflow, change nothing (exit 2, one line)."""
    import time

    started, effect = tmp_path / "started", tmp_path / "effect"
    folder = write_workflow(tmp_path / "slow", {
        # an exactly-once step after the stop does not run (its journal reads the ending first)
        "Slow": (f"import pathlib, time\nfrom unum_entry.steps import durable\n@durable\ndef handler(event, ctx):\n"
                 f"    pathlib.Path({str(started)!r}).touch()\n    time.sleep(2)\n"
                 f"    ctx.step('effect', lambda: pathlib.Path({str(effect)!r}).write_text('x'))\n    return event\n",
                 [{"op": "invoke", "function": "Last"}]),
        "Last": ("def handler(event, context):\n    return {'done': event}\n", []),
    }, "Slow")
    store = str(tmp_path / "store")
    run = subprocess.Popen([sys.executable, "-m", "builder", "run", str(folder), "--input", "1", "--store", store,
                            "--workflow-id", "wf-stop"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert time.monotonic() < deadline and run.poll() is None, "the workflow never started"
            time.sleep(0.05)
        stopped = cli("stop", "wf-stop", "--store", store, "--error", "Ops.Cancelled", "--cause", "by the test")
        assert stopped.returncode == 0 and stopped.stderr.strip() == "stopped workflow wf-stop", stopped.stderr
        _, err = run.communicate(timeout=60)
        assert run.returncode == 1, err
        assert err.splitlines()[-1] == "error: workflow wf-stop was stopped: Ops.Cancelled: by the test"
    finally:
        run.kill()
        run.wait()
    shown = cli("inspect", "wf-stop", "--store", store)
    report = json.loads(shown.stdout)
    assert shown.returncode == 1 and report["status"] == "stopped" and report["results"] == []
    assert report["failure"]["Error"] == "Ops.Cancelled" and report["failure"]["Cause"] == "by the test"
    listed = cli("list", "--json", "--store", store)
    assert [row["status"] for row in json.loads(listed.stdout)] == ["stopped"]
    only = cli("list", "--json", "--status", "stopped", "--store", store)
    assert [row["workflow"] for row in json.loads(only.stdout)] == ["wf-stop"]
    document = history("wf-stop", store)
    assert document["status"] == "stopped" and document["events"][-1]["type"] == "ExecutionAborted"
    assert not effect.exists() and document["steps"] == []  # the step did not run; nothing committed after
    again = cli("stop", "wf-stop", "--store", store)
    assert again.returncode == 2
    assert again.stderr.strip() == "error: workflow wf-stop has already ended (stopped): nothing to stop"
    assert cli("run", "images/chain", "--input", '{"name": "ada"}', "--store", store, "--workflow-id", "wf-ok").returncode == 0
    done = cli("stop", "wf-ok", "--store", store)
    assert done.returncode == 2 and "has already ended (succeeded)" in done.stderr
    assert json.loads(cli("inspect", "wf-ok", "--store", store).stdout)["status"] == "succeeded"
    unknown = cli("stop", "wf-nope", "--store", store)
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: no workflow 'wf-nope'")


def test_the_commands_in_docs_history_work_as_written(tmp_path):
    """docs/history.md's first code block, line by line, from a folder holding `images/`."""
    import re
    import shlex

    block = (REPO / "docs" / "history.md").read_text().split("```", 2)[1]
    commands = [shlex.split(re.sub(r"\s+#\s.*$", "", line)) for line in block.splitlines()
                if line.startswith("python -m builder ")]
    assert [argv[3] for argv in commands] == ["run", "inspect", "inspect"]
    (tmp_path / "images").symlink_to(REPO / "images")
    for argv in commands:
        done = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{shlex.join(argv)}: {done.stderr}"
    assert json.loads(done.stdout)["events"][-1]["type"] == "ExecutionSucceeded"


def failing_map(folder: Path, fixed: Path) -> Path:
    """Split -> 5 items (item 3 fails until `fixed` exists; each item that runs appends to
    `ran(folder) / ran-N`) -> Sum."""
    ran(folder).mkdir(parents=True, exist_ok=True)
    return write_workflow(folder, {
        "Split": ("def handler(event, context):\n    return list(range(5))\n",
                  [{"op": "create_set", "function": "Sum", "shape": "aggregate"}, {"op": "map", "function": "Item"}]),
        "Item": (f"import pathlib\ndef handler(event, context):\n    if event == 3 and not pathlib.Path({str(fixed)!r}).exists():\n"
                 f"        raise ValueError('item 3 not ready')\n    (pathlib.Path({str(ran(folder))!r}) / f'ran-{{event}}').open('a').write('x')\n"
                 "    return event * 10\n", [{"op": "fan_in", "function": "Sum"}]),
        "Sum": ("def handler(event, context):\n    return sum(event)\n", []),
    }, "Split")


def ran(folder: Path) -> Path:
    """Where a test workflow's handlers mark what ran: beside its folder, not in it (a run loads
    the version's copy, builder/versions.py: a handler's `__file__` is in that copy)."""
    return folder.with_name(folder.name + "-ran")


def test_redrive_reruns_only_the_failed_item_keeping_what_committed(tmp_path):
    fixed = tmp_path / "fixed"
    folder = failing_map(tmp_path / "wf", fixed)
    store = str(tmp_path / "store.db")
    assert cli("run", str(folder), "--store", store, "--workflow-id", "wf-rd").returncode == 1
    again = cli("redrive", "wf-rd", "--store", store)          # not fixed yet: it fails again, exit 1
    assert again.returncode == 1 and "failed again in function 'Item'" in again.stderr
    fixed.touch()
    done = cli("redrive", "wf-rd", "--store", store)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 100 and "redrive 2 of workflow wf-rd: re-running Item" in done.stderr
    marks = {i: (ran(folder) / f"ran-{i}").read_text() for i in (0, 1, 2, 4)}
    assert marks == {0: "x", 1: "x", 2: "x", 4: "x"}   # what committed was kept: each other item ran once
    assert (ran(folder) / "ran-3").read_text() == "x"
    document = history("wf-rd", store)
    check_numbering(document)
    types = [e["type"] for e in document["events"]]
    assert types.count("ExecutionRedriven") == 2 and types[-1] == "ExecutionSucceeded"
    refused = cli("redrive", "wf-rd", "--store", store)
    assert refused.returncode == 2
    assert refused.stderr.strip() == "error: workflow wf-rd did not fail (succeeded): only a failed workflow is redriven"


def test_two_redrives_at_once_run_it_once_and_none_past_the_retention(tmp_path, race):
    import time

    from unum_entry.redrive import CannotRedrive, redrive
    from unum_entry.retention import Retention
    from unum_entry.stores import open_store

    folder = failing_map(tmp_path / "wf", tmp_path / "never")
    store_path = str(tmp_path / "store.db")
    assert cli("run", str(folder), "--store", store_path, "--workflow-id", "wf-2x").returncode == 1
    store = open_store(store_path)
    try:
        late = Retention(ttl_seconds=store.ttl_seconds, clock=lambda: time.time() + 8 * 86400)
        with pytest.raises(CannotRedrive, match="past its retention"):
            redrive(store, "wf-2x", Recorder(), retention=late)

        sent = Recorder()

        def attempt(_: int):
            try:
                return redrive(store, "wf-2x", sent)
            except CannotRedrive as exc:
                return exc
        outcomes = race(8, attempt)
    finally:
        store.close()
    claimed = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(claimed) == 1 and claimed[0].function == "Item" and claimed[0].envelope.frames[-1].index == 3
    assert len(sent.calls) == 1
    assert all("redriven already" in str(o) or "did not fail" in str(o) for o in outcomes if isinstance(o, Exception))


class Recorder:
    """An Invoker that records what it is asked to send."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def invoke(self, function: str, payload: dict) -> None:
        self.calls.append((function, payload))

    def invoke_at(self, when: float, function: str, payload: dict, *, name: str) -> None:
        self.calls.append((function, payload))


def test_a_function_without_a_checkpoint_is_absent_but_its_output_shows_as_the_next_input(tmp_path):
    """docs/history.md ("Not recorded"): `"checkpoint": false` commits nothing, so it is no step;
    the first checkpointed function after it shows the input it received (copied into its stamp)."""
    folder = write_workflow(tmp_path / "nc", {
        "Entry": ("def handler(event, context):\n    return {'seen': event}\n", [{"op": "invoke", "function": "Free"}]),
        "Free": ("def handler(event, context):\n    return {'free': event}\n", [{"op": "invoke", "function": "Last"}]),
        "Last": ("def handler(event, context):\n    return {'last': event}\n", []),
    }, "Entry")
    ir = json.loads((folder / "Free" / "unum-ir.json").read_text())
    (folder / "Free" / "unum-ir.json").write_text(json.dumps({**ir, "checkpoint": False}))
    store = str(tmp_path / "unum.db")
    ran = cli("run", str(folder), "--input", "3", "--store", store, "--workflow-id", "wf-free")
    assert ran.returncode == 0, ran.stderr
    document = history("wf-free", store)
    check_numbering(document)
    assert [s["function"] for s in document["steps"]] == ["Entry", "Last"]
    assert document["steps"][1]["input"] == {"free": {"seen": 3}}
    started = [e for e in document["events"] if e["type"] == "LambdaFunctionStarted"]
    assert [e["details"]["input"] for e in started] == [3, {"free": {"seen": 3}}]


def test_redrive_of_a_map_in_lanes_resends_the_items_dropped_after_the_failure(tmp_path):
    """A Map run in 2 lanes (max_concurrency) whose item 1 fails: the items after it in both
    lanes notice the failure and never run; redrive re-sends the failed item and, as duplicates,
    the committed lane items and the Map's origin, so every dropped item runs once and the
    workflow completes (unum_entry.redrive._resend_origins)."""
    fixed = tmp_path / "fixed"
    marks = ran(tmp_path / "lanes")
    marks.mkdir()
    folder = write_workflow(tmp_path / "lanes", {
        "Split": ("def handler(event, context):\n    return list(range(8))\n",
                  [{"op": "create_set", "function": "Sum", "shape": "aggregate"},
                   {"op": "map", "function": "Item", "max_concurrency": 2}]),
        "Item": (f"import pathlib, time\ndef handler(event, context):\n"
                 f"    if event == 1 and not pathlib.Path({str(fixed)!r}).exists():\n"
                 "        raise ValueError('item 1 not ready')\n    time.sleep(0.1)\n"
                 f"    (pathlib.Path({str(marks)!r}) / f'ran-{{event}}').open('a').write('x')\n    return event * 10\n",
                 [{"op": "fan_in", "function": "Sum"}]),
        "Sum": ("def handler(event, context):\n    return sum(event)\n", []),
    }, "Split")
    store = str(tmp_path / "unum.db")
    assert cli("run", str(folder), "--store", store, "--workflow-id", "wf-lanes").returncode == 1
    before = {p.name for p in marks.glob("ran-*")}
    assert len(before) < 7  # items after the failure did not run
    fixed.touch()
    done = cli("redrive", "wf-lanes", "--store", store)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == sum(range(8)) * 10
    assert {i: (marks / f"ran-{i}").read_text() for i in range(8)} == {i: "x" for i in range(8)}
