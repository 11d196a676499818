"""Two `run` processes on one store file whose hosts' clocks disagree by minutes (the driver
record's heartbeat, unum_entry/local/runs.py): a live driver on a host whose clock is 5 minutes
behind is not taken over (before the fix its heartbeat looked 300 s stale: the second `run`
drove the workflow too, and the handler ran twice); a dead driver whose clock was 5 minutes
ahead is taken over after `stale_after` seconds of watching (before: its heartbeat looked fresh
for 5 minutes, and a second `run` waited until its own --timeout)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_run_durable_queue import REPO, spawn, write_workflow
from unum_entry.local.runs import HEARTBEAT_INTERVAL, Runs
from unum_entry.stores import open_store

pytestmark = pytest.mark.integration

SKEW = 300.0   # seconds the other host's clock is off
BOUND = 30.0   # seconds any wait below may take


def spawn_on_skewed_host(skew: float, *args: str | Path) -> subprocess.Popen[str]:
    """`python -m builder ARGS` as if on another host whose clock is `skew` seconds off."""
    code = ("import runpy, socket, sys, time\n"
            f"real = time.time\ntime.time = lambda: real() + {skew!r}\n"
            "socket.gethostname = lambda: 'skewed-host.invalid'\n"
            "sys.argv = ['builder', *sys.argv[1:]]\n"
            "runpy.run_module('builder', run_name='__main__', alter_sys=True)\n")
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_live_driver_whose_clock_is_behind_is_not_taken_over(tmp_path: Path) -> None:
    calls, gate = tmp_path / "calls", tmp_path / "gate"
    folder = write_workflow(tmp_path / "wf", "A", {
        "A": (f"import os, time\n\ndef handler(event, context):\n    open({str(calls)!r}, 'a').write('A\\n')\n"
              f"    end = time.monotonic() + {BOUND}\n"
              f"    while not os.path.exists({str(gate)!r}) and time.monotonic() < end:\n        time.sleep(0.05)\n"
              "    return 7\n", []),
    })
    store = tmp_path / "s.db"
    args = ("run", folder, "--store", store, "--workflow-id", "wf-skew", "--compact", "--timeout", str(BOUND))
    first = spawn_on_skewed_host(-SKEW, *args)
    deadline = time.monotonic() + BOUND
    while not calls.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls.exists(), first.stderr
    second = spawn(*args)
    time.sleep(1.5 * HEARTBEAT_INTERVAL)  # the first one's heartbeat changes at least once meanwhile
    gate.touch()
    outs = [p.communicate(timeout=2 * BOUND) for p in (first, second)]
    assert [first.returncode, second.returncode] == [0, 0], outs
    assert json.loads(outs[0][0]) == json.loads(outs[1][0]) == 7
    assert "is being run by process" in outs[1][1] and "continuing it here" not in outs[1][1], outs[1][1]
    assert calls.read_text() == "A\n", "two processes drove the workflow"


def test_a_dead_driver_whose_clock_was_ahead_is_taken_over_after_watching(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"))
    runs = Runs(store.database, stale_after=1.0)
    try:
        with sqlite3.connect(tmp_path / "s.db") as conn:  # what a killed driver on that host left
            conn.execute("INSERT INTO unum_runs (workflow, host, pid, pid_started, since, heartbeat) "
                         "VALUES ('wf-ahead', 'skewed-host.invalid', 1, 'x', ?, ?)",
                         (time.time() + SKEW - 60, time.time() + SKEW))
        began = time.monotonic()
        assert runs.acquire("wf-ahead") is not None  # not known dead yet: watched from now on
        while runs.acquire("wf-ahead") is not None:
            assert time.monotonic() - began < 5, "a dead driver with a clock ahead was trusted"
            time.sleep(0.05)
        assert time.monotonic() - began >= 1.0
        owner = runs.owner("wf-ahead")
        assert owner is not None and owner.host != "skewed-host.invalid"
        runs.release("wf-ahead")
    finally:
        runs.close()
        store.close()


def test_the_driver_killed_while_a_second_run_follows_is_taken_over_on_this_host(tmp_path: Path) -> None:
    """kill -9 of the driving `run` while a second `run` of the id waits for its outcome: the
    second notices at once (the pid is gone), re-drives what the first left journaled, and prints
    the fault-free result (before: only a foreign host's stale record was ever taken over in a test)."""
    from tests.integration.test_run_durable_queue import map_sum

    folder = map_sum(tmp_path / "map", width=16, step=3.0)  # 6 s of work on 8 workers
    store = tmp_path / "s.db"
    args = ("run", folder, "--store", store, "--workflow-id", "wf-kill", "--compact", "--timeout", str(BOUND))
    first = spawn(*args)
    time.sleep(1.2)  # the first drives the map's items
    second = spawn(*args)
    assert second.stderr is not None
    # The first is killed only once the second follows it: a second started slowly (a loaded
    # machine) would otherwise find it dead already and resume it as an interrupted run. Each
    # readline is bounded: the second's --timeout ends it, and its stderr with it.
    followed = ""
    while "is being run by process" not in followed and (line := second.stderr.readline()):
        followed += line
    assert "is being run by process" in followed, followed
    first.kill()
    first.communicate(timeout=BOUND)
    out, rest = second.communicate(timeout=2 * BOUND)
    err = followed + rest
    assert second.returncode == 0, err
    assert json.loads(out) == {"sum": sum(i * i for i in range(16)), "n": 16}
    assert "is being run by process" in err and "continuing it here" in err, err
    assert "resuming: " in err, err  # the journaled deliveries, not a restart from the entry

