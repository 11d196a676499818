"""kill -9 campaigns for the embedded engine's control plane (issue 45): `python -m builder run`,
`redrive` and `stop` are real subprocesses, killed with SIGKILL at seeded random instants, then
continued (`run --resume`, `stop` again) — possibly killed again — until they end.

The state machine is a Map of 8 items whose iterator is a Wait (scaled by UNUM_ASL_TIME_SCALE) then
a Task with a side effect: one line per call appended to `effects/<item>`. `Durable` records its
effect in a `@durable` step (docs/steps.md): exactly once per item however often it is killed.
`Plain` has no step: at least once, as documented. At the end every campaign checks: status
SUCCEEDED (STOPPED for stop), the result equals a run with no kills, the side effects, no
`staging` folder, and nothing left in the delivery queue (no timer armed, no delivery pending,
no live owner: `unum_entry.local.runs.run_state`).

Every case is bounded (a deadline per subprocess, a bounded number of kills). Replay one seed
with `-k 'seed7'`."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LAMBDA = "arn:aws:lambda:us-east-1:123456789012:function:"
ITEMS = list(range(8))
SCALE = "0.05"  # a Wait of 4 s lasts 0.2 s
MAX_KILLS = 3
RUN_SEEDS = list(range(1, 13))
REDRIVE_SEEDS = list(range(101, 107))
STOP_SEEDS = list(range(201, 209))

DURABLE = '''from pathlib import Path
from unum_entry.steps import durable
EFFECTS = Path({effects!r})

def effect(item):
    """Appends one line to effects/<item>: the side effect, once per call."""
    EFFECTS.mkdir(exist_ok=True)
    with open(EFFECTS / str(item), "a") as out:
        out.write("called\\n")
    return item * 10

@durable
def handler(event, ctx):
    return {{"item": event["item"], "value": ctx.step("effect", effect, event["item"])}}
'''

PLAIN = '''from pathlib import Path
EFFECTS = Path({effects!r})

def handler(event, context):
    EFFECTS.mkdir(exist_ok=True)
    with open(EFFECTS / str(event["item"]), "a") as out:
        out.write("called\\n")
    return {{"item": event["item"], "value": event["item"] * 10}}
'''

FINISH = '''from pathlib import Path
FIXED = Path({fixed!r})

def handler(event, context):
    """Fails until the file `fixed` exists (the operator's fix), then answers its input."""
    if not FIXED.exists():
        raise RuntimeError("not fixed yet")
    return event
'''

SUM = '''def handler(event, context):
    return {{"total": sum(r["value"] for r in event)}}
'''


def workspace(root: Path, handler: str, finish: bool = False) -> Path:
    """Writes the functions and the state machine under `root`; returns the machine's path."""
    code = root / "functions"
    for name, text in (("Durable", DURABLE), ("Plain", PLAIN), ("Finish", FINISH), ("Sum", SUM)):
        (code / name).mkdir(parents=True)
        (code / name / "app.py").write_text(text.format(effects=str(root / "effects"), fixed=str(root / "fixed")))
    states: dict[str, Any] = {"Each": {
        "Type": "Map", "ItemsPath": "$.items", "MaxConcurrency": 4,
        "ItemSelector": {"item.$": "$$.Map.Item.Value"},
        "ItemProcessor": {"StartAt": "Pause", "States": {
            "Pause": {"Type": "Wait", "Seconds": 4, "Next": "Work"},
            "Work": {"Type": "Task", "Resource": LAMBDA + handler, "End": True}}}}}
    if finish:
        states["Each"]["Next"] = "Sum"  # the Map's join: unum redrives a failure after it only
        states["Sum"] = {"Type": "Task", "Resource": LAMBDA + "Sum", "Next": "Finish"}
        states["Finish"] = {"Type": "Task", "Resource": LAMBDA + "Finish", "Next": "After"}
        states["After"] = {"Type": "Wait", "Seconds": 10, "End": True}  # a redrive to kill lasts a while
    else:
        states["Each"]["End"] = True
    path = root / "statemachine.json"
    path.write_text(json.dumps({"StartAt": "Each", "States": states}))
    return path


def env(scale: str = SCALE) -> dict[str, str]:
    """The subprocesses' environment: this checkout, every ASL time times `scale`."""
    return {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "UNUM_ASL_TIME_SCALE": scale}


def cli(root: Path, *args: Any, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """One `python -m builder` command, to its end."""
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=root, capture_output=True,
                          text=True, timeout=timeout, env=env())


def killed_at(root: Path, instant: float, *args: Any) -> int | None:
    """Starts `python -m builder ARGS`, SIGKILLs it `instant` seconds later; its exit code when it
    ended by itself first (None: it was killed)."""
    proc = subprocess.Popen([sys.executable, "-m", "builder", *map(str, args)], cwd=root, env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return proc.wait(timeout=instant)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        return None


def effects(root: Path) -> dict[int, int]:
    """How many times each item's side effect ran."""
    folder = root / "effects"
    return {int(p.name): len(p.read_text().splitlines()) for p in folder.iterdir()} if folder.exists() else {}


def settled(root: Path, workflow: str) -> dict[str, Any]:
    """Checks nothing is left: no staging folder, no timer armed, no delivery pending, no owner;
    returns `inspect`'s JSON."""
    from unum_entry.local.runs import run_state
    from unum_entry.stores import open_store

    assert not [p for p in root.rglob("staging")], list(root.rglob("staging"))
    store = open_store(str(root / "unum.db"))
    try:
        state = run_state(store, workflow)
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()
    if state is not None:
        assert (state.deliveries, state.timers, state.next_timer) == (0, 0, None), state
        assert not state.interrupted
    shown = cli(root, "inspect", workflow, "--store", root / "unum.db")
    assert shown.returncode in (0, 1) and shown.stdout, shown.stderr  # 1: it ended failed or stopped
    inspected: dict[str, Any] = json.loads(shown.stdout)
    assert "resume" not in inspected and "next_timer" not in inspected and "driven_by" not in inspected, inspected
    return inspected


def status(root: Path, workflow: str) -> str | None:
    """The workflow's status as `inspect` shows it (None: the store has no such workflow yet)."""
    shown = cli(root, "inspect", workflow, "--store", root / "unum.db")
    if shown.returncode == 2 or not shown.stdout:  # 1 (with its JSON): it ended failed or stopped
        assert shown.returncode == 2 and "Traceback" not in shown.stderr, shown.stderr
        return None
    return str(json.loads(shown.stdout)["status"])


REFERENCE = [{"item": i, "value": i * 10} for i in ITEMS]
INPUT = json.dumps({"items": ITEMS})


def run_campaign(root: Path, seed: int, handler: str) -> int:
    """Runs the Map, SIGKILLing run / run --resume at up to MAX_KILLS random instants, then lets
    `run --resume` finish; returns the number of kills that landed."""
    rnd = random.Random(seed)
    path = workspace(root, handler)
    store = root / "unum.db"
    kills = 0
    first = killed_at(root, rnd.uniform(0.3, 2.5), "run", path, "--workflow-id", "w", "--input", INPUT,
                      "--store", store)
    if first is None:
        kills += 1
        for _ in range(rnd.randint(0, MAX_KILLS - 1)):
            if killed_at(root, rnd.uniform(0.3, 2.0), "run", path, "--workflow-id", "w", "--resume",
                         "--store", store) is not None:
                break
            kills += 1
    if status(root, "w") != "succeeded":
        # killed before the workflow's start was recorded: nothing to resume, the run starts again
        start = ["--resume"] if status(root, "w") is not None else ["--input", INPUT]
        done = cli(root, "run", path, "--workflow-id", "w", *start, "--store", store)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == REFERENCE
    inspected = settled(root, "w")
    assert inspected["status"] == "succeeded" and inspected["results"] == [REFERENCE], inspected
    return kills


@pytest.mark.parametrize("seed", RUN_SEEDS, ids=[f"seed{s}" for s in RUN_SEEDS])
def test_run_killed_at_random_instants_runs_each_durable_step_once(tmp_path: Path, seed: int) -> None:
    run_campaign(tmp_path, seed, "Durable")
    assert effects(tmp_path) == {i: 1 for i in ITEMS}


@pytest.mark.parametrize("seed", RUN_SEEDS[:4], ids=[f"seed{s}" for s in RUN_SEEDS[:4]])
def test_run_killed_at_random_instants_runs_a_plain_handler_at_least_once(tmp_path: Path, seed: int) -> None:
    run_campaign(tmp_path, seed, "Plain")
    counts = effects(tmp_path)
    assert set(counts) == set(ITEMS) and all(n >= 1 for n in counts.values()), counts


def test_a_run_with_no_kill_is_the_reference(tmp_path: Path) -> None:
    """The reference the campaigns compare with: one run, no kill, each effect once."""
    path = workspace(tmp_path, "Durable")
    done = cli(tmp_path, "run", path, "--workflow-id", "w", "--input", INPUT, "--store", tmp_path / "unum.db")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == REFERENCE
    assert effects(tmp_path) == {i: 1 for i in ITEMS}
    settled(tmp_path, "w")


def started(root: Path, scale: str) -> subprocess.Popen[bytes]:
    """A `run` of the Map with Durable Tasks, left running; returns once the store knows it."""
    path = workspace(root, "Durable")
    proc = subprocess.Popen([sys.executable, "-m", "builder", "run", str(path), "--workflow-id", "w", "--input",
                             INPUT, "--store", str(root / "unum.db")], cwd=root, env=env(scale),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while status(root, "w") is None:
        assert time.monotonic() < deadline and proc.poll() is None, "the run never started"
        time.sleep(0.1)
    return proc


def stopped_once(root: Path, run: subprocess.Popen[bytes]) -> None:
    """`stop` again ends it or says it already ended stopped; the run ends by itself; inspect
    shows one ending, STOPPED, and nothing left armed."""
    again = cli(root, "stop", "w", "--store", root / "unum.db")
    assert again.returncode == 0 or (again.returncode == 2 and "already ended (stopped)" in again.stderr), \
        again.stderr
    try:
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
    inspected = settled(root, "w")
    assert inspected["status"] == "stopped" and inspected["results"] in (None, []), inspected
    assert inspected["failure"] is not None, inspected
    third = cli(root, "stop", "w", "--store", root / "unum.db")
    assert third.returncode == 2 and "already ended (stopped)" in third.stderr, third.stderr
    assert all(n == 1 for n in effects(root).values()), effects(root)  # a durable step never twice


@pytest.mark.parametrize("writes", [1, 2, 3])
def test_stop_killed_after_each_of_its_writes_ends_stopped_once(tmp_path: Path, writes: int) -> None:
    """kill -9 right after `stop`'s 1st write (its claim), 2nd (its failure record), 3rd (none)."""
    run = started(tmp_path, "2")
    killed = subprocess.run([sys.executable, "-m", "tests.support.kill_after", str(writes), "stop", "w",
                             "--store", str(tmp_path / "unum.db")], cwd=tmp_path, env=env(),
                            capture_output=True, text=True, timeout=60)
    # stop makes two writes (claim, failure record): killed after each; it runs to its end for 3
    assert killed.returncode == (-signal.SIGKILL if writes <= 2 else 0), killed.stderr
    stopped_once(tmp_path, run)


@pytest.mark.parametrize("seed", STOP_SEEDS, ids=[f"seed{s}" for s in STOP_SEEDS])
def test_stop_killed_at_random_instants_ends_stopped_once(tmp_path: Path, seed: int) -> None:
    """`stop` SIGKILLed at a random instant of its life (before, at or after its writes)."""
    rnd = random.Random(seed)
    run = started(tmp_path, "2")  # the Wait lasts 8 s: a stop killed before it acted is repeated while it runs
    killed_at(tmp_path, rnd.uniform(0.05, 1.2), "stop", "w", "--store", tmp_path / "unum.db")
    stopped_once(tmp_path, run)


def redrive_campaign(root: Path, first: list[str] | None, rnd: random.Random, *, resume_ended: bool = False) -> None:
    """The Map then Finish, which fails until `fixed` exists: the run fails, the fix is made,
    then `redrive` — started by `first` (a command prefix, None: the builder) and SIGKILLed at a
    random instant — and whatever continues it (redrive again while it reads failed, `run
    --resume` while running), killed up to MAX_KILLS times, then run to the end."""
    path = workspace(root, "Durable", finish=True)
    store = root / "unum.db"
    failed = cli(root, "run", path, "--workflow-id", "w", "--input", INPUT, "--store", store)
    assert failed.returncode == 1, failed.stderr
    assert effects(root) == {i: 1 for i in ITEMS}
    (root / "fixed").write_text("yes")
    if first is not None:
        subprocess.run([*first, "redrive", "w", "--workflow", str(path), "--store", str(store)], cwd=root,
                       env=env(), capture_output=True, timeout=60)
    for _ in range(MAX_KILLS if first is None else rnd.randint(0, MAX_KILLS)):
        now = status(root, "w")
        if now == "succeeded":
            break
        again = ["redrive", "w", "--workflow", path] if now == "failed" else ["run", path, "--workflow-id", "w",
                                                                                  "--resume"]
        killed_at(root, rnd.uniform(0.3, 1.5), *again, "--store", store)
    now = status(root, "w")
    if now != "succeeded":
        again = ["redrive", "w", "--workflow", path] if now == "failed" else ["run", path, "--workflow-id", "w",
                                                                              "--resume"]
        done = cli(root, *again, "--store", store)
        assert done.returncode == 0, (now, done.stderr)
    if resume_ended:  # a kill can leave the ended workflow a stale delivery and a dead driver: resume clears them
        tidy = cli(root, "run", path, "--workflow-id", "w", "--resume", "--store", store)
        assert tidy.returncode == 0 and json.loads(tidy.stdout) == {"total": 280}, tidy.stderr
    inspected = settled(root, "w")
    assert inspected["status"] == "succeeded" and inspected["results"] == [{"total": 280}], inspected
    assert effects(root) == {i: 1 for i in ITEMS}  # what committed before the failure is kept


@pytest.mark.parametrize("seed", REDRIVE_SEEDS, ids=[f"seed{s}" for s in REDRIVE_SEEDS])
def test_redrive_killed_at_random_instants_succeeds_once(tmp_path: Path, seed: int) -> None:
    """redrive (and what continues it) SIGKILLed at up to MAX_KILLS random instants."""
    redrive_campaign(tmp_path, None, random.Random(seed))


# writes=1 (killed after its claim): the next CLI redrive, holding the driver lease, continues the dead
# one's claim (unum_entry.redrive, adopt); before that fix every later redrive was refused. writes=2
# (killed after it cleared the failure record, before it journaled its send): `run --resume` finds
# nothing journaled and continues that redrive (continue_dead_redrive); before, it ended 'without a result'

@pytest.mark.parametrize("writes", [1, 2, 3, 4])
def test_redrive_killed_after_each_of_its_first_writes_succeeds_once(tmp_path: Path, writes: int) -> None:
    """kill -9 right after the redrive process's N-th store write, then continued to its end."""
    redrive_campaign(tmp_path, [sys.executable, "-m", "tests.support.kill_after", str(writes)], random.Random(writes),
                     resume_ended=True)
