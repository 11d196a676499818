"""The embedded platform's durable delivery queue (unum_entry.local.queue) on a real SQLite file:
what is journaled, what a later process recovers, timers far ahead that `wait_idle` does not wait
for, and the driver records of `unum_entry.local.runs`."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from unum_entry.codec import decode, encode
from unum_entry.envelope import DataRef, Envelope
from unum_entry.local.handoff import call_wire, open_call
from unum_entry.local.platform import LocalPlatform
from unum_entry.local.queue import CallRun, Delivery, SQLiteQueue
from unum_entry.local.runs import Runs, run_state
from unum_entry.plan import Call, FanOutCalls
from unum_entry.runtime import new_workflow
from unum_entry.stores.file import FileStore
from unum_entry.stores.sqlite import SQLiteStore
from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.integration


def rows(path: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT function, timer FROM unum_queue ORDER BY function").fetchall()


def one_function(folder: Path) -> Path:
    (folder / "A").mkdir(parents=True)
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "one", "entry": "A"}))
    (folder / "A" / "app.py").write_text("def handler(event, context):\n    return event\n")
    (folder / "A" / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": "A", "handler": "app.handler",
                                                           "instructions": []}))
    return folder


def test_a_delivery_stays_journaled_until_its_processing_ended(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    queue = SQLiteQueue(path)
    kept, done = Delivery("wf", "Kept", b"x"), Delivery("wf", "Done", b"y")
    queue.push(kept, time.time())
    queue.push(done, time.time())
    queue.flush()
    assert rows(path) == [("Done", None), ("Kept", None)]
    assert queue.pop_due(time.time()) is kept and queue.pop_due(time.time()) is done
    queue.finish(done)
    queue.close()
    assert rows(path) == [("Kept", None)]  # taken but not finished: a crash now redelivers it
    again = SQLiteQueue(path)
    [(_, recovered)] = again.recover("wf")
    assert (recovered.function, recovered.payload, recovered.id) == ("Kept", b"x", kept.id)
    assert again.recover("another-workflow") == []
    again.close()


def test_a_fan_out_call_is_journaled_in_its_wire_form_and_kept_in_memory_by_position(tmp_path: Path) -> None:
    """A queued fan-out call (calls, position) holds no payload once journaled; its row holds the
    wire form a later process recovers, and a copy accepted again (a redelivery) is journaled
    with the same wire form, built anew."""
    calls = FanOutCalls(lambda i: Call("Item", Envelope(workflow="wf", inputs=(DataRef(ref="c-split", item=i,
                                                                                      value=i * 10),))),
                        range(3), workflow="wf", functions=["Item"] * 3)
    path = tmp_path / "q.db"
    queue = SQLiteQueue(path)
    branch = Delivery("wf", "Item", call_wire(calls, 2), source=calls, position=2)
    queue.push(branch, time.time())
    assert branch.payload == b""  # in memory: its position only
    queue.push(branch.again(1), time.time())
    queue.flush()
    queue.close()
    again = SQLiteQueue(path)
    recovered = [delivery for _, delivery in again.recover("wf")]
    again.close()
    assert len(recovered) == 2
    for delivery in recovered:
        assert delivery.source is None and Envelope.from_wire(decode(delivery.payload)).inputs[0].value == 20
    assert sorted(d.failures for d in recovered) == [0, 1]


def test_a_fan_out_is_journaled_as_its_origin_and_a_row_per_run_gone_with_the_runs_last_call(tmp_path: Path) -> None:
    """A fan-out's calls are not journaled one by one: its origin (the delivery that sent it)
    and one row per run. A run's row goes when its last call finished, the origin's once every
    run's has and the fan-out is sealed; a later process recovers the unfinished runs with
    their positions, and the origin whose checkpoint plans their calls again."""
    calls = FanOutCalls(lambda i: Call("Item", Envelope(workflow="wf", inputs=(DataRef(ref="c-split", item=i,
                                                                                      value=i * 10),))),
                        range(6), workflow="wf", functions=["Item"] * 6)
    path = tmp_path / "q.db"
    queue = SQLiteQueue(path)
    fan_out = queue.journal_fan_out("wf", "Split", b"origin-wire", 2_000_000_000)
    assert fan_out is not None
    runs = [CallRun(calls, range(0, 3)), CallRun(calls, range(3, 6))]
    for run in runs:
        queue.journal_run(run, fan_out)
        queue.push_run(run)
    queue.seal_fan_out(fan_out)
    taken = [queue.pop_due(time.time()) for _ in range(6)]
    assert queue.pop_due(time.time()) is None
    assert all(d is not None and d.run is not None and d.payload == b"" for d in taken)
    queue.flush()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM unum_queue").fetchone()[0] == 0  # no row per call
        assert conn.execute("SELECT function, payload FROM unum_fan_outs").fetchall() == [("Split", b"origin-wire")]
        assert conn.execute("SELECT start, stop, step FROM unum_fan_out_runs ORDER BY start").fetchall() == [
            (0, 3, 1), (3, 6, 1)]
    for delivery in taken[:3] + taken[4:5]:  # the first run whole, one call of the second
        queue.finish(delivery)  # type: ignore[arg-type]
    queue.close()
    again = SQLiteQueue(path)
    [(recovered, pending)] = again.recover_fan_outs("wf")
    assert (recovered.function, recovered.payload, recovered.deadline, recovered.runs) == (
        "Split", b"origin-wire", 2_000_000_000, 1)
    assert [positions for _, positions in pending] == [range(3, 6)]  # sent again whole: egress may have been cut short
    [(row, positions)] = pending
    resumed = CallRun(calls, positions, first_id=row, fan_out=recovered, unfinished=len(positions))
    again.push_run(resumed)
    while (delivery := again.pop_due(time.time())) is not None:
        again.finish(delivery)
    again.flush()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM unum_fan_outs").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM unum_fan_out_runs").fetchone()[0] == 0
    again.close()


def test_accepted_and_finished_within_one_batch_never_reaches_the_disk(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    queue = SQLiteQueue(path, batch_interval=0.5)
    queue.flush()
    hot = Delivery("wf", "Hot", b"x")
    queue.push(hot, time.time())
    queue.finish(hot)
    queue.flush()
    writes = sqlite3.connect(path).execute("SELECT count(*) FROM unum_queue").fetchone()[0]
    queue.close()
    assert writes == 0


def test_a_fan_out_whose_origin_has_no_checkpoint_is_resumed_by_delivering_the_origin_again(tmp_path: Path) -> None:
    """The fan-out's calls cannot be planned again when its origin's checkpoint is gone (here:
    it never committed in this store): recovery drops the fan-out's rows and queues the origin's
    delivery again instead, which runs it (as a redelivery would) - nothing is left pending."""
    workflow = load_workflow(one_function(tmp_path / "wf"))
    store = FileStore(tmp_path / "store")
    path = tmp_path / "q.db"
    queue = SQLiteQueue(path)
    origin = encode(new_workflow({"n": 2}, "wf-f").to_wire())
    fan_out = queue.journal_fan_out("wf-f", "A", origin, 2_000_000_000)
    assert fan_out is not None
    calls = FanOutCalls(lambda i: Call("A", Envelope(workflow="wf-f", inputs=(DataRef(value=i),))), range(3),
                        workflow="wf-f", functions=["A"] * 3)
    queue.journal_run(CallRun(calls, range(0, 3)), fan_out)
    queue.seal_fan_out(fan_out)
    queue.close()
    with LocalPlatform(workflow, store, queue=SQLiteQueue(path)) as later:
        assert later.recover("wf-f") == 0  # no run resumed: the origin's delivery instead
        later.wait_idle(30)
        assert later.outcome("wf-f").result == {"n": 2}
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM unum_queue WHERE timer IS NULL").fetchone()[0] == 0  # (its watchdog's timer stays)
        assert [conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("unum_fan_outs", "unum_fan_out_runs")] == [0, 0]


def test_a_resumed_fan_out_of_the_entry_sends_its_calls_with_the_deadline_the_entry_ran_with(tmp_path: Path) -> None:
    """The entry's delivery has no deadline on the wire (the runtime gives it one when it runs),
    so the fan-out keeps the deadline its calls were sent with: the calls planned again carry it
    too, and a call that got none would take itself for a workflow's start (a deadline of its
    own, a watchdog armed per branch)."""
    folder = tmp_path / "map"
    for name, code, instructions in (
            ("Split", "return list(range(5))", [{"op": "create_set", "function": "Sum", "shape": "aggregate"},
                                                {"op": "map", "function": "Item"}]),
            ("Item", "return event", [{"op": "fan_in", "function": "Sum"}]),
            ("Sum", "return sum(event)", [])):
        (folder / name).mkdir(parents=True)
        (folder / name / "app.py").write_text(f"def handler(event, context):\n    {code}\n")
        (folder / name / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": name, "handler": "app.handler",
                                                                "instructions": instructions}))
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "map", "entry": "Split"}))
    workflow, store = load_workflow(folder), SQLiteStore.open(tmp_path / "s.db")
    entry = new_workflow(None, "wf-d")
    with LocalPlatform(workflow, store) as first:  # a memory queue: this run leaves no journal
        first.submit("Split", entry.to_wire())
        first.wait_idle(30)
        assert first.outcome("wf-d").result == 10
    deadline = int(time.time()) + 3600
    queue = SQLiteQueue(store.database)
    fan_out = queue.journal_fan_out("wf-d", "Split", encode(entry.to_wire()), deadline)
    assert fan_out is not None and entry.deadline == 0
    queue.journal_run(CallRun(FanOutCalls(lambda i: Call("Item", entry), range(5), workflow="wf-d",
                                          functions=["Item"] * 5), range(1, 5)), fan_out)
    queue.seal_fan_out(fan_out)
    with LocalPlatform(workflow, store, queue=queue) as later:
        snapshot: list[Envelope] = []
        later.queue.push_run = lambda run: snapshot.extend(  # type: ignore[method-assign]
            open_call(run.calls, p) for p in run.positions)
        assert later.recover("wf-d") == 4
    assert [(env.frames[-1].index, env.deadline, env.redelivered) for env in snapshot] == [
        (i, deadline, True) for i in range(1, 5)]
    store.close()


def _gated_chain(tmp_path: Path, names: str = "ABC", *, conditional: bool = False) -> tuple[Path, Path]:
    """A → B → C (or the chain of `names`: the first returns 1, each next adds 1), the last
    waiting (up to 30 s) for the file `gate`, then adding 40: (the workflow folder, the gate).
    The last one touches `tmp_path / "C"` when it starts. `conditional`: each hop's IR is a
    Step Functions Task's shape (a `next`, then an invoke, a succeed and a fail, each with its
    condition), not one unconditional invoke."""
    gate = tmp_path / "open"
    folder = tmp_path / "chain"
    last = (f"import os, time\n    open({str(tmp_path / 'C')!r}, 'w').close()\n"
            f"    end = time.monotonic() + 30\n"
            f"    while not os.path.exists({str(gate)!r}) and time.monotonic() < end:\n        time.sleep(0.01)\n"
            "    return event + 40")
    for i, name in enumerate(names):
        code = "return 1" if i == 0 else last if i == len(names) - 1 else "return event + 1"
        instructions: list[dict[str, Any]] = [{"op": "invoke", "function": names[i + 1]}] if i < len(names) - 1 else []
        if conditional and instructions:
            instructions = [{"op": "next"}, {**instructions[0], "when": {"Variable": "$", "NumericGreaterThan": 0}},
                            {"op": "succeed", "when": {"Variable": "$", "NumericEquals": 0}},
                            {"op": "fail", "when": {"Variable": "$", "NumericLessThan": 0}}]
        (folder / name).mkdir(parents=True)
        (folder / name / "app.py").write_text(f"def handler(event, context):\n    {code}\n")
        (folder / name / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": name, "handler": "app.handler",
                                                                "instructions": instructions}))
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "chain", "entry": names[0]}))
    return folder, gate


def _copied_while_c_runs(platform: LocalPlatform, tmp_path: Path, gate: Path, files: dict[Path, Path], *,
                         flushed: bool = False) -> None:
    """Start the gated chain, and once C runs copy `files` (source -> copy; a folder whole) as a
    kill -9 would leave them (nothing writes while C waits); then let C finish. `flushed`: once
    the journal wrote what it had accepted (else the copy may hold it or not)."""
    platform.start(None, "wf-c")
    deadline = time.monotonic() + 30
    while not (tmp_path / "C").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    if flushed:
        platform.queue.flush()
    for source, copy in files.items():
        if source.is_dir():
            shutil.copytree(source, copy)
        elif source.exists():
            copy.write_bytes(source.read_bytes())
    gate.touch()
    platform.wait_idle(30)


def test_a_delivery_is_on_disk_no_later_than_its_checkpoint(tmp_path: Path) -> None:
    """A → B → C on the SQLite store, its journal riding on the store's commits and not written
    by its own thread meanwhile (a 5 s gathering interval): the database copied while C runs
    (what a kill -9 would leave) holds B's delivery, since B's commit carried it. Resumed from
    that copy, B runs again as a duplicate and sends C, the one successor that has not
    committed. Had B's row still been gathering, the copy would hold B's checkpoint and no
    delivery: a restart from the entry skips B (committed) and C never runs."""
    folder, gate = _gated_chain(tmp_path)
    workflow = load_workflow(folder)
    store = SQLiteStore.open(tmp_path / "s.db")
    copy = tmp_path / "crashed"
    copy.mkdir()
    with LocalPlatform(workflow, store, queue=SQLiteQueue(store.database, batch_interval=5)) as first:
        _copied_while_c_runs(first, tmp_path, gate, {tmp_path / f"s.db{suffix}": copy / f"s.db{suffix}"
                                                     for suffix in ("", "-wal")})
    store.close()
    crashed = SQLiteStore.open(copy / "s.db")
    with LocalPlatform(workflow, crashed, queue=SQLiteQueue(crashed.database)) as later:
        assert later.recover("wf-c") >= 1
        later.wait_idle(30)
        assert later.outcome("wf-c").result == 42
    crashed.close()


def _killed_while_the_last_runs(tmp_path: Path, names: str, *, conditional: bool = False) -> Path:
    """Run the gated chain of `names` on the SQLite store and copy its database while the last
    function runs, its journal written (what a kill -9 then would leave): the copy's folder."""
    folder, gate = _gated_chain(tmp_path, names, conditional=conditional)
    store = SQLiteStore.open(tmp_path / "s.db")
    copy = tmp_path / "crashed"
    copy.mkdir()
    with LocalPlatform(load_workflow(folder), store, queue=SQLiteQueue(store.database)) as first:
        _copied_while_c_runs(first, tmp_path, gate, {tmp_path / f"s.db{suffix}": copy / f"s.db{suffix}"
                                                     for suffix in ("", "-wal")}, flushed=True)
        assert first.outcome("wf-c").result == len(names) - 1 + 40
    store.close()
    return copy


@pytest.mark.parametrize("conditional", [False, True], ids=["invoke", "task-shaped"])
def test_a_chain_is_journaled_as_the_row_of_its_first_hop_and_resumed_through_its_committed_hops(
        tmp_path: Path, conditional: bool) -> None:
    """A → B → C → D → E on the SQLite store: B, the first call egress sent, is journaled; C,
    D and E each hold that row in turn instead of a row of their own (one row to write and
    delete per chain, not per hop). Killed while E runs, the database holds B's row alone and
    the checkpoints of A to D. Resumed, B is delivered again and the hops after it that
    committed (C and D, built again from their senders' checkpoints) with it, each a duplicate
    whose egress runs again; D's sends E, the one hop that did not commit. The same when each
    hop's IR chooses its one call by conditions, as a compiled Step Functions Task's does."""
    copy = _killed_while_the_last_runs(tmp_path, "ABCDE", conditional=conditional)
    # (the deadline watchdog's timer aside)
    assert [row for row in rows(copy / "s.db") if row[1] is None] == [("B", None)]
    crashed = SQLiteStore.open(copy / "s.db")
    with LocalPlatform(load_workflow(tmp_path / "chain"), crashed, queue=SQLiteQueue(crashed.database)) as later:
        assert later.recover("wf-c") == 3  # B, C and D
        later.wait_idle(30)
        assert later.outcome("wf-c").result == 44
        assert later.stats["committed"] == 1  # E alone: B, C and D were duplicates
    crashed.close()
    assert [row for row in rows(copy / "s.db") if row[1] is None] == []


def test_a_chain_journals_a_hop_on_its_own_after_max_hops_held_one_row(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """With MAX_HOPS = 2, B's row is held by C and D; D's call E gets a row of its own (and B's
    goes when D finishes), so a resume walks at most MAX_HOPS hops from a row. (Without the
    journal's flush before the copy, the copy may also hold B's row and not E's yet: D's finish
    and E's row ride on the next commit, E's own.)"""
    monkeypatch.setattr("unum_entry.local.queue.MAX_HOPS", 2)
    monkeypatch.setattr("unum_entry.local.platform.MAX_HOPS", 2)
    copy = _killed_while_the_last_runs(tmp_path, "ABCDE")
    assert [row for row in rows(copy / "s.db") if row[1] is None] == [("E", None)]
    crashed = SQLiteStore.open(copy / "s.db")
    with LocalPlatform(load_workflow(tmp_path / "chain"), crashed, queue=SQLiteQueue(crashed.database)) as later:
        assert later.recover("wf-c") == 1
        later.wait_idle(30)
        assert later.outcome("wf-c").result == 44
    crashed.close()


def test_a_delivery_journaled_apart_from_the_store_is_written_before_it_runs(tmp_path: Path) -> None:
    """The same with the file store, whose queue is a file of its own (no store commit can carry
    its rows): a delivery's row is written before its execution starts, so the files copied
    while C runs hold C's delivery (or B's), never B's checkpoint without either. Resumed from
    the copy, C runs and the workflow ends with the fault-free result."""
    folder, gate = _gated_chain(tmp_path)
    workflow = load_workflow(folder)
    store = FileStore(tmp_path / "store")
    copy = tmp_path / "crashed"
    copy.mkdir()
    with LocalPlatform(workflow, store, queue=SQLiteQueue(tmp_path / "q.db", batch_interval=5)) as first:
        _copied_while_c_runs(first, tmp_path, gate, {
            tmp_path / "store": copy / "store",
            **{tmp_path / f"q.db{suffix}": copy / f"q.db{suffix}" for suffix in ("", "-wal")}})
    crashed = FileStore(copy / "store")
    with LocalPlatform(workflow, crashed, queue=SQLiteQueue(copy / "q.db")) as later:
        assert later.recover("wf-c") >= 1
        later.wait_idle(30)
        assert later.outcome("wf-c").result == 42


def test_a_put_cancelled_after_it_was_due_is_flushed_as_written(tmp_path: Path) -> None:
    """A delivery marked due (its gathering interval over) and then finished before any write:
    nothing is left to write, and the journal's own write must say so - `flush` (and so `close`,
    and the CLI's exit) returns instead of retrying a write of nothing for ever."""
    queue = SQLiteQueue(tmp_path / "q.db", batch_interval=0.2)
    delivery = Delivery("wf", "F", b"x")
    queue.push(delivery, time.time())
    time.sleep(0.3)  # the journal's thread marked it due: the next commit carries it
    queue.finish(delivery)  # ... and now there is nothing to carry
    flushed = threading.Thread(target=queue.flush, daemon=True)
    flushed.start()
    flushed.join(10)
    assert not flushed.is_alive(), "flush waited for a write of nothing"
    queue.close()
    assert rows(tmp_path / "q.db") == []


def test_a_far_timer_does_not_hold_wait_idle_and_outlives_the_process(tmp_path: Path) -> None:
    """A timer a day ahead: `wait_idle` returns (nothing else is in flight), `next_timer` says
    when; a second platform on the same database recovers it, and one due now is delivered."""
    workflow = load_workflow(one_function(tmp_path / "wf"))
    store = FileStore(tmp_path / "store")
    env = new_workflow({"n": 1}, "wf-timer").to_wire()
    when = time.time() + 86400
    with LocalPlatform(workflow, store, queue=SQLiteQueue(tmp_path / "q.db")) as platform:
        platform.submit_at(when, "A", env, name="m-" + "1" * 32)
        platform.submit_at(when, "A", env, name="m-" + "1" * 32)  # armed twice: queued once
        started = time.monotonic()
        platform.wait_idle(30)
        assert time.monotonic() - started < 1.0
        assert platform.next_timer() == pytest.approx(when, abs=1.0)
    assert rows(tmp_path / "q.db") == [("A", "m-" + "1" * 32)]
    assert platform.outcome("wf-timer").results == []
    with LocalPlatform(workflow, store, queue=SQLiteQueue(tmp_path / "q.db")) as later:
        assert later.recover("wf-timer") == 1
        assert later.next_timer() == pytest.approx(when, abs=1.0)
        later.submit_at(time.time(), "A", env, name="m-" + "2" * 32)  # due now: delivered
        later.wait_idle(30)
        assert later.outcome("wf-timer").result == {"n": 1}


def test_the_driver_record_tells_a_live_run_from_a_killed_one(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    runs = Runs(path)
    assert runs.acquire("wf-1") is None
    assert runs.acquire("wf-1") is None  # this process already drives it
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with sqlite3.connect(path) as conn:  # another (live) process records itself as wf-2's driver
            from unum_entry.local.runs import _process_started
            import socket
            conn.execute("INSERT INTO unum_runs (workflow, host, pid, pid_started, since) VALUES ('wf-2', ?, ?, ?, ?)",
                         (socket.gethostname(), other.pid, _process_started(other.pid), time.time()))
        found = runs.acquire("wf-2")
        assert found is not None and found.pid == other.pid and found.alive()
        state = run_state(FileStore(tmp_path), "wf-2")
        assert state is None  # a file store keeps its queue in queue.db, not in q.db
    finally:
        other.kill()
        other.wait()
    assert runs.acquire("wf-2") is None  # its driver died: taken over
    runs.release("wf-2")
    assert runs.owner("wf-2") is None


def test_a_queue_database_of_the_previous_unum_is_opened_and_migrated(tmp_path: Path) -> None:
    """A `queue.db` written before the queue shared the store's database code (no unum mark,
    no heartbeat column) opens, keeps its rows and gains the column; another program's
    database is still refused."""
    from unum_entry.errors import StoreError

    path = tmp_path / "queue.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE unum_queue (id INTEGER PRIMARY KEY, workflow TEXT NOT NULL, function TEXT NOT NULL, "
                     "payload BLOB NOT NULL, ready_at REAL NOT NULL, failures INTEGER NOT NULL, timer TEXT, "
                     "background INTEGER NOT NULL)")
        conn.execute("CREATE INDEX unum_queue_workflow ON unum_queue (workflow)")
        conn.execute("CREATE TABLE unum_runs (workflow TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, "
                     "pid_started TEXT NOT NULL, since REAL NOT NULL)")
        conn.execute("INSERT INTO unum_queue VALUES (7, 'wf', 'F', x'00', 0, 0, NULL, 0)")
        conn.execute("INSERT INTO unum_runs VALUES ('wf', 'elsewhere', 1, 'x', 1.0)")
    conn.close()
    queue = SQLiteQueue(path)
    assert [d.id for _, d in queue.recover("wf")] == [7]
    queue.close()
    runs = Runs(path)
    owner = runs.owner("wf")
    assert owner is not None and owner.heartbeat is None and not owner.alive()  # another host, silent since 1970
    runs.close()
    foreign = tmp_path / "app.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE users (name TEXT PRIMARY KEY)")
    conn.close()
    with pytest.raises(StoreError, match="not a unum store"):
        SQLiteQueue(foreign)


def test_the_journal_rides_in_the_store_commits_and_commits_alone_only_when_none_come(tmp_path: Path) -> None:
    """While store writes keep coming, the journal's batches go into their transactions (no
    write of the journal's own: `Database.add_rider`); once they stop, the journal still
    reaches the disk by itself."""
    from unum_entry.stores.sqlite import SQLiteStore

    store = SQLiteStore.open(tmp_path / "unum.db")
    queue = SQLiteQueue(store.database, batch_interval=0.05)  # a store write every ~2 ms: one always comes
    own: list[bool] = []
    real_write = store.database.write

    def spy(fn, *, sync=True):  # delegates to the real group commit; notes the journal's own writes
        if not sync:
            own.append(True)
        return real_write(fn, sync=sync)

    store.database.write = spy  # type: ignore[method-assign]
    expiry = int(time.time()) + 3600
    try:
        kept = [Delivery("wf", f"F{i}", b"x") for i in range(5)]
        for delivery in kept:
            queue.push(delivery, time.time())
        deadline = time.monotonic() + 10
        i = 0
        while len(rows(tmp_path / "unum.db")) < 5 and time.monotonic() < deadline:  # store writes keep coming
            store.create(f"k-{i}", b"v", workflow="wf", expires_at=expiry)
            i += 1
            time.sleep(0.001)
        assert len(rows(tmp_path / "unum.db")) == 5
        assert own == []  # every journal batch rode in a store commit
        queue.finish(kept[0])
        queue.flush()  # no store write now: the journal commits by itself
        assert own and len(rows(tmp_path / "unum.db")) == 4
    finally:
        queue.close()
        store.close()


def test_a_journal_batch_that_fails_in_a_store_commit_leaves_the_store_write_and_is_written_later(
        tmp_path: Path) -> None:
    """A journal batch the database refuses (a trigger raising on the queue's table) is undone
    alone - the store's writes of that commit are kept - and is written, in order, once the
    database takes it again."""
    from unum_entry.stores.sqlite import SQLiteStore

    store = SQLiteStore.open(tmp_path / "unum.db")
    queue = SQLiteQueue(store.database, batch_interval=0.01)
    expiry = int(time.time()) + 3600
    try:
        store.database.write(lambda conn: conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON unum_queue BEGIN SELECT RAISE(ABORT, 'journal refused'); END"))
        first, second = Delivery("wf", "First", b"x"), Delivery("wf", "Second", b"y")
        queue.push(first, time.time())
        for i in range(40):  # bounded: 40 store writes over ~0.4 s, each commit tries to carry the batch
            store.create(f"k-{i}", b"v", workflow="wf", expires_at=expiry)
            time.sleep(0.01)
        assert len(store.get_many([f"k-{i}" for i in range(40)])) == 40
        assert rows(tmp_path / "unum.db") == []
        queue.push(second, time.time())
        queue.finish(first)
        store.database.write(lambda conn: conn.execute("DROP TRIGGER refuse"))
        queue.flush()
        assert rows(tmp_path / "unum.db") == [("Second", None)]
    finally:
        queue.close()
        store.close()


def test_a_delivery_whose_row_cannot_be_written_does_not_run_until_it_is(tmp_path: Path) -> None:
    """The queue's own file refuses its first writes (a disk error): the delivery whose row is
    not on disk is not run but delivered again after a backoff, and each handler runs once."""
    folder, gate = _gated_chain(tmp_path)
    gate.touch()
    workflow = load_workflow(folder)
    queue = SQLiteQueue(tmp_path / "q.db", batch_interval=2)  # its own thread writes nothing during the run
    write = queue.database.write
    refused: list[int] = []

    def failing(fn: Any, *, sync: bool = True) -> Any:
        if len(refused) < 3:
            refused.append(1)
            raise sqlite3.OperationalError("disk I/O error")
        return write(fn, sync=sync)

    queue.database.write = failing  # type: ignore[method-assign]
    with LocalPlatform(workflow, FileStore(tmp_path / "store"), queue=queue, retry_delay=0.01, max_backoff=0.05) as platform:
        result = platform.run(None, workflow_id="wf-refused", timeout=30)
        assert result.result == 42, result
        assert len(refused) == 3 and platform.stats["redeliveries"] >= 1, platform.stats
        assert platform.stats["committed"] == 3  # A, B and C, each once


def test_a_journal_write_that_fails_inside_a_store_commit_leaves_the_commit_and_is_written_later(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The journal's rows fail to apply inside a store commit, in its quick pass and again in
    its careful one (a disk error): the commit runs again with them in a savepoint, undone
    there; the store write lands, the rows are put back and written by a later commit, and the
    workflow completes with its result, no delivery left in its journal."""
    from unum_entry.local import queue as queue_module

    folder, gate = _gated_chain(tmp_path)
    gate.touch()
    apply = queue_module._Batch.apply
    failures = [sqlite3.OperationalError("disk I/O error")] * 2

    def failing(self: Any, conn: sqlite3.Connection) -> None:
        if failures:
            raise failures.pop()
        apply(self, conn)

    monkeypatch.setattr(queue_module._Batch, "apply", failing)
    store = SQLiteStore.open(tmp_path / "s.db")
    with LocalPlatform(load_workflow(folder), store, queue=SQLiteQueue(store.database), retry_delay=0.01,
                       max_backoff=0.05) as platform:
        result = platform.run(None, workflow_id="wf-rider", timeout=30)
        assert result.result == 42, result
        assert failures == [], failures
    assert [row for row in rows(tmp_path / "s.db") if row[1] is None] == []  # (the watchdog's timer stays)
    store.close()
