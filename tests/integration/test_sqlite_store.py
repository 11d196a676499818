"""The SQLite store beyond the shared contract (tests/integration/test_store_contract.py runs that
on it): several processes racing on one database file, kill -9 at random instants never losing a
write that returned, a simulated power loss (a loop-mounted ext4 image copied as its "disk" holds
it: `full` keeps every returned write, `off` loses them), what each durability setting fsyncs
(strace), group commit, and every bad database file as one line through the real CLI with
nothing lost. docs/embedded-store.md says what each shows and what it cannot."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from unum_entry.errors import StoreError
from unum_entry.stores import open_store
from unum_entry.stores.sqlite import SCHEMA_VERSION, SQLiteStore

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXPIRY = int(time.time()) + 7 * 24 * 3600
# Rounds of the kill -9 and power-loss campaigns: a short version in CI; the long one is
# `UNUM_DURABILITY_ROUNDS=100 python -m pytest tests/integration/test_sqlite_store.py -k "kill or power"`
# (its result is in docs/embedded-store.md).
ROUNDS = int(os.environ.get("UNUM_DURABILITY_ROUNDS", "0")) or None


def python(script: str, *args: object, **kwargs) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)], cwd=REPO, text=True,
                            **kwargs)


# ---- several processes on one file ---------------------------------------------------------

RACER = """
    import json, sys, time
    from unum_entry.stores.sqlite import SQLiteStore
    path, (me, processes, keys), start = sys.argv[1], map(int, sys.argv[2:5]), float(sys.argv[5])
    expiry = int(sys.argv[6])
    store = SQLiteStore.open(path)
    while time.time() < start:  # every process starts racing at once
        time.sleep(0.001)
    creates, adds = {}, {}
    for i in range(keys):
        value, created = store.create(f"c-{i}", f"from-{me}".encode(), workflow="wf", expires_at=expiry)
        creates[i] = [value.decode(), created]
        state = store.add_to_set(f"s-{i}", me, f"m-{me}", size=processes, workflow="wf", expires_at=expiry)
        adds[i] = [state.full, state.completed_by, sorted(state.members)]
    print(json.dumps({"creates": creates, "adds": adds}))
"""


def test_processes_racing_on_one_file_agree_on_every_winner_and_every_set(tmp_path: Path) -> None:
    path, processes, keys = tmp_path / "unum.db", 4, 150
    SQLiteStore.open(path).close()  # the schema exists before the race (creating it concurrently is tested below)
    start = time.time() + 2
    racers = [python(RACER, path, me, processes, keys, start, EXPIRY, stdout=subprocess.PIPE)
              for me in range(processes)]
    outputs = []
    for racer in racers:
        out, _ = racer.communicate(timeout=120)
        assert racer.returncode == 0
        outputs.append(json.loads(out))

    store = SQLiteStore.open(path)
    try:
        for i in map(str, range(keys)):
            results = [output["creates"][i] for output in outputs]
            winners = [value for value, created in results if created]
            assert len(winners) == 1, results
            assert {value for value, _ in results} == {winners[0]} == {store.get(f"c-{i}").decode()}
            adds = [output["adds"][i] for output in outputs]
            assert any(full for full, _, _ in adds)  # the add that filled the set saw it full
            assert len({completed_by for full, completed_by, _ in adds if full}) == 1  # and all agree who did
            assert store.read([f"s-{i}"])[f"s-{i}"].members == {me: f"m-{me}" for me in range(processes)}
    finally:
        store.close()


def test_processes_opening_a_new_file_at_once_all_get_the_store(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "unum.db"
    start = time.time() + 1.5
    racers = [python(RACER, path, me, 3, 5, start, EXPIRY, stdout=subprocess.PIPE) for me in range(3)]
    for racer in racers:
        racer.communicate(timeout=120)
        assert racer.returncode == 0


# ---- kill -9 -----------------------------------------------------------------------------------

WRITER = """
    import os, sys, threading
    from unum_entry.stores.sqlite import SQLiteStore
    path, (durability, _, bulk), tag, expiry = sys.argv[1], sys.argv[2].partition("+"), sys.argv[3], int(sys.argv[4])
    store = SQLiteStore.open(path, durability=durability)
    if bulk:  # "full+bulk": checkpoints at BULK_WAL_PAGES (a wide fan-out's setting)
        store.expect_bulk_writes()
    log = os.open(sys.argv[5], os.O_WRONLY | os.O_APPEND)
    def work(thread):
        for i in range(1_000_000):
            key = f"c-{tag}-{thread}-{i}"
            store.create(key, key.encode(), workflow=f"wf-{tag}", expires_at=expiry)
            state = store.add_to_set(f"s-{tag}-{i}", thread, key, size=8, workflow=f"wf-{tag}", expires_at=expiry)
            # Logged only once both writes returned: one write(2), so it survives the kill whole or not at all.
            os.write(log, f"{key} {sorted(state.members)}\\n".encode())
    for thread in range(8):
        threading.Thread(target=work, args=(thread,)).start()
"""


@pytest.mark.parametrize("durability", ["full", "off", "full+bulk"])
def test_kill_9_at_random_instants_never_loses_a_write_that_returned(tmp_path: Path, durability: str) -> None:
    """kill -9 survives with every durability (the page cache outlives the process); only power
    loss tells `full` from `off` (module docstring)."""
    path, rounds, rng = tmp_path / "unum.db", ROUNDS or 6, random.Random(19)
    returned = 0
    for round_ in range(rounds):  # bounded: a few seconds a round
        log = tmp_path / f"returned-{round_}.log"
        log.write_text("")
        writer = python(WRITER, path, durability, round_, EXPIRY, log)
        deadline = time.monotonic() + 30
        while log.stat().st_size == 0 and writer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # until it writes (the import and open take a while)
        time.sleep(rng.uniform(0.0, 0.4))
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        assert writer.returncode == -signal.SIGKILL

        lines = log.read_text().splitlines()
        assert lines, "the writer wrote nothing before it was killed"
        store = SQLiteStore.open(path)
        try:
            keys = [line.split(" ", 1)[0] for line in lines]
            assert store.get_many(keys) == {key: key.encode() for key in keys}
            for line in lines:  # every set holds at least the members its adder saw
                key, seen = line.split(" ", 1)
                index = key.rsplit("-", 1)[1]
                members = store.read([f"s-{round_}-{index}"])[f"s-{round_}-{index}"].members
                assert set(json.loads(seen)) <= set(members)
            check = store.database.read(lambda conn: conn.execute("PRAGMA integrity_check").fetchone()[0])
            assert check == "ok"
        finally:
            store.close()
        returned += len(lines)
    assert returned > rounds * 10


# ---- power loss: a disk image that keeps only what reached the "device" -------------------

@pytest.fixture
def loop_disk(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(image, mountpoint): a 24 MiB ext4 file system on a loop device; needs root (as CI)."""
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        pytest.skip("a loop-mounted ext4 image needs root and e2fsprogs (CI runs as root)")
    image, mountpoint = tmp_path / "disk.img", tmp_path / "disk"
    mountpoint.mkdir()
    with image.open("wb") as handle:
        handle.truncate(24 * 1024 * 1024)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, timeout=60)
    subprocess.run(["mount", "-o", "loop", str(image), str(mountpoint)], check=True, timeout=60)
    try:
        yield image, mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=True, timeout=60)


def power_cut(image: Path, tmp_path: Path, name: str) -> Path:
    """Mount, elsewhere, a copy of what the loop device has received so far: every write the
    file system sent to its "disk" (all that was fsynced, and whatever writeback sent), but not
    the dirty pages still in its page cache - the disk as a power loss would leave it."""
    copy, mountpoint = tmp_path / f"{name}.img", tmp_path / name
    shutil.copyfile(image, copy)  # reads the backing file, not the mounted file system's cache
    mountpoint.mkdir()
    subprocess.run(["mount", "-o", "loop", str(copy), str(mountpoint)], check=True, timeout=60)  # journal replay
    return mountpoint


@pytest.mark.parametrize("durability", ["full", "off", "full+bulk"])
def test_a_power_loss_keeps_every_write_that_returned_with_full(loop_disk: tuple[Path, Path], tmp_path: Path,
                                                                 durability: str) -> None:
    """The writer runs on an ext4 image; at a random instant it is killed and the image copied
    as the device holds it (the file system's unsynced page cache is left out, as a power cut
    would). With `full` every write that returned is in the copy. With `off` writes that
    returned are lost (all of them, as measured here: the kernel writes dirty pages back after
    ~30 s): the method sees what it is meant to see."""
    image, mountpoint = loop_disk
    rng, lost_with_off = random.Random(7), []
    for round_ in range(ROUNDS or 3):  # bounded
        log = tmp_path / f"returned-{round_}.log"
        log.write_text("")
        database = mountpoint / f"unum-{round_}.db"  # one per round: the small file system never fills up
        writer = python(WRITER, database, durability, round_, EXPIRY, log)
        deadline = time.monotonic() + 30
        while log.stat().st_size == 0 and writer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.1, 0.4))
        writer.send_signal(signal.SIGKILL)  # dirty pages stay in the page cache: not on the "disk"
        writer.wait(timeout=30)
        after = power_cut(image, tmp_path, f"after-{round_}")
        try:
            keys = [line.split(" ", 1)[0] for line in log.read_text().splitlines()]
            assert keys
            store = SQLiteStore.open(after / database.name)
            try:
                found = store.get_many(keys)
            finally:
                store.close()
            missing = [key for key in keys if found.get(key) != key.encode()]
            if durability.startswith("full"):
                assert not missing, f"{len(missing)} of {len(keys)} returned writes lost: {missing[:3]}"
            else:
                lost_with_off.append((len(missing), len(keys)))
        finally:
            subprocess.run(["umount", "-l", str(after)], check=True, timeout=60)
            (tmp_path / f"after-{round_}.img").unlink()
            for leftover in mountpoint.glob(f"{database.name}*"):
                leftover.unlink()
    if durability == "off":
        assert any(lost for lost, _ in lost_with_off), lost_with_off


# ---- what each durability setting syncs --------------------------------------------------

AUDITED = """
    import os, sys, threading
    from unum_entry.stores.sqlite import SQLiteStore
    path, durability, (threads, per_thread, expiry) = sys.argv[1], sys.argv[2], map(int, sys.argv[3:6])
    store = SQLiteStore.open(path, durability=durability)
    store.create("c-warm", b"w", workflow="wf", expires_at=expiry)
    os.access("/unum-audit-begin", os.F_OK)  # markers in the trace
    def work(thread):
        for i in range(per_thread):
            store.create(f"c-{thread}-{i}", b"v", workflow="wf", expires_at=expiry)
    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    [w.start() for w in workers]
    [w.join() for w in workers]
    os.access("/unum-audit-end", os.F_OK)
"""


def wal_syncs(tmp_path: Path, durability: str, threads: int, per_thread: int) -> int:
    """How many fsync/fdatasync calls on the WAL file the creates made (strace -f -y)."""
    if shutil.which("strace") is None:
        pytest.fail("strace is missing: localstack/setup.d/15-durability-tools.sh installs it")
    trace = tmp_path / f"trace-{durability}-{threads}.txt"
    path = tmp_path / f"audit-{durability}-{threads}.db"
    proc = subprocess.run(["strace", "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync,access,faccessat,faccessat2",
                           "-o", str(trace), sys.executable, "-c", textwrap.dedent(AUDITED), str(path), durability,
                           str(threads), str(per_thread), str(EXPIRY)], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = trace.read_text()
    begin, end = text.index("/unum-audit-begin"), text.index("/unum-audit-end")
    return len(re.findall(r"f(?:data)?sync\(\d+<[^>]*-wal>\)", text[begin:end]))


def test_full_durability_fsyncs_the_wal_at_every_commit_and_off_never(tmp_path: Path) -> None:
    creates = 40
    assert wal_syncs(tmp_path, "full", 1, creates) >= creates  # one thread: one commit per create
    assert wal_syncs(tmp_path, "normal", 1, creates) == 0      # synced only at checkpoints
    assert wal_syncs(tmp_path, "off", 1, creates) == 0


def test_group_commit_shares_one_fsync_among_concurrent_writers(tmp_path: Path) -> None:
    threads, per_thread = 16, 40
    syncs = wal_syncs(tmp_path, "full", threads, per_thread)
    assert 0 < syncs <= threads * per_thread / 2, syncs


JOINING = """
    import hashlib, os, sys
    from unum_entry.stores.base import Joining, SetAdd
    from unum_entry.stores.sqlite import SQLiteStore
    path, expiry = sys.argv[1], int(sys.argv[2])
    def name(text):  # a hash, as checkpoint names are: each create lands on a random page of the key index
        return "c-" + hashlib.sha256(text.encode()).hexdigest()[:32]
    store = SQLiteStore.open(path, durability="off")
    for batch in range(20):  # records enough that 16 creates change more than 16 pages (a 64 KiB journal)
        store.create_joining_many([Joining(name(f"old-{batch}-{i}"), b"v" * 100, "wf", expiry,
                                           SetAdd(f"s-old-{batch}", 0, "m", 1, expiry)) for i in range(1000)])
    os.access("/unum-audit-begin", os.F_OK)  # markers in the trace
    for batch in range(8):  # a worker's batches of fan-in branches: each set's items in a savepoint
        store.create_joining_many([Joining(name(f"{batch}-{i}"), b"v", "wf", expiry,
                                           SetAdd(f"s-{batch}", i, name(f"{batch}-{i}"), 16, expiry))
                                   for i in range(16)])
    os.access("/unum-audit-end", os.F_OK)
    print(sum(len(store.get_many([name(f"{batch}-{i}") for i in range(16)])) for batch in range(8)))
"""


def test_a_batch_of_joining_creates_writes_only_the_database_and_its_wal(tmp_path: Path) -> None:
    """A savepoint's statement journal (the pages `ROLLBACK TO` would restore) stays in memory
    (`PRAGMA temp_store = MEMORY` on the writer). SQLite spills one over 64 KiB to a temporary
    file: a savepoint of 16 fan-in branches on a big store changes more than 16 pages, so each
    batch opened, wrote and deleted a file (docs/embedded-engine.md, round 15)."""
    if shutil.which("strace") is None:
        pytest.fail("strace is missing: localstack/setup.d/15-durability-tools.sh installs it")
    trace, path = tmp_path / "trace-joining.txt", tmp_path / "joining.db"
    proc = subprocess.run(["strace", "-f", "-y", "-qq", "-e", "trace=openat,write,pwrite64,access,faccessat,faccessat2",
                           "-o", str(trace), sys.executable, "-c", textwrap.dedent(JOINING), str(path), str(EXPIRY)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["128"]  # every create of the audited batches landed
    text = trace.read_text()
    audited = text[text.index("/unum-audit-begin"):text.index("/unum-audit-end")]
    written = re.findall(r"p?write(?:64)?\(\d+<([^>]*)>", audited)
    assert any(name.endswith("joining.db-wal") for name in written), written  # (the trace sees the writes)
    assert {name for name in written if not name.startswith(str(path))} == set()
    assert "etilqs" not in audited  # (SQLite's temporary files: none opened either)


def test_bulk_writes_checkpoint_a_larger_wal_and_keep_every_record(tmp_path: Path) -> None:
    """After `expect_bulk_writes` the WAL is checkpointed at BULK_WAL_PAGES, not WAL_PAGES: it
    grows past WAL_PAGES (no checkpoint copied it back into the file meanwhile), every record is
    there after a reopen, and the file is intact. Before it, the same writes keep the WAL within
    about WAL_PAGES."""
    from unum_entry.stores.sqlite_database import BULK_WAL_PAGES, WAL_PAGES

    def wal_pages(path: Path) -> int:
        return Path(f"{path}-wal").stat().st_size // 4096

    for bulk in (False, True):
        path = tmp_path / f"bulk-{bulk}.db"
        store = SQLiteStore.open(path, durability="full")
        if bulk:
            store.expect_bulk_writes()
        for i in range(3 * WAL_PAGES):
            store.create(f"c-{i}", b"v" * 200, workflow="wf", expires_at=EXPIRY)
        setting = store.database.write(lambda conn: conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        assert setting == (BULK_WAL_PAGES if bulk else WAL_PAGES)
        if bulk:
            assert wal_pages(path) > 2 * WAL_PAGES, wal_pages(path)
        else:
            assert wal_pages(path) < 2 * WAL_PAGES, wal_pages(path)
        store.close()
        again = SQLiteStore.open(path, durability="full")
        assert len(list(again.records("wf"))) == 3 * WAL_PAGES
        assert again.database.read(lambda conn: conn.execute("PRAGMA integrity_check").fetchone()[0]) == "ok"
        again.close()


def test_full_durability_presizes_the_wal_so_commits_overwrite_instead_of_growing_it(tmp_path: Path) -> None:
    """With `full`, the first write of a process grows the WAL to WAL_PAGES pages without
    committing anything (Database._presize_wal); the commits after it stay inside that size (the
    WAL is checkpointed and rewritten from its start), every record is there after a reopen, the
    presize's scratch row never is, and the file is intact. `normal` does not presize."""
    from unum_entry.stores.sqlite_database import WAL_PAGES

    path = tmp_path / "full.db"
    store = SQLiteStore.open(path, durability="full")
    store.create("c-0", b"v", workflow="wf", expires_at=EXPIRY)
    wal = Path(f"{path}-wal")
    presized = wal.stat().st_size
    assert presized >= WAL_PAGES * 4096, presized
    for i in range(1, 3 * WAL_PAGES):  # several times the WAL's size in pages: it must cycle
        store.create(f"c-{i}", b"v" * 200, workflow="wf", expires_at=EXPIRY)
    assert wal.stat().st_size <= presized + 64 * 1024, (presized, wal.stat().st_size)
    store.close()
    again = SQLiteStore.open(path, durability="full")
    assert len(list(again.records("wf"))) == 3 * WAL_PAGES
    assert len(list(again.records())) == 3 * WAL_PAGES  # no scratch row of the presize
    assert again.database.read(lambda conn: conn.execute("PRAGMA integrity_check").fetchone()[0]) == "ok"
    again.close()
    relaxed = SQLiteStore.open(tmp_path / "normal.db", durability="normal")
    relaxed.create("c-0", b"v", workflow="wf", expires_at=EXPIRY)
    assert Path(f"{tmp_path / 'normal.db'}-wal").stat().st_size < WAL_PAGES * 4096
    relaxed.close()


JOURNALED = """
    import os, sys
    from unum_entry.local.queue import Delivery, SQLiteQueue
    from unum_entry.stores.sqlite import SQLiteStore
    path, expiry, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = SQLiteStore.open(path, durability="full")
    queue = SQLiteQueue(store.database)
    store.create("c-warm", b"w", workflow="wf", expires_at=expiry)
    os.access("/unum-audit-begin", os.F_OK)
    for i in range(batches):  # one journal transaction each: flush waits for it
        queue.push(Delivery("wf", "F", b"payload"), 0.0)
        queue.flush()
    os.access("/unum-audit-end", os.F_OK)
    store.create("c-after", b"v", workflow="wf", expires_at=expiry)
    os.access("/unum-audit-store", os.F_OK)
    assert len(queue.recover("wf")) == batches
    queue.close()
"""


def test_the_journal_shares_the_store_database_and_its_commits_need_no_fsync_of_their_own(tmp_path: Path) -> None:
    """The delivery queue journals into the store's own file (one writer, group commit) but
    asks only for WAL order (module docstring of unum_entry.local.queue): 20 journal-only
    transactions make no WAL sync; the store's next create (durability full) syncs them all."""
    if shutil.which("strace") is None:
        pytest.fail("strace is missing: localstack/setup.d/15-durability-tools.sh installs it")
    trace, path = tmp_path / "trace.txt", tmp_path / "unum.db"
    proc = subprocess.run(["strace", "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync,access,faccessat,faccessat2",
                           "-o", str(trace), sys.executable, "-c", textwrap.dedent(JOURNALED), str(path), str(EXPIRY),
                           "20"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = trace.read_text()
    begin, end, stored = (text.index(marker) for marker in ("/unum-audit-begin", "/unum-audit-end", "/unum-audit-store"))
    syncs = re.compile(r"f(?:data)?sync\(\d+<[^>]*-wal>\)")
    assert syncs.findall(text[begin:end]) == []
    assert len(syncs.findall(text[end:stored])) >= 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM unum_queue").fetchone()[0] == 20
        assert conn.execute("PRAGMA application_id").fetchone()[0] == 0x756E756D  # the store's file: one database


# ---- the shared database (the durable delivery queue keeps its tables in the same file) -----

def test_a_failing_write_in_a_batch_undoes_only_its_own_changes(tmp_path: Path) -> None:
    import threading

    store = SQLiteStore.open(tmp_path / "unum.db")
    db = store.database
    db.ensure_schema(["CREATE TABLE IF NOT EXISTS test_rows (id INTEGER PRIMARY KEY, thread INTEGER)"])
    db.ensure_schema(["CREATE TABLE IF NOT EXISTS test_rows (id INTEGER PRIMARY KEY, thread INTEGER)"])  # idempotent
    errors: list[str] = []

    def insert(thread: int, fail: bool) -> None:
        def fn(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO test_rows (thread) VALUES (?)", (thread,))
            if fail:
                raise ValueError(f"thread {thread} fails after writing")
            return thread

        try:
            assert db.write(fn) == thread
        except ValueError as exc:
            errors.append(str(exc))

    try:
        for _ in range(20):  # bounded: enough rounds for writes to share batches
            threads = [threading.Thread(target=insert, args=(t, t % 3 == 0)) for t in range(12)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
        rows = db.read(lambda conn: conn.execute("SELECT thread, count(*) FROM test_rows GROUP BY thread").fetchall())
        assert dict(rows) == {t: 20 for t in range(12) if t % 3}
        assert len(errors) == 20 * 4
        with db.transaction() as conn:
            conn.execute("DELETE FROM test_rows")
        with pytest.raises(RuntimeError), db.transaction() as conn:
            conn.execute("INSERT INTO test_rows (thread) VALUES (99)")
            raise RuntimeError("rolled back")
        assert db.read(lambda conn: conn.execute("SELECT count(*) FROM test_rows").fetchone()[0]) == 0
    finally:
        store.close()


def test_a_batch_runs_without_savepoints_until_a_write_raises_then_each_in_its_own(tmp_path: Path) -> None:
    """One batch built by hand (deterministic, unlike racing threads): writes that all succeed
    share the transaction with no SAVEPOINT statement; when the middle one raises after writing,
    the batch is rolled back and runs again, each write in a savepoint: the others' rows and
    results land once, the failing write's row not at all."""
    from unum_entry.stores.sqlite_database import _Write

    store = SQLiteStore.open(tmp_path / "unum.db")
    db = store.database
    db.ensure_schema(["CREATE TABLE IF NOT EXISTS test_rows (id INTEGER PRIMARY KEY, writer TEXT)"])
    statements: list[str] = []
    db._writer_connection().set_trace_callback(statements.append)
    runs: list[str] = []

    def write(name: str, fail: bool = False) -> _Write:
        def fn(conn: sqlite3.Connection) -> str:
            runs.append(name)
            conn.execute("INSERT INTO test_rows (writer) VALUES (?)", (name,))
            if fail:
                raise ValueError(f"{name} fails after writing")
            return name.upper()

        return _Write(fn)

    def rows() -> list[str]:
        return sorted(r[0] for r in db.read(lambda conn: conn.execute("SELECT writer FROM test_rows").fetchall()))

    try:
        fine = [write("a"), write("b"), write("c")]
        db._commit_batch(fine)
        assert [(item.result, item.error, item.done) for item in fine] == [("A", None, True), ("B", None, True),
                                                                          ("C", None, True)]
        assert not [s for s in statements if "SAVEPOINT" in s] and runs == ["a", "b", "c"]
        assert rows() == ["a", "b", "c"]

        statements.clear()
        runs.clear()
        mixed = [write("d"), write("e", fail=True), write("f")]
        db._commit_batch(mixed)
        assert [item.result for item in mixed] == ["D", None, "F"]
        assert mixed[0].error is None and mixed[2].error is None
        assert isinstance(mixed[1].error, ValueError) and "e fails" in str(mixed[1].error)
        assert runs == ["d", "e", "d", "e", "f"]  # the optimistic pass stopped at e; the savepoint pass ran all
        assert sum("SAVEPOINT" in s for s in statements) == 3
        assert rows() == ["a", "b", "c", "d", "f"]

        alone = [write("g", fail=True)]  # a lone write that raises: rolled back, nothing committed
        db._commit_batch(alone)
        assert isinstance(alone[0].error, ValueError) and rows() == ["a", "b", "c", "d", "f"]
    finally:
        store.close()


# ---- bad database files: one line, exit 2, nothing lost ------------------------------------

def cli(*args: object, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, **kwargs)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    [line] = [line for line in proc.stderr.splitlines() if not line.startswith("workflow ")]
    return line


def test_a_corrupt_file_is_one_line_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "unum.db"
    garbage = os.urandom(8192)
    path.write_bytes(garbage)
    line = one_line_error(cli("run", "images/chain", "--store", path))
    assert str(path) in line and "corrupt or not an SQLite database" in line
    assert path.read_bytes() == garbage


def test_a_database_of_a_newer_unum_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "unum.db"
    store = SQLiteStore.open(path)
    store.create("c-kept", b"kept", workflow="wf", expires_at=EXPIRY)
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    line = one_line_error(cli("run", "images/chain", "--store", path))
    assert f"{path} was written by a newer unum" in line and "upgrade unum" in line
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM unum_records WHERE key = 'c-kept'").fetchone() == (b"kept",)


def _schema_1_file(path: Path, records: int) -> Path:
    """A store file as schema 1 left it (the (workflow, key) index), holding `records` records."""
    store = SQLiteStore.open(path)
    for i in range(records):
        store.create(f"c-{i}", f"v{i}".encode(), workflow="wf", expires_at=EXPIRY)
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX unum_records_by_workflow")
        conn.execute("CREATE INDEX unum_records_by_workflow_key ON unum_records (workflow, key)")
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    return path


def _indexes_and_version(path: Path) -> tuple[set[str], int]:
    with sqlite3.connect(path) as conn:
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    return indexes, version


def test_a_schema_1_database_is_migrated_on_open_and_keeps_its_records(tmp_path: Path) -> None:
    path = _schema_1_file(tmp_path / "unum.db", records=3)
    store = SQLiteStore.open(path)
    try:
        assert [r.key for r in store.records("wf")] == ["c-0", "c-1", "c-2"]
    finally:
        store.close()
    indexes, version = _indexes_and_version(path)
    assert version == SCHEMA_VERSION
    assert "unum_records_by_workflow" in indexes and "unum_records_by_workflow_key" not in indexes


OPENER = """
    import sys, time
    from unum_entry.stores.sqlite import SQLiteStore
    path, start = sys.argv[1], float(sys.argv[2])
    while time.time() < start:  # every process opens at once
        time.sleep(0.001)
    store = SQLiteStore.open(path)
    print(sum(1 for _ in store.records("wf")))
    store.close()
"""


def test_processes_opening_a_schema_1_file_at_once_all_get_it_migrated(tmp_path: Path) -> None:
    """The migration runs in the opening transaction (BEGIN IMMEDIATE): one process migrates,
    the others find schema 2; none fails, none sees a record missing."""
    path = _schema_1_file(tmp_path / "unum.db", records=50)
    start = time.time() + 1.5
    openers = [python(OPENER, path, start, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    for opener in openers:
        out, err = opener.communicate(timeout=120)
        assert opener.returncode == 0 and out == "50\n", err
    indexes, version = _indexes_and_version(path)
    assert version == SCHEMA_VERSION and "unum_records_by_workflow_key" not in indexes


def test_a_scan_meets_each_record_once_in_creation_order_while_records_are_rewritten(tmp_path: Path) -> None:
    """Pages are read by rowid: a write during the scan (a set add, an expired record made
    again, a step's record) must not give a record a new rowid, or the scan meets it twice."""
    clock = [1000.0]
    store = SQLiteStore.open(tmp_path / "unum.db", clock=lambda: clock[0])
    try:
        keys = [f"k-{i:04d}-{'zyx'[i % 3]}" for i in range(2500)]  # not in key order: rowid order is creation order
        for i, key in enumerate(keys):
            expires_at = 1500 if i < 2 else 5000  # the first two expire mid-scan and are made again
            if i % 2:
                store.create(key, b"v", workflow="wf", expires_at=expires_at)
            else:
                store.add_to_set(key, 0, "m", workflow="wf", size=2, expires_at=expires_at)
        seen = []
        for record in store.records("wf"):
            if len(seen) == 10:  # mid-scan: records already met are written again
                clock[0] = 1600.0
                store.add_to_set(keys[0], 1, "n", workflow="wf", size=2, expires_at=6000)  # an expired set made anew
                store.create(keys[1], b"again", workflow="wf", expires_at=6000)  # an expired value made anew
                store.add_to_set(keys[2], 1, "n", workflow="wf", size=2, expires_at=5000)  # a live set's add
            seen.append(record.key)
        assert seen[:10] == keys[:10] and len(seen) == len(set(seen))
    finally:
        store.close()


def test_an_sqlite_file_of_another_program_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()
    before = path.read_bytes()
    assert "not a unum store" in one_line_error(cli("run", "images/chain", "--store", path))
    assert path.read_bytes() == before  # not even switched to WAL mode


def test_a_database_locked_by_another_process_is_one_line_after_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "unum.db"
    SQLiteStore.open(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        line = one_line_error(cli("run", "images/chain", "--store", f"sqlite://{path}?busy_timeout=1"))
        assert time.monotonic() - started < 30
        assert "locked by another process" in line and str(path) in line
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    released = cli("run", "images/chain", "--input", '{"name": "x"}', "--store", path)
    assert released.returncode == 0, released.stderr  # released: it works


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A real 256 KiB file system (tmpfs) to fill up or remount read-only; needs root (as CI)."""
    mountpoint = tmp_path / "fs"
    mountpoint.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root (CI runs as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mountpoint)], check=True, timeout=30)
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=True, timeout=30)


def remount(mountpoint: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mountpoint)], check=True, timeout=30)


def test_a_store_on_a_read_only_file_system_is_one_line_and_kept(small_filesystem: Path) -> None:
    path = small_filesystem / "unum.db"
    store = SQLiteStore.open(path)
    store.create("c-kept", b"kept", workflow="wf", expires_at=EXPIRY)
    store.close()
    remount(small_filesystem, "ro")
    line = one_line_error(cli("run", "images/chain", "--input", '{"name": "x"}', "--store", path))
    assert str(path) in line and "read-only" in line, line
    remount(small_filesystem, "rw")
    store = SQLiteStore.open(path)
    try:
        assert store.get("c-kept") == b"kept"
    finally:
        store.close()


def test_a_full_disk_stops_the_run_at_once_names_the_store_and_loses_nothing(small_filesystem: Path,
                                                                             tmp_path: Path) -> None:
    """The store's part: a write on a full disk is a StoreUnusable saying the disk is full; the
    engine stops at once instead of redelivering every branch until it gives up (it took 30 s
    and dead-lettered them), and what was committed and queued stays intact: once space is
    freed, the same command resumes to the fault-free run's result."""
    path = small_filesystem / "unum.db"
    text = json.dumps({"text": " ".join(f"word{i}" for i in range(400))})
    run = ("run", "images/map-aggregate", "--input", text, "--compact")
    began = time.monotonic()
    try:
        proc = cli(*run, "--store", path, "--workflow-id", "wf-full-disk", timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("run hung for 90 s on a full disk instead of stopping with the store's error")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (f"error: store {path}: the disk is full: free space, then run "
                                                    "again with the same --workflow-id")
    assert "dropped delivery" not in proc.stderr and time.monotonic() - began < 20  # (30 s before: every retry)
    remount(small_filesystem, "size=16m")
    store = SQLiteStore.open(path)
    try:
        check = store.database.read(lambda conn: conn.execute("PRAGMA integrity_check").fetchone()[0])
        assert check == "ok"
        assert any(record.workflow == "wf-full-disk" for record in store.records())
    finally:
        store.close()
    resumed = cli(*run, "--store", path, "--workflow-id", "wf-full-disk")
    fault_free = cli(*run, "--store", tmp_path / "fault-free.db")
    assert resumed.returncode == 0 and "resuming:" in resumed.stderr, resumed.stderr
    assert fault_free.returncode == 0 and resumed.stdout == fault_free.stdout and json.loads(resumed.stdout)["words"] == 400


def test_only_errors_someone_must_act_on_are_unusable(tmp_path: Path) -> None:
    """A full disk, a read-only or corrupt file: StoreUnusable (the engine stops at once); a
    database locked by another process: a plain StoreError (it passes: redeliver)."""
    from unum_entry.errors import StoreUnusable

    store = SQLiteStore.open(tmp_path / "unum.db")
    try:
        mapped = {text: store.database._as_store_error(sqlite3.OperationalError(text), "write")
                  for text in ("database or disk is full", "attempt to write a readonly database",
                               "database disk image is malformed", "database is locked")}
        assert [isinstance(error, StoreUnusable) for error in mapped.values()] == [True, True, True, False]
        assert all(isinstance(error, StoreError) and str(tmp_path) in str(error) for error in mapped.values())
    finally:
        store.close()


def test_open_store_picks_sqlite_for_db_paths_and_urls(tmp_path: Path) -> None:
    for url in (str(tmp_path / "a.db"), f"sqlite://{tmp_path}/b.db?durability=normal",
                f"sqlite://{tmp_path}/c.sqlite3"):
        store = open_store(url)
        try:
            assert isinstance(store, SQLiteStore)
        finally:
            store.close()
    with pytest.raises(StoreError, match="unknown durability 'fast'"):
        open_store(f"sqlite://{tmp_path}/d.db?durability=fast")
    with pytest.raises(StoreError, match="unknown option"):
        open_store(f"sqlite://{tmp_path}/d.db?sync=1")


def test_a_writer_interrupted_while_waiting_for_its_batch_never_strands_the_group_commit(tmp_path: Path) -> None:
    """Ctrl-C (here: SIGALRM raising KeyboardInterrupt) in the main thread while it waits for
    another thread's batch: the write is withdrawn (not committed) and the next writers still
    commit - the lead is never left with a writer that has gone."""
    import threading

    store = SQLiteStore.open(tmp_path / "unum.db")
    db = store.database
    db.ensure_schema(["CREATE TABLE IF NOT EXISTS test_rows (name TEXT PRIMARY KEY)"])

    def slow(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO test_rows VALUES ('slow')")
        time.sleep(0.6)

    leader = threading.Thread(target=db.write, args=(slow,))
    leader.start()
    time.sleep(0.1)  # the thread leads its batch

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(KeyboardInterrupt):
            db.write(lambda conn: conn.execute("INSERT INTO test_rows VALUES ('interrupted')"))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    leader.join(timeout=10)
    later = threading.Thread(target=db.write, args=(lambda conn: conn.execute("INSERT INTO test_rows VALUES ('later')"),),
                             daemon=True)
    later.start()
    later.join(timeout=10)
    assert not later.is_alive(), "the group commit was stranded"
    names = db.read(lambda conn: {r[0] for r in conn.execute("SELECT name FROM test_rows")})
    assert names == {"slow", "later"}
    store.close()


def test_a_set_add_on_damaged_members_or_on_a_value_names_the_record_and_changes_nothing(tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "s.db", durability="off")
    expires = int(time.time()) + 3600
    try:
        store.add_to_set("set-a", 0, "m0", size=4, workflow="wf", expires_at=expires)
        assert dict(store.add_to_set("set-a", 1, "m1", size=4, workflow="wf", expires_at=expires).members) == \
            {0: "m0", 1: "m1"}
        with sqlite3.connect(tmp_path / "s.db") as conn:  # another program wrote over the members
            conn.execute("UPDATE unum_records SET members = ? WHERE key = 'set-a'", (b"\x93\x01\x02\x03",))
        with pytest.raises(StoreError, match="store record 'set-a' is not a unum record"):
            store.add_to_set("set-a", 2, "m2", size=4, workflow="wf", expires_at=expires)
        store.create("value-a", b"v", workflow="wf", expires_at=expires)
        with pytest.raises(StoreError, match="store key 'value-a' holds a checkpoint, not a set"):
            store.add_to_set("value-a", 0, "m0", size=4, workflow="wf", expires_at=expires)
        assert store.get("value-a") == b"v"
    finally:
        store.close()


def test_a_rider_that_raises_in_the_quick_pass_runs_again_in_a_savepoint_and_the_write_lands(
        tmp_path: Path) -> None:
    """A rider (the delivery queue's journal) that raises inside a commit: the transaction is
    rolled back and the batch runs again with the rider in a savepoint of its own (`careful`):
    the store write lands once, the rider's changes once, the first attempt's not at all."""
    store = SQLiteStore.open(tmp_path / "s.db", durability="off")
    database = store.database
    database.ensure_schema(["CREATE TABLE IF NOT EXISTS unum_test_rides (n INTEGER)"])
    calls: list[bool] = []
    settled: list[bool] = []

    def rider(conn: sqlite3.Connection, careful: bool) -> Any:
        calls.append(careful)
        conn.execute("INSERT INTO unum_test_rides VALUES (?)", (len(calls),))
        if len(calls) == 1:
            raise sqlite3.OperationalError("disk I/O error")
        return settled.append

    database.add_rider(rider)
    expires = int(time.time()) + 3600
    try:
        assert store.create("k1", b"v1", workflow="wf", expires_at=expires) == (b"v1", True)
        assert calls == [False, True] and settled == [True]
        assert store.get("k1") == b"v1"
        assert database.read(lambda conn: conn.execute("SELECT n FROM unum_test_rides").fetchall()) == [(2,)]
    finally:
        database.remove_rider(rider)
        store.close()


def test_shared_writes_wait_for_the_writer_lock_files_holder(tmp_path: Path) -> None:
    """`Database.share_writes` (the embedded engine with helper processes): once shared, a
    write takes the lock file next to the database for its transaction, so it waits while
    another process holds it and goes on at once when it lets go; without sharing, nothing
    but SQLite's own lock is taken."""
    import fcntl
    import threading

    store = SQLiteStore.open(tmp_path / "s.db")
    expires = int(time.time()) + 3600
    store.create("before", b"1", workflow="wf", expires_at=expires)
    lock = tmp_path / "s.db-writers"
    assert not lock.exists()
    store.database.share_writes()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(lock)!r}, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("held", flush=True)
        sys.stdin.readline()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        done = threading.Event()
        writer = threading.Thread(target=lambda: (store.create("during", b"2", workflow="wf", expires_at=expires),
                                                  done.set()))
        writer.start()
        assert not done.wait(0.5), "a shared write went on while another process held the lock file"
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert done.wait(10)
        writer.join()
    finally:
        holder.kill()
        holder.wait()
    assert store.get("during") == b"2"
    fd = os.open(lock, os.O_RDWR)
    try:  # free again once the write ended
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    store.close()


def test_add_to_set_many_makes_every_add_in_one_write_and_a_refused_set_fails_alone(tmp_path: Path) -> None:
    """`Store.add_to_set_many` (a batch of fan-in branches' next-level adds): each add as
    `add_to_set` makes it, the states in order; a key that holds a value refuses its adds
    alone; all in one transaction."""
    from unum_entry.stores.base import SetAdd

    store = SQLiteStore.open(tmp_path / "s.db")
    expires = int(time.time()) + 3600
    store.create("a-value", b"v", workflow="wf", expires_at=expires)
    store.add_to_set("s1", 0, "x", size=3, workflow="wf", expires_at=expires)
    commits = []
    store.database.add_rider(lambda conn, careful: commits.append(1))  # type: ignore[arg-type,func-returns-value]
    states = store.add_to_set_many([SetAdd("s1", 1, "y", 3, expires), SetAdd("a-value", 0, "z", 2, expires),
                                    SetAdd("s2", 0, "p", 2, expires), SetAdd("s1", 2, "w", 3, expires),
                                    SetAdd("s1", 1, "other", 3, expires)], workflow="wf")
    assert len(commits) == 1  # one transaction
    first, refused, second, full, again = states
    assert not isinstance(first, Exception) and dict(first.members) == {0: "x", 1: "y"} and not first.full
    assert isinstance(refused, StoreError)
    assert not isinstance(second, Exception) and dict(second.members) == {0: "p"}
    assert not isinstance(full, Exception) and full.full and full.completed_by == 2
    assert not isinstance(again, Exception) and again.members[1] == "y"  # a slot keeps its first member
    assert store.add_to_set("s1", 0, "late", size=3, workflow="wf", expires_at=expires).full
    store.close()
