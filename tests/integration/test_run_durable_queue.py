"""The embedded engine's durable delivery queue, through the real CLI in subprocesses and a real
SQLite store file: `run` killed with SIGKILL at random instants is resumed by running it again
with the same `--workflow-id` (the pending deliveries are re-driven, not just the entry), ends
with the fault-free result, and `inspect` agrees; a killed, Ctrl-C'd or SIGTERM'd run shows as
`interrupted` in `list` and `inspect`; two `run` processes with one id both exit 0 with the one
result; a workflow with only a far timer left makes `run` return, saying until when it waits."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from unum_entry.codec import decode
from unum_entry.local.platform import TAKE_BATCH

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MAX_RUNS = 40              # runs of one workflow id (each killed at random, or the last) before giving up
KILL_WINDOW = 2.5          # seconds after its start within which a run is killed
STEP = 0.2                 # seconds each handler works: kills land inside executions and between them


def cli(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def spawn(*args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def write_workflow(folder: Path, entry: str, functions: dict[str, tuple[str, list[dict[str, object]]]]) -> Path:
    folder.mkdir(parents=True)
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": folder.name, "entry": entry}))
    for name, (code, instructions) in functions.items():
        (folder / name).mkdir()
        (folder / name / "app.py").write_text(code)
        (folder / name / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": name, "handler": "app.handler",
                                                                "instructions": instructions}))
    return folder


def chain(folder: Path, length: int = 12, step: float = STEP, *, task_shaped: bool = False) -> Path:
    """S0 → S1 → … → S{length-1}: each appends its name after working `step` seconds.
    `task_shaped`: each hop's IR is a compiled Step Functions Task's shape (an invoke, a succeed
    and a fail, each with its condition), not one unconditional invoke."""
    def code(i: int) -> str:
        return f"import time\n\ndef handler(event, context):\n    time.sleep({step})\n    return event + ['S{i}']\n"

    def instructions(i: int) -> list[dict[str, object]]:
        if i + 1 == length:
            return []
        invoke: dict[str, object] = {"op": "invoke", "function": f"S{i + 1}"}
        if not task_shaped:
            return [invoke]
        return [{**invoke, "when": {"Variable": "$[0]", "IsPresent": True}},
                {"op": "succeed", "when": {"Variable": "$[0]", "IsPresent": False}}, {"op": "fail"}]

    return write_workflow(folder, "S0", {f"S{i}": (code(i), instructions(i)) for i in range(length)})


def map_sum(folder: Path, width: int = 24, step: float = 3 * STEP) -> Path:
    """Split → a map of `width` Squares → Sum (fan-in)."""
    return write_workflow(folder, "Split", {
        "Split": (f"def handler(event, context):\n    return list(range({width}))\n",
                  [{"op": "create_set", "function": "Sum", "shape": "aggregate"}, {"op": "map", "function": "Square"}]),
        "Square": (f"import time\n\ndef handler(event, context):\n    time.sleep({step})\n    return event * event\n",
                   [{"op": "fan_in", "function": "Sum"}]),
        "Sum": ("def handler(event, context):\n    return {'sum': sum(event), 'n': len(event)}\n", []),
    })


def run_killed_until_done(folder: Path, store: Path, workflow_id: str, inputs: str, rng: random.Random,
                           kill_window: float, *, first_kill_by: float | None = None
                           ) -> tuple[subprocess.CompletedProcess[str] | tuple[str, str], int]:
    """Run `run` of one id again and again, each SIGKILLed at a random instant in `kill_window`
    seconds after it started (the first within `first_kill_by` seconds, when given), until one
    ends by itself (at most MAX_RUNS). Returns its output (stdout, stderr) and how many runs
    were killed."""
    args = ("run", folder, "--input", inputs, "--store", store, "--workflow-id", workflow_id, "--compact")
    for kills in range(MAX_RUNS):
        proc = spawn(*args)
        try:
            window = first_kill_by if kills == 0 and first_kill_by is not None else kill_window
            out, err = proc.communicate(timeout=rng.uniform(0.3, window))  # ~0.3 s: the interpreter, unum
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
            continue
        assert proc.returncode == 0, err
        return (out, err), kills
    raise AssertionError(f"{workflow_id} did not complete after {MAX_RUNS} runs")


@pytest.mark.parametrize(("example", "store_kind"), [("chain", "sqlite"), ("map", "sqlite"), ("wide-map", "sqlite"),
                                                   ("chain", "file"), ("long-chain", "sqlite"),
                                                   ("long-task-chain", "sqlite")])
def test_run_killed_at_random_instants_resumes_to_the_fault_free_result(tmp_path: Path, example: str,
                                                                         store_kind: str) -> None:
    """The short campaign (UNUM_KILL_ROUNDS rounds per example, default 3; the long one in
    docs: 100): every round SIGKILLs runs of one workflow id until one completes. On the file
    store the queue is a file of its own, written before each delivery runs (not carried by the
    store's commits). The wide map's items are quick: its workers commit them in batches
    (Runtime.handle_many), so kills land between a batch's handlers and its commit too. The
    long chain's 300 hops are quick (5 ms each): they hold one journal row for up to MAX_HOPS
    hops (SQLiteQueue.pass_row), so kills land anywhere in such a run of hops, and each resume
    walks the hops that committed since the row's; the long task chain's hops choose their one
    call by conditions, as compiled Step Functions Tasks do."""
    if example == "chain":
        folder = chain(tmp_path / example)
    elif example.startswith("long-"):
        folder = chain(tmp_path / example, length=300, step=0.005, task_shaped=example == "long-task-chain")
    else:
        folder = map_sum(tmp_path / example, **({"width": 10000, "step": 0} if example == "wide-map" else {}))
    inputs = "[]" if example.endswith("chain") else "null"
    began = time.monotonic()
    clean = cli("run", folder, "--input", inputs, "--store", tmp_path / "clean.db", "--compact")
    # A round's first run (a fresh store) is killed within the time a whole run takes here and
    # now, whatever the machine's speed: drawn from 0.3-2.5 s, a kill missed a 2 s run in a
    # quiet hour (CI on b930496: rounds of the long chain killed [0, 1, 1] times).
    first_kill_by = max(0.35, min(KILL_WINDOW, 0.8 * (time.monotonic() - began)))
    assert clean.returncode == 0, clean.stderr
    expected = json.loads(clean.stdout)
    rng = random.Random(f"kill-9:{example}")
    kills = []
    for round_ in range(int(os.environ.get("UNUM_KILL_ROUNDS", "3"))):
        store = tmp_path / (f"killed-{round_}.db" if store_kind == "sqlite" else f"killed-{round_}")
        workflow_id = f"wf-{example}-{round_}"
        (out, err), killed = run_killed_until_done(folder, store, workflow_id, inputs, rng, KILL_WINDOW,
                                                   first_kill_by=first_kill_by)
        assert json.loads(out) == expected, err
        kills.append(killed)
        shown = cli("inspect", workflow_id, "--store", store)
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["status"] == "succeeded"
        listed = cli("list", "--json", "--store", store)
        assert listed.returncode == 0, listed.stderr
        assert [row["status"] for row in json.loads(listed.stdout) if row["workflow"] == workflow_id] == ["succeeded"]
    print(f"{example}: SIGKILLs per round {kills}")
    assert sum(kills) >= len(kills), f"the kills must hit live runs: {kills}"


def test_a_killed_run_is_interrupted_and_resuming_re_drives_its_pending_deliveries(tmp_path: Path) -> None:
    """Killed while the middle of a chain runs: `list` and `inspect` say interrupted (not
    running); running again re-drives the pending delivery (not only the entry)."""
    started = tmp_path / "B-started"
    folder = write_workflow(tmp_path / "slow", "A", {
        "A": ("def handler(event, context):\n    return 1\n", [{"op": "invoke", "function": "B"}]),
        "B": (f"import os, time\n\ndef handler(event, context):\n    open({str(started)!r}, 'w').close()\n"
              f"    if not os.path.exists({str(tmp_path / 'fast')!r}):\n        time.sleep(30)\n    return 2\n",
              [{"op": "invoke", "function": "C"}]),
        "C": ("def handler(event, context):\n    return event + 40\n", []),
    })
    store = tmp_path / "s.db"
    proc = spawn("run", folder, "--store", store, "--workflow-id", "wf-k")
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:  # B runs: A committed, B's delivery journaled
        time.sleep(0.05)
    assert started.exists()
    time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    shown = cli("inspect", "wf-k", "--store", store)
    assert "interrupted" in shown.stdout, shown.stdout
    assert "--resume" in shown.stdout, shown.stdout
    listed = cli("list", "--json", "--store", store)
    assert [r["status"] for r in json.loads(listed.stdout) if r["workflow"] == "wf-k"] == ["interrupted"]
    (tmp_path / "fast").touch()
    done = cli("run", folder, "--store", store, "--workflow-id", "wf-k", "--resume")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == 42
    assert "resuming: " in done.stderr


def test_a_map_killed_mid_way_resumes_its_unfinished_runs_without_running_a_committed_item_again(
        tmp_path: Path) -> None:
    """A map's calls are journaled as runs of 64 (unum_entry.local.queue): killed while items
    150-199 block, `inspect` counts their deliveries pending; running again plans the
    unfinished runs' calls again from Split's checkpoint and sends them whole, and the items of
    those runs that had committed answer from their checkpoints: each item that committed
    before the kill ran its handler once, and the sum is the fault-free one. (A worker commits
    a batch of branches together, after their handlers: fast items batched with a blocking one
    had not committed when the kill came, and run again.)"""
    log, fast = tmp_path / "ran.log", tmp_path / "fast"
    folder = write_workflow(tmp_path / "map", "Split", {
        "Split": ("def handler(event, context):\n    return list(range(200))\n",
                  [{"op": "create_set", "function": "Sum", "shape": "aggregate"}, {"op": "map", "function": "Item"}]),
        "Item": (f"import os, time\n\ndef handler(event, context):\n    with open({str(log)!r}, 'a') as f:\n"
                 f"        f.write(f'{{event}}\\n')\n    if event >= 150 and not os.path.exists({str(fast)!r}):\n"
                 "        time.sleep(30)\n    return event\n", [{"op": "fan_in", "function": "Sum"}]),
        "Sum": ("def handler(event, context):\n    return sum(event)\n", []),
    })
    store = tmp_path / "s.db"
    proc = spawn("run", folder, "--store", store, "--workflow-id", "wf-m", "--compact")

    def ran() -> list[int]:
        return [int(line) for line in log.read_text().split()] if log.exists() else []

    deadline = time.monotonic() + 60
    while not set(range(150)) <= set(ran()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(range(150)) <= set(ran()), "the fast items must all have started"

    def committed() -> set[int]:  # the items committed (read beside the running process: WAL)
        with sqlite3.connect(store) as conn:
            values = [decode(value) for value, in conn.execute(
                "SELECT value FROM unum_records WHERE workflow = 'wf-m' AND kind = 'checkpoint'")]
        return {value for value in values if isinstance(value, int)}  # (not Split's list)

    # Their commits land (a no-op handler each); at most a batch per worker (TAKE_BATCH) waits
    # behind a blocking item. Bounded by the deadline.
    while len(committed()) < 150 - 2 * TAKE_BATCH and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    before = committed()
    assert len(before) >= 150 - 2 * TAKE_BATCH and before <= set(range(150)), sorted(before)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    shown = cli("inspect", "wf-m", "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] == "interrupted"
    assert json.loads(shown.stdout)["pending_deliveries"] >= 50, shown.stdout
    fast.touch()
    done = cli("run", folder, "--store", store, "--workflow-id", "wf-m", "--resume", "--compact")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == sum(range(200))
    runs = ran()
    assert all(runs.count(i) == 1 for i in before), sorted(i for i in before if runs.count(i) != 1)
    assert all(runs.count(i) <= 2 for i in range(150)) and set(runs) == set(range(200))


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_run_prints_how_to_resume_and_is_interrupted(tmp_path: Path, how: signal.Signals) -> None:
    folder = write_workflow(tmp_path / "wf", "A", {
        "A": (f"import time\n\ndef handler(event, context):\n    open({str(tmp_path / 'A')!r}, 'w').close()\n"
              "    time.sleep(30)\n    return 1\n", []),
    })
    store = tmp_path / "s.db"
    proc = spawn("run", folder, "--store", store, "--workflow-id", "wf-s")
    deadline = time.monotonic() + 30  # the signal must reach a run whose handler runs (not one still importing)
    while not (tmp_path / "A").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(how)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == (130 if how == signal.SIGINT else 143), err
    assert f"--workflow-id wf-s --resume --store {store}" in err, err
    listed = cli("list", "--json", "--store", store)
    assert [r["status"] for r in json.loads(listed.stdout) if r["workflow"] == "wf-s"] == ["interrupted"]


def test_two_runs_of_one_workflow_id_both_print_the_one_result(tmp_path: Path) -> None:
    folder = map_sum(tmp_path / "map", width=16, step=1.0)  # 2 s of work on 8 workers
    store = tmp_path / "s.db"
    args = ("run", folder, "--store", store, "--workflow-id", "wf-two", "--compact")
    first = spawn(*args)
    time.sleep(1.2)
    second = spawn(*args)
    outs = [p.communicate(timeout=120) for p in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], outs
    assert json.loads(outs[0][0]) == json.loads(outs[1][0]) == {"sum": sum(i * i for i in range(16)), "n": 16}
    assert any("is being run by process" in err for _, err in outs), outs


def test_a_workflow_left_with_only_a_far_timer_makes_run_return_and_resumes_when_due(tmp_path: Path) -> None:
    """A Step Functions Wait of an hour (scaled to 7.2 s): `run --timeout 3` returns at once,
    saying until when the workflow waits (exit 0); `list` shows it waiting; a later run of the
    id delivers the timer from the queue database and completes it."""
    machine = tmp_path / "sm.json"
    machine.write_text(json.dumps({"StartAt": "First", "States": {
        "First": {"Type": "Pass", "Result": {"x": 1}, "Next": "Hold"},
        "Hold": {"Type": "Wait", "Seconds": 3600, "Next": "Last"},
        "Last": {"Type": "Pass", "Parameters": {"done.$": "$.x"}, "End": True}}}))
    store = tmp_path / "s.db"
    env = {**os.environ, "UNUM_ASL_TIME_SCALE": "0.002"}
    args = [sys.executable, "-m", "builder", "run", str(machine), "--store", str(store), "--workflow-id", "wf-w"]
    started = time.monotonic()
    first = subprocess.run([*args, "--timeout", "3"], cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
    assert first.returncode == 0 and first.stdout == "", first.stderr
    assert time.monotonic() - started < 7, "run waited for a timer due after its --timeout"
    assert "is waiting until " in first.stderr and "--workflow-id wf-w --resume" in first.stderr, first.stderr
    listed = cli("list", "--json", "--store", store)
    assert [r["status"] for r in json.loads(listed.stdout) if r["workflow"] == "wf-w"] == ["waiting"]
    later = subprocess.run([*args, "--resume"], cwd=REPO, capture_output=True, text=True, timeout=60, env=env)
    assert later.returncode == 0, later.stderr
    assert json.loads(later.stdout) == {"done": 1}
    assert "resuming: 1 " in later.stderr


def _queue_rows(store: Path, workflow: str) -> tuple[int, int]:
    import sqlite3

    with sqlite3.connect(store) as conn:
        return (conn.execute("SELECT count(*) FROM unum_queue WHERE workflow = ?", (workflow,)).fetchone()[0],
                conn.execute("SELECT count(*) FROM unum_runs WHERE workflow = ?", (workflow,)).fetchone()[0])


def test_gc_and_rm_remove_a_workflows_queued_deliveries_and_driver_record(tmp_path: Path) -> None:
    """`gc` deletes the queue rows of a workflow with no record left and no live driver (a
    ghost: its delivery due an hour ago, its driver a dead process), not those of an
    interrupted workflow that still has records; `rm --force` deletes that one's too."""
    import sqlite3

    folder = write_workflow(tmp_path / "wf", "A", {
        "A": ("def handler(event, context):\n    return 1\n", [{"op": "invoke", "function": "B"}]),
        "B": (f"import time\n\ndef handler(event, context):\n    open({str(tmp_path / 'B')!r}, 'w').close()\n"
              "    time.sleep(30)\n    return 2\n", []),
    })
    store = tmp_path / "s.db"
    proc = spawn("run", folder, "--store", store, "--workflow-id", "wf-live")
    deadline = time.monotonic() + 30
    while not (tmp_path / "B").exists() and time.monotonic() < deadline:  # A committed, B's delivery queued
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert _queue_rows(store, "wf-live")[0] >= 1
    with sqlite3.connect(store) as conn:
        conn.execute("INSERT INTO unum_queue VALUES (1, 'wf-ghost', 'A', x'00', ?, 0, NULL, 0)", (time.time() - 3600,))
        conn.execute("INSERT INTO unum_runs (workflow, host, pid, pid_started, since) VALUES ('wf-ghost', ?, ?, 'x', ?)",
                     (socket.gethostname(), 2 ** 22 + 17, time.time() - 3600))  # above pid_max: no such process
    swept = cli("gc", "--store", store, "--clock-skew", "0")
    assert swept.returncode == 0, swept.stderr
    assert "2 queued delivery/driver row(s)" in swept.stdout + swept.stderr, swept.stdout + swept.stderr
    assert _queue_rows(store, "wf-ghost") == (0, 0)
    assert _queue_rows(store, "wf-live")[0] >= 1, "gc must keep the queue of a workflow that has records"
    removed = cli("rm", "wf-live", "--force", "--store", store)
    assert removed.returncode == 0, removed.stderr
    assert _queue_rows(store, "wf-live") == (0, 0)
    listed = cli("list", "--json", "--store", store)
    assert [r for r in json.loads(listed.stdout) if r["workflow"] == "wf-live"] == []


def test_a_driver_on_another_host_is_alive_while_its_heartbeat_is_fresh(tmp_path: Path) -> None:
    """A driver record of another host (its pid cannot be checked here) counts as alive while
    its heartbeat is at most STALE_AFTER seconds old: `run` of that id waits for it, then takes
    over once the heartbeat is stale; a record already stale on this clock is watched for
    STALE_AFTER seconds first (that host's clock may be behind). A live `run` refreshes its own
    record's heartbeat."""
    import sqlite3

    from unum_entry.local.runs import HEARTBEAT_INTERVAL, STALE_AFTER

    started = tmp_path / "started"
    folder = write_workflow(tmp_path / "wf", "A", {
        "A": (f"import time\n\ndef handler(event, context):\n    open({str(started)!r}, 'w').close()\n"
              f"    time.sleep(float(open({str(tmp_path / 'pause')!r}).read()))\n    return 7\n", []),
    })
    (tmp_path / "pause").write_text(str(2.5 * HEARTBEAT_INTERVAL))
    store = tmp_path / "s.db"
    proc = spawn("run", folder, "--store", store, "--workflow-id", "wf-mine")
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.5 * HEARTBEAT_INTERVAL)
    with sqlite3.connect(store) as conn:
        since, beat = conn.execute("SELECT since, heartbeat FROM unum_runs WHERE workflow = 'wf-mine'").fetchone()
    assert beat > since + 0.5 * HEARTBEAT_INTERVAL, (since, beat)  # refreshed while it runs
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and json.loads(out) == 7, err
    (tmp_path / "pause").write_text("0")

    def foreign_driver(workflow: str, age: float) -> None:
        with sqlite3.connect(store) as conn:
            conn.execute("INSERT INTO unum_runs (workflow, host, pid, pid_started, since, heartbeat) "
                         "VALUES (?, 'another-host.invalid', 1, 'x', ?, ?)", (workflow, time.time() - 600, time.time() - age))

    # Stale on this clock, but that host's clock may be behind (tests/integration/test_driver_clock_skew.py):
    # watched for STALE_AFTER s without a change, then taken over; a fresh one is stale in ~3 s, nobody refreshes it.
    foreign_driver("wf-stale", STALE_AFTER + 30)
    foreign_driver("wf-fresh", STALE_AFTER - 3)
    began = time.monotonic()
    runs = {wf: spawn("run", folder, "--store", store, "--workflow-id", wf, "--compact") for wf in ("wf-stale", "wf-fresh")}
    for proc in runs.values():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and json.loads(out) == 7, err
        assert "is being run by process 1" in err and "continuing it here" in err, err
    assert time.monotonic() - began >= STALE_AFTER - 1, "run must watch the other host's heartbeat before taking over"
