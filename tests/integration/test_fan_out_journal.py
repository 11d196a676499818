"""A fan-out in the durable delivery queue (unum_entry.local.queue): one row for the whole
fan-out (a copy of its source), gone with its last call; a recovered fan-out re-drives only the
calls not done - on a real SQLite file, through `LocalPlatform` and the SQLite store."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from unum_entry.codec import decode
from unum_entry.envelope import Envelope
from unum_entry.local.platform import LocalPlatform
from unum_entry.local.queue import Delivery, SQLiteQueue
from unum_entry.plan import Call, FanOutCalls
from unum_entry.runtime import new_workflow
from unum_entry.stores.sqlite import SQLiteStore
from unum_entry.workflow import FunctionSource, Workflow, write_workflow

pytestmark = pytest.mark.integration


def map_sum(folder: Path, width: int, item_code: str) -> Workflow:
    """Split (input ignored) → a map of `width` Items → Sum."""
    return write_workflow(folder, name="map", entry="Split", functions={
        "Split": FunctionSource(f"def handler(event, context):\n    return list(range({width}))\n",
                                [{"op": "create_set", "function": "Sum", "shape": "aggregate"},
                                 {"op": "map", "function": "Item"}]),
        "Item": FunctionSource(item_code, [{"op": "fan_in", "function": "Sum"}]),
        "Sum": FunctionSource("def handler(event, context):\n    return sum(event)\n", []),
    })


def queue_rows(path: Path) -> list[tuple[str]]:
    """The queue's rows but the deadline watchdog's timer (queued until the workflow's deadline)."""
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT function FROM unum_queue WHERE NOT background").fetchall()


def test_a_fan_out_is_one_row_that_goes_with_its_last_call(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    queue = SQLiteQueue(path)
    fan_out = queue.journal_fan_out(Delivery("wf", "Split", b"source-envelope"), 3)
    assert fan_out is not None
    calls = [Delivery("wf", "Item", b"", position=i, fan_out=fan_out) for i in range(3)]
    for call in calls:
        queue.push(call, time.time())
    queue.flush()
    assert queue_rows(path) == [("Split",)]  # the calls are not journaled one by one
    for call in calls[:2]:
        queue.finish(call)
    queue.flush()
    [(_, recovered)] = SQLiteQueue(path).recover("wf")  # what a killed process leaves: the source, again
    assert (recovered.function, recovered.payload, recovered.id) == ("Split", b"source-envelope", fan_out.id)
    queue.finish(calls[2])
    queue.close()
    assert queue_rows(path) == []


def test_a_fan_out_finished_within_one_batch_never_reaches_the_disk(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    queue = SQLiteQueue(path, batch_interval=0.5)
    queue.flush()
    fan_out = queue.journal_fan_out(Delivery("wf", "Split", b"x"), 2)
    for position in (1, 0):
        queue.finish(Delivery("wf", "Item", b"", position=position, fan_out=fan_out))
    queue.flush()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM unum_queue").fetchone()[0] == 0
    queue.close()


def test_a_fan_out_call_delivered_again_is_journaled_on_its_own(tmp_path: Path) -> None:
    """A call of a fan-out that must be delivered again (a transient store error) gets a row of
    its own, in wire form, before the original counts as finished in the fan-out's."""
    path = tmp_path / "q.db"
    queue = SQLiteQueue(path)
    env = new_workflow(7, "wf")
    calls = FanOutCalls(lambda i: Call("Item", env), range(3), workflow="wf", functions=["Item"] * 3)
    fan_out = queue.journal_fan_out(Delivery("wf", "Split", b"x"), 3)
    first = Delivery("wf", "Item", b"", source=calls, position=0, fan_out=fan_out)
    again = first.again(1)
    queue.push(again, time.time())
    queue.finish(first)
    queue.flush()
    rows = {function: payload for function, payload in
            sqlite3.connect(path).execute("SELECT function, payload FROM unum_queue").fetchall()}
    queue.close()
    assert set(rows) == {"Split", "Item"}
    assert Envelope.from_wire(decode(rows["Item"])) == env


def test_a_map_on_the_durable_queue_journals_one_row_not_one_per_branch(tmp_path: Path) -> None:
    """200 branches: the journal writes the fan-out's row once (and its progress a few times),
    never a row per branch; the result is the map's."""
    workflow = map_sum(tmp_path / "map", 200, "def handler(event, context):\n    return event\n")
    store = SQLiteStore.open(tmp_path / "s.db")
    written: list[str] = []
    conn = store.database._writer_connection()
    conn.set_trace_callback(lambda statement: written.append(statement) if "unum_queue" in statement else None)
    with LocalPlatform(workflow, store, workers=4, queue=SQLiteQueue(store.database)) as platform:
        outcome = platform.run(0, timeout=60)
    conn.set_trace_callback(None)
    store.close()
    assert outcome.result == sum(range(200))
    inserts = [s for s in written if s.startswith("INSERT OR REPLACE INTO unum_queue")]
    assert inserts and all("'Item'" not in s for s in inserts), inserts[:3]
    assert len(inserts) <= 5, f"{len(inserts)} rows journaled for a 200-branch map"
    assert queue_rows(tmp_path / "s.db") == []


def test_a_recovered_fan_out_queues_only_the_branches_not_done(tmp_path: Path) -> None:
    """A run stopped (Ctrl-C: the journal kept as it was) once 10 of 40 branches finished, while
    the others wait: the next platform on the same file re-drives the fan-out's source, which
    queues only the branches the row does not count done, and ends with the map's result."""
    gate, ran = tmp_path / "open", tmp_path / "ran"
    ran.mkdir()
    item = ("import os, time\n\ndef handler(event, context):\n"
            f"    open(os.path.join({str(ran)!r}, str(event)), 'w').close()\n"
            f"    while event >= 10 and not os.path.exists({str(gate)!r}):\n        time.sleep(0.01)\n"
            "    return event\n")
    workflow = map_sum(tmp_path / "map", 40, item)
    store = SQLiteStore.open(tmp_path / "s.db")
    first = LocalPlatform(workflow, store, workers=2, queue=SQLiteQueue(store.database))
    workflow_id = first.start(0)
    deadline = time.monotonic() + 30
    while len(list(ran.iterdir())) < 12 and time.monotonic() < deadline:  # 0-9 done, two workers blocked
        time.sleep(0.01)
    started = {int(p.name) for p in ran.iterdir()}
    assert set(range(10)) <= started and len(started) == 12, sorted(started)
    time.sleep(0.2)  # the journal's batch interval: branches 0-9 counted done on disk
    first.cancel()  # the journal stays as it is now; two branches are left blocked
    gate.touch()
    first.close()
    store.close()

    store = SQLiteStore.open(tmp_path / "s.db")
    second = LocalPlatform(workflow, store, workers=2, queue=SQLiteQueue(store.database))
    recovered = second.recover(workflow_id)
    second.wait_idle(60)
    outcome = second.outcome(workflow_id)
    branches = second.stats["deliveries"] - 2  # the Split duplicate and Sum
    second.close()
    store.close()
    assert recovered >= 1
    assert outcome.result == sum(range(40))
    assert branches == 30, f"{branches} branches delivered again: only the 30 not done must be"
    assert queue_rows(tmp_path / "s.db") == []
