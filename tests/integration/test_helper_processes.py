"""Helper processes (unum_entry.local.helpers): a wide fan-out's calls run in another process
against the same SQLite file, with the engine's rules. Real processes, a real database file:
each item commits once and the result is the fault-free one; a handler's retry is the same
attempt count as in the engine (the retry envelope comes back, not a fresh delivery); a failure
fails the workflow with its error; a helper killed mid-batch leaves its batch to the engine; a
`run` killed with SIGKILL leaves no helper behind and resumes to the fault-free result."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from unum_entry.codec import decode
from unum_entry.local import helpers
from unum_entry.local.platform import LocalPlatform
from unum_entry.local.queue import SQLiteQueue
from unum_entry.outcome import RunResult
from unum_entry.stores.sqlite import SQLiteStore
from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
WIDTH = helpers.HELPER_QUEUED + 2000  # wide enough for a worker to start a helper


def write_map(folder: Path, item_code: str, *, width: int = WIDTH, max_attempts: int = 1) -> Path:
    """Split → a map of `width` Items → Sum (a fan-in)."""
    functions = {
        "Split": (f"def handler(event, context):\n    return list(range({width}))\n",
                  [{"op": "create_set", "function": "Sum", "shape": "aggregate"}, {"op": "map", "function": "Item"}]),
        "Item": (item_code, [{"op": "fan_in", "function": "Sum"}]),
        "Sum": ("def handler(event, context):\n    return {'sum': sum(event), 'n': len(event)}\n", []),
    }
    folder.mkdir(parents=True)
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "m", "entry": "Split"}))
    for name, (code, instructions) in functions.items():
        (folder / name).mkdir()
        (folder / name / "app.py").write_text(code)
        ir: dict[str, object] = {"unum_ir": 1, "function": name, "handler": "app.handler", "instructions": instructions}
        if name == "Item":
            ir["max_attempts"] = max_attempts
        (folder / name / "unum-ir.json").write_text(json.dumps(ir))
    return folder


def run_map(tmp_path: Path, folder: Path, **platform: object) -> tuple[RunResult, LocalPlatform, SQLiteStore]:
    store = SQLiteStore.open(tmp_path / "s.db")
    platform_ = LocalPlatform(load_workflow(folder), store, workers=4, queue=SQLiteQueue(store.database),
                              **platform)  # type: ignore[arg-type]
    with platform_:
        result = platform_.run(None, workflow_id="wf-h", timeout=300)
        platform_.helper_processes = [helper.process for helper in platform_._helpers._all]  # type: ignore[attr-defined,union-attr]
    return result, platform_, store


def item_checkpoints(store: Path) -> list[int]:
    """The Items' committed values (their checkpoints), read from the file."""
    with sqlite3.connect(store) as conn:
        values = [decode(value) for value, in conn.execute(
            "SELECT value FROM unum_records WHERE workflow = 'wf-h' AND kind = 'checkpoint'")]
    return [value for value in values if isinstance(value, int)]


def helper_pids(parent: int) -> list[int]:
    """The helper processes started by `parent` that are still alive (their command line names it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"unum_entry.local.helpers" in argv and str(parent).encode() in argv and state != "Z":
            found.append(int(entry))
    return found


def test_a_helper_runs_part_of_a_wide_map_and_every_item_commits_once(tmp_path: Path) -> None:
    log = tmp_path / "pids"
    folder = write_map(tmp_path / "m", f"import gc, os\n\ndef handler(event, context):\n"
                                       f"    with open({str(log)!r}, 'a') as f:\n"
                                       "        f.write(f'{os.getpid()} {event} {gc.get_freeze_count()}\\n')\n"
                                       "    return event\n")
    result, platform, _ = run_map(tmp_path, folder, helpers=1)
    assert result.failure is None, result
    assert result.result == {"sum": sum(range(WIDTH)), "n": WIDTH}
    lines = [line.split() for line in log.read_text().splitlines()]
    pids = {pid for pid, _, _ in lines}
    assert len(pids) == 2 and str(os.getpid()) in pids, pids  # the engine and one helper ran items
    assert sorted(int(item) for _, item, _ in lines) == list(range(WIDTH))  # each handler ran once
    # The helper owns its process: its loaded workflow is frozen (unum_entry.local.heap).
    assert all(int(frozen) > 1000 for pid, _, frozen in lines if pid != str(os.getpid()))
    assert sorted(item_checkpoints(tmp_path / "s.db")) == list(range(WIDTH))
    assert 0 < platform.stats["helped"] < WIDTH
    assert platform.stats["committed"] == WIDTH + 2
    assert helper_pids(os.getpid()) == []  # closed with the platform
    # ... asked to exit, and it did: not killed when the worker thread that started it ended
    assert [process.returncode for process in platform.helper_processes] == [0]  # type: ignore[attr-defined]


def test_a_wide_fan_out_checkpoints_a_larger_wal_in_the_engine_and_in_its_helper(tmp_path: Path) -> None:
    """A fan-out of HELPER_QUEUED calls or more tells the store a long run of writes comes
    (`Store.expect_bulk_writes`), and a helper does the same: both processes then checkpoint the
    shared WAL at BULK_WAL_PAGES. Either one left at WAL_PAGES would checkpoint it after its
    next commit once it passed WAL_PAGES, and SQLite would then write it again from its start:
    the file would stay near WAL_PAGES pages. A narrow map leaves the setting alone."""
    from unum_entry.stores.sqlite_database import WAL_PAGES

    def wal_pages(folder: Path) -> int:
        return Path(f"{folder / 's.db'}-wal").stat().st_size // 4096

    item = "def handler(event, context):\n    return event\n"
    narrow, _, store = run_map(tmp_path / "narrow", write_map(tmp_path / "narrow" / "m", item, width=1500), helpers=1)
    assert narrow.result == {"sum": sum(range(1500)), "n": 1500}
    assert wal_pages(tmp_path / "narrow") < 2 * WAL_PAGES
    store.close()
    wide, platform, store = run_map(tmp_path / "wide", write_map(tmp_path / "wide" / "m", item), helpers=1)
    assert wide.result == {"sum": sum(range(WIDTH)), "n": WIDTH}
    assert 0 < platform.stats["helped"] < WIDTH  # the helper committed part of it
    assert wal_pages(tmp_path / "wide") > 4 * WAL_PAGES, wal_pages(tmp_path / "wide")
    store.close()


def test_a_retry_in_a_helper_is_the_next_attempt_and_a_failure_fails_the_workflow(tmp_path: Path) -> None:
    log = tmp_path / "attempts"
    flaky = write_map(tmp_path / "flaky", "def handler(event, context):\n"
                                          "    if event % 100 == 7:\n"
                                          f"        with open({str(log)!r}, 'a') as f:\n"
                                          "            f.write(f'{event} {context.attempt}\\n')\n"
                                          "        if context.attempt == 0:\n"
                                          "            raise ValueError(f'first attempt of {event}')\n"
                                          "    return event\n", max_attempts=2)
    result, platform, _ = run_map(tmp_path / "a", flaky, helpers=1, retry_delay=0.001)
    assert result.result == {"sum": sum(range(WIDTH)), "n": WIDTH}
    assert platform.stats["helped"] > 0
    # Each flaky item failed once: its retry is its second attempt wherever the first ran.
    flaky_items = [i for i in range(WIDTH) if i % 100 == 7]
    assert platform.stats["handler_retries"] == len(flaky_items)
    attempts = sorted(tuple(map(int, line.split())) for line in log.read_text().splitlines())
    assert attempts == sorted((i, attempt) for i in flaky_items for attempt in (0, 1))

    broken = write_map(tmp_path / "broken", "def handler(event, context):\n"
                                            "    if event == 5000:\n        raise KeyError('no such item')\n"
                                            "    return event\n")
    result, platform, _ = run_map(tmp_path / "b", broken, helpers=1)
    assert result.failure is not None, result
    assert "KeyError" in json.dumps(result.failure), result.failure


def test_a_helper_killed_mid_batch_leaves_its_batch_to_the_engine(tmp_path: Path) -> None:
    started, hold = tmp_path / "helper-started", tmp_path / "hold"
    hold.touch()  # the helper's handlers wait while it exists: the kill always lands before its first commit
    folder = write_map(tmp_path / "m", f"import os, time\n\nPARENT = {os.getpid()}\n\n"
                                       "def handler(event, context):\n"
                                       "    if os.getpid() != PARENT:\n"
                                       f"        open({str(started)!r}, 'a').close()\n"
                                       "        deadline = time.monotonic() + 60\n"
                                       f"        while os.path.exists({str(hold)!r}) and time.monotonic() < deadline:\n"
                                       "            time.sleep(0.005)\n"
                                       "    return event\n")
    store = SQLiteStore.open(tmp_path / "s.db")
    with LocalPlatform(load_workflow(folder), store, workers=4, queue=SQLiteQueue(store.database),
                       helpers=1) as platform:
        workflow = platform.start(None, workflow_id="wf-h")
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        [pid] = helper_pids(os.getpid())
        os.kill(pid, signal.SIGKILL)  # inside a batch: its handlers wait for `hold`
        hold.unlink()  # (a helper started after it runs freely)
        platform.wait_idle(300)
        result = platform.outcome(workflow)
    assert result.result == {"sum": sum(range(WIDTH)), "n": WIDTH}
    assert sorted(item_checkpoints(tmp_path / "s.db")) == list(range(WIDTH))
    assert platform.stats["committed"] == WIDTH + 2  # the killed batch's items committed once, here


def test_run_killed_with_sigkill_leaves_no_helper_and_resumes(tmp_path: Path) -> None:
    folder = write_map(tmp_path / "m", "import time\n\ndef handler(event, context):\n"
                                       "    time.sleep(0.001)\n    return event\n", width=3 * WIDTH)
    store = tmp_path / "s.db"
    args = [sys.executable, "-m", "builder", "run", str(folder), "--store", str(store), "--workflow-id", "wf-h",
            "--compact"]
    proc = subprocess.Popen(args, cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, helpers.SWITCH: "1"})
    deadline = time.monotonic() + 60
    while not helper_pids(proc.pid) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert helper_pids(proc.pid), "the run must have started a helper"
    time.sleep(0.3)  # inside batches
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while helper_pids(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert helper_pids(proc.pid) == [], "a helper outlived its engine"
    done = subprocess.run(args, cwd=REPO, text=True, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"sum": sum(range(3 * WIDTH)), "n": 3 * WIDTH}
    assert sorted(item_checkpoints(store)) == list(range(3 * WIDTH))


def test_a_call_the_helper_must_redeliver_runs_again_in_the_engine(tmp_path: Path) -> None:
    """A store error inside a handler (unum's own store in a step: transient) asks for a
    redelivery; a helper answers it as such, and the engine runs the call itself at once."""
    log = tmp_path / "ran"
    folder = write_map(tmp_path / "m", f"import os\nfrom unum_entry.errors import StoreError\n\nPARENT = {os.getpid()}\n\n"
                                       "def handler(event, context):\n"
                                       "    if event % 50 == 3:\n"
                                       f"        with open({str(log)!r}, 'a') as f:\n"
                                       "            f.write(f'{event} {os.getpid() == PARENT}\\n')\n"
                                       "        if os.getpid() != PARENT:\n"
                                       "            raise StoreError('the store is struggling')\n"
                                       "    return event\n")
    result, platform, _ = run_map(tmp_path, folder, helpers=1)
    assert result.result == {"sum": sum(range(WIDTH)), "n": WIDTH}
    runs = [line.split() for line in log.read_text().splitlines()]
    in_helper = {int(item) for item, here in runs if here == "False"}
    in_engine = [int(item) for item, here in runs if here == "True"]
    assert in_helper, "the helper must have met some of them"
    assert sorted(in_engine) == [i for i in range(WIDTH) if i % 50 == 3]  # each committed once, in the engine
    assert sorted(item_checkpoints(tmp_path / "s.db")) == list(range(WIDTH))
