"""unum's embedded platform next to DBOS Transact on SQLite: two workflows, same disk, same Python.

    python bench/dbos_compare.py [--rounds 5] [--quick] [--unum-rev REV]   # writes bench/dbos-report.txt

Needs the `bench` extra (DBOS Transact): pip install -c constraints.txt -e '.[bench]'

Workflows (each returns a number both sides must agree on):
  chain    100 steps in sequence, each returns its input + 1 (result 100).
  fan-out  512 parallel branches, each returns 2 * i, then one sum (result 512 * 511).

Systems:
  unum  the workflow folder written with `write_workflow` + `FunctionSource` (as bench/run.py does),
        run by `local_platform` (8 workers) over the SQLite store (`run`'s default) in a fresh temp
        dir, with `run`'s durable delivery queue journaled in the same database, with durability
        full (synchronous=FULL, WAL, group commit: durable across power loss) and off
        (synchronous=OFF); and over the file store (no fsync, in-memory queue) for reference.
  DBOS  @DBOS.workflow / @DBOS.step over a fresh SQLite system database in a temp dir, with
        SQLite's default synchronous setting (FULL, rollback journal: durable) and with PRAGMA
        synchronous=OFF. Like for like: unum full against DBOS default (both durable), unum off
        against DBOS synchronous=OFF (both relaxed); the ratios pair them so. The fan-out runs
        two ways: a queue with default settings (queue.enqueue of a child workflow per branch, as
        the DBOS queue tutorial does) and DBOS.start_workflow per branch.

Every measurement runs in a fresh subprocess with a fresh store or database. Rounds alternate
(unum, then DBOS, per workflow), and the report gives medians over rounds of
  workflow s  the workflow call alone, measured inside the subprocess after imports and setup;
  process s   the whole subprocess as the parent sees it (interpreter start, imports, setup,
              workflow, shutdown),
and the ratio DBOS / unum of each (against unum on SQLite with the same durability; the file store
row has no pair). Nothing asserts on time. See bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import io
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = Path(__file__).resolve().parent / "dbos-report.txt"
INSTALL_HINT = "pip install -c constraints.txt -e '.[bench]'"
CHILD_TIMEOUT = 900.0  # seconds a single measurement subprocess may take

INC = "def handler(event, context):\n    return event + 1\n"
SPLIT = "def handler(event, context):\n    return {'items': list(range(event['m']))}\n"
DOUBLE = "def handler(event, context):\n    return event * 2\n"
SUM = "def handler(event, context):\n    return sum(event)\n"


# ---- what to measure -----------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """One system running one workflow in one configuration: a row of the report."""

    system: str              # "unum" | "dbos"
    workflow: str            # "chain" | "fanout"
    size: int                # chain steps or fan-out width
    variant: str             # unum: "sqlite" | "file"; DBOS chain: "steps"; DBOS fan-out: "queue" | "start_workflow"
    synchronous: str = ""    # DBOS: "default" | "off"; unum on SQLite: "full" | "off" (its durability)
    workers: int = 8         # unum only: the local platform's worker threads

    @property
    def expected(self) -> int:
        """The workflow's result: 0 + 1 per chain step; the sum of 2 * i over the branches."""
        return self.size if self.workflow == "chain" else self.size * (self.size - 1)

    @property
    def durable(self) -> bool | None:
        """Whether a returned commit survives power loss (None: the file store, no pair)."""
        if self.system == "unum" and self.variant == "file":
            return None
        return self.synchronous in ("full", "default")

    @property
    def label(self) -> str:
        if self.system == "unum":
            if self.variant == "sqlite":
                return f"unum, SQLite {self.synchronous}, {self.workers} workers"
            return f"unum, FileStore (no fsync), {self.workers} workers"
        how = {"steps": "steps", "queue": "queue (defaults)", "start_workflow": "start_workflow"}[self.variant]
        sync = "sync=OFF" if self.synchronous == "off" else "sync default"
        return f"DBOS, {how}, {sync}"


@dataclass(frozen=True)
class Settings:
    """Workflow sizes and rounds; `--quick` shrinks both."""

    quick: bool
    rounds: int
    chain_steps: int
    fanout_width: int
    workers: int


def settings_for(quick: bool, rounds: int | None, workers: int) -> Settings:
    """Full: a 100-step chain and a 512-way fan-out, 5 rounds. Quick: 20 and 64, 2 rounds."""
    if quick:
        return Settings(True, rounds or 2, 20, 64, workers)
    return Settings(False, rounds or 5, 100, 512, workers)


def cases_for(settings: Settings) -> dict[str, list[Case]]:
    """The cases of each workflow: unum's first, then DBOS's (the order each round runs them)."""
    by_workflow: dict[str, list[Case]] = {}
    for workflow, size, dbos_variants in (("chain", settings.chain_steps, ("steps",)),
                                          ("fanout", settings.fanout_width, ("queue", "start_workflow"))):
        cases = [Case("unum", workflow, size, "sqlite", synchronous=sync, workers=settings.workers)
                 for sync in ("full", "off")]
        cases.append(Case("unum", workflow, size, "file", workers=settings.workers))
        cases += [Case("dbos", workflow, size, variant, synchronous=sync)
                  for variant in dbos_variants for sync in ("default", "off")]
        by_workflow[workflow] = cases
    return by_workflow


@dataclass
class Measurement:
    """What one subprocess reports about its single run (written as JSON to a result file)."""

    ok: bool
    result: Any = None
    error: str = ""
    setup_s: float = 0.0       # subprocess start of main code -> workflow call (imports, store/DB, launch)
    workflow_s: float = 0.0    # the workflow call alone
    teardown_s: float = 0.0    # platform close / DBOS.destroy
    persisted: dict[str, int] = field(default_factory=dict)  # what the run left: files or rows
    disk_bytes: int = 0        # bytes allocated on disk to the store's files / the SQLite file
    sqlite: dict[str, Any] = field(default_factory=dict)     # DBOS: PRAGMA values of its connections


@dataclass(frozen=True)
class Sample:
    """A measurement as the parent saw it, with the whole-process wall time."""

    case: Case
    round: int
    process_s: float
    measurement: Measurement
    load: float = 0.0  # the machine's 1-minute load average when the subprocess started


# ---- the child: unum -----------------------------------------------------------------------

def unum_functions(case: Case) -> tuple[str, dict[str, Any], Any]:
    """(entry, FunctionSource per function, input) of the case's workflow, as bench/run.py
    builds its chain and map_aggregate patterns."""
    from unum_entry.workflow import FunctionSource

    if case.workflow == "chain":
        n = case.size
        functions = {f"F{i}": FunctionSource(INC, [{"op": "invoke", "function": f"F{i + 1}"}]) for i in range(n - 1)}
        functions[f"F{n - 1}"] = FunctionSource(INC)
        return "F0", functions, 0
    functions = {
        "Split": FunctionSource(SPLIT, [{"op": "create_set", "function": "Sum"},
                                        {"op": "map", "function": "Work", "items": "$.items"}]),
        "Work": FunctionSource(DOUBLE, [{"op": "fan_in", "function": "Sum"}]),
        "Sum": FunctionSource(SUM),
    }
    return "Split", functions, {"m": case.size}


def allocated(path: Path) -> int:
    """Bytes the filesystem allocated to a file (blocks, not content length)."""
    return path.stat().st_blocks * 512


def files_by_folder(root: Path) -> tuple[dict[str, int], int]:
    """Regular files under each top-level folder of `root`, and the bytes allocated to them."""
    counts: dict[str, int] = {}
    total = 0
    for path in root.rglob("*"):
        if path.is_file():
            top = path.relative_to(root).parts[0]
            counts[f"{top}/ files"] = counts.get(f"{top}/ files", 0) + 1
            total += allocated(path)
    return counts, total


def run_unum(case: Case, tmp: Path, started: float) -> Measurement:
    """Write the workflow folder, open the store (SQLite with the case's durability, or a
    FileStore) and the local platform, time `platform.run`."""
    from unum_entry.local.platform import local_platform
    from unum_entry.stores.base import Store
    from unum_entry.stores.file import FileStore
    from unum_entry.stores.sqlite import SQLiteStore
    from unum_entry.workflow import write_workflow

    entry, functions, input_value = unum_functions(case)
    workflow = write_workflow(tmp / "workflow", name=case.workflow, entry=entry, functions=functions)
    store: Store
    if case.variant == "sqlite":
        store = SQLiteStore.open(tmp / "store" / "unum.db", durability=case.synchronous)
    else:
        store = FileStore(tmp / "store")
    queue: Any = None
    if isinstance(store, SQLiteStore):  # as `run` does: the durable delivery queue in the store's database
        from unum_entry.local.queue import SQLiteQueue
        queue = SQLiteQueue(store.database)
    with local_platform(workflow, store, workers=case.workers, **({"queue": queue} if queue else {})) as plat:
        setup_s = time.perf_counter() - started
        t0 = time.perf_counter()
        outcome = plat.run(input_value, timeout=CHILD_TIMEOUT - 60)
        workflow_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        stats = dict(plat.stats)
    if isinstance(store, SQLiteStore):
        rows = store.database.read(lambda conn: conn.execute("SELECT count(*) FROM unum_records").fetchone()[0])
        level = store.database.read(lambda conn: conn.execute("PRAGMA synchronous").fetchone()[0])
        mode = store.database.read(lambda conn: conn.execute("PRAGMA journal_mode").fetchone()[0])
        sqlite_settings = {"synchronous": f"{ {0: 'OFF', 1: 'NORMAL', 2: 'FULL'}.get(level, level)} ({level})",
                           "journal_mode": mode, "connections": "1 writer + 1 reader per thread"}
        store.close()
    teardown_s = time.perf_counter() - t1
    results = list(getattr(outcome, "results", []) or [])
    failure = getattr(outcome, "failure", None)
    persisted, disk = files_by_folder(tmp / "store")
    extra: dict[str, Any] = {}
    if case.variant == "sqlite":
        persisted["unum_records rows"] = rows
        extra = sqlite_settings
    names = {"deliveries": "platform deliveries", "committed": "transitions committed"}
    persisted.update({names[k]: v for k, v in stats.items() if k in names})
    if failure is not None or results != [case.expected]:
        return Measurement(False, results, f"unum: results {results!r}, failure {failure!r}",
                           setup_s, workflow_s, teardown_s, persisted, disk, extra)
    return Measurement(True, results[0], "", setup_s, workflow_s, teardown_s, persisted, disk, extra)


# ---- the child: DBOS -----------------------------------------------------------------------

def watch_sqlite_connections(synchronous_off: bool, seen: dict[str, Any]) -> None:
    """On every new SQLite connection any SQLAlchemy engine opens: set synchronous=OFF if asked,
    and record the connection's synchronous and journal_mode (DBOS's own engine setup is left as is)."""
    import sqlalchemy as sa

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        if not isinstance(dbapi_conn, sqlite3.Connection):
            return
        if synchronous_off:
            dbapi_conn.execute("PRAGMA synchronous=OFF")
        names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
        level = dbapi_conn.execute("PRAGMA synchronous").fetchone()[0]
        seen["synchronous"] = f"{names.get(level, level)} ({level})"
        seen["journal_mode"] = dbapi_conn.execute("PRAGMA journal_mode").fetchone()[0]
        seen["connections"] = seen.get("connections", 0) + 1

    sa.event.listen(sa.Engine, "connect", on_connect)


def define_dbos_workflows(queue_name: str) -> dict[str, Any]:
    """The two workflows, written as a DBOS user would: steps for the work, the workflow's
    body for the control flow. The fan-out's branches are child workflows (one step each)."""
    from dbos import DBOS

    @DBOS.step()
    def increment(x: int) -> int:
        return x + 1

    @DBOS.workflow()
    def chain(steps: int, x: int) -> int:
        for _ in range(steps):
            x = increment(x)
        return x

    @DBOS.step()
    def double(i: int) -> int:
        return i * 2

    @DBOS.workflow()
    def branch(i: int) -> int:
        return double(i)

    @DBOS.workflow()
    def fanout_queue(width: int) -> int:
        queue = DBOS.retrieve_queue(queue_name)
        handles = [queue.enqueue(branch, i) for i in range(width)]
        return sum(handle.get_result() for handle in handles)

    @DBOS.workflow()
    def fanout_start_workflow(width: int) -> int:
        handles = [DBOS.start_workflow(branch, i) for i in range(width)]
        return sum(handle.get_result() for handle in handles)

    return {"steps": chain, "queue": fanout_queue, "start_workflow": fanout_start_workflow}


def sqlite_rows(db: Path) -> dict[str, int]:
    """Rows per non-empty table of the DBOS system database (read after DBOS shut down)."""
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        counts = {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    conn.close()
    return {f"{t} rows": n for t, n in counts.items() if n}


def run_dbos(case: Case, tmp: Path, started: float) -> Measurement:
    """Configure DBOS on a fresh SQLite file, launch it, time the workflow call."""
    seen: dict[str, Any] = {}
    watch_sqlite_connections(case.synchronous == "off", seen)
    from dbos import DBOS

    workflows = define_dbos_workflows("fanout")
    db = tmp / "dbos.sqlite"
    DBOS(config={"name": "dbos-compare", "system_database_url": f"sqlite:///{db}", "log_level": "WARNING"})
    DBOS.launch()
    try:
        if case.variant == "queue":
            DBOS.register_queue("fanout")
        setup_s = time.perf_counter() - started
        t0 = time.perf_counter()
        if case.workflow == "chain":
            result = workflows["steps"](case.size, 0)
        else:
            result = workflows[case.variant](case.size)
        workflow_s = time.perf_counter() - t0
    finally:
        t1 = time.perf_counter()
        DBOS.destroy()
    teardown_s = time.perf_counter() - t1
    disk = sum(allocated(p) for p in tmp.iterdir() if p.is_file() and p.name.startswith("dbos.sqlite"))
    ok = result == case.expected
    return Measurement(ok, result, "" if ok else f"dbos: result {result!r}, expected {case.expected}",
                       setup_s, workflow_s, teardown_s, sqlite_rows(db), disk, dict(seen))


def child_main(case_json: str, result_file: Path, unum_src: Path) -> int:
    """Run one case in this (fresh) process inside a fresh temp dir; write a Measurement."""
    started = time.perf_counter()
    case = Case(**json.loads(case_json))
    if case.system == "unum":
        sys.path.insert(0, str(unum_src))
    tmp = Path(tempfile.mkdtemp(prefix=f"dbos-compare-{case.system}-"))
    os.chdir(tmp)
    try:
        runner = run_unum if case.system == "unum" else run_dbos
        measurement = runner(case, tmp, started)
    except Exception as exc:  # reported by the parent, not raised: the other cases still run
        measurement = Measurement(False, error=f"{case.system}: {type(exc).__name__}: {exc}")
    finally:
        os.chdir(REPO)
        shutil.rmtree(tmp, ignore_errors=True)
    result_file.write_text(json.dumps(asdict(measurement)))
    return 0 if measurement.ok else 1


# ---- the parent: rounds of subprocesses ------------------------------------------------------

def last_line(text: str) -> str:
    """The last non-empty line of a subprocess's output (its error, usually)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def load_average() -> float:
    """The 1-minute load average (0.0 where the platform has none): other work on the machine
    shows up in every figure here, so the report records it."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def run_case(case: Case, round_no: int, unum_src: Path) -> Sample:
    """Run `case` in a fresh subprocess; time the whole process from here."""
    with tempfile.TemporaryDirectory(prefix="dbos-compare-result-") as scratch:
        result_file = Path(scratch) / "result.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(asdict(case)),
               "--result-file", str(result_file), "--unum-src", str(unum_src)]
        load = load_average()
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT, cwd=REPO)
        except subprocess.TimeoutExpired:
            return Sample(case, round_no, CHILD_TIMEOUT, Measurement(False, error=f"timed out after {CHILD_TIMEOUT:.0f} s"), load)
        process_s = time.perf_counter() - t0
        if result_file.exists():
            measurement = Measurement(**json.loads(result_file.read_text()))
            if not measurement.ok and proc.stderr.strip():
                measurement.error += f" [stderr: {last_line(proc.stderr)}]"
        else:
            measurement = Measurement(False, error=f"exit {proc.returncode}: {last_line(proc.stderr or proc.stdout)}")
    return Sample(case, round_no, process_s, measurement, load)


def run_rounds(settings: Settings, unum_src: Path, log: Any = sys.stderr) -> list[Sample]:
    """`rounds` rounds; in each, per workflow, unum's case then each DBOS case."""
    samples: list[Sample] = []
    for round_no in range(1, settings.rounds + 1):
        for cases in cases_for(settings).values():
            for case in cases:
                sample = run_case(case, round_no, unum_src)
                samples.append(sample)
                m = sample.measurement
                status = f"{m.workflow_s:8.3f} s workflow" if m.ok else f"FAILED: {m.error}"
                print(f"round {round_no}/{settings.rounds}  {case.workflow:<7} {case.label:<38} "
                      f"{status}  ({sample.process_s:.2f} s process, load {sample.load:.1f})", file=log, flush=True)
    return samples


# ---- provenance -----------------------------------------------------------------------------

def git(*args: str) -> str:
    """Output of a git command in the repository ('' if git fails)."""
    proc = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def export_unum(rev: str, dest: Path) -> str:
    """Extract unum_entry/ of commit `rev` into dest (git archive); returns the full commit id."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    if not commit:
        raise SystemExit(f"dbos_compare: unknown git revision {rev!r}")
    data = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit, "unum_entry"],
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)
    return commit


def unum_provenance(rev: str | None, commit: str) -> str:
    """Which unum ran: a commit's export, or the working tree (and whether it had local edits)."""
    if rev is not None:
        return f"unum_entry/ exported from commit {commit} (--unum-rev {rev})"
    dirty = [line for line in git("status", "--porcelain", "--", "unum_entry").splitlines() if line.strip()]
    state = f"with {len(dirty)} uncommitted changes under unum_entry/" if dirty else "clean under unum_entry/"
    return f"working tree at commit {commit or 'unknown'}, {state}"


def versions() -> dict[str, str]:
    """Versions of what ran (read from installed metadata, nothing imported)."""
    out = {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version}
    for dist in ("dbos", "SQLAlchemy"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def filesystem_of(path: Path) -> str:
    """'fstype on device' of the filesystem holding `path` (Linux /proc/mounts; '' elsewhere)."""
    try:
        mounts = [line.split()[:3] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return ""
    resolved = str(path.resolve())
    best = max((m for m in mounts if resolved == m[1] or resolved.startswith(m[1].rstrip("/") + "/")),
               key=lambda m: len(m[1]), default=None)
    return f"{best[2]} on {best[0]}" if best else ""


# ---- the report -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """Medians over the successful rounds of one case."""

    case: Case
    workflow_s: list[float]
    process_s: list[float]
    failures: list[str]
    last: Measurement | None

    @property
    def workflow_median(self) -> float | None:
        return statistics.median(self.workflow_s) if self.workflow_s else None

    @property
    def process_median(self) -> float | None:
        return statistics.median(self.process_s) if self.process_s else None


def summarise(samples: Sequence[Sample], case: Case) -> Row:
    """Collect one case's samples."""
    mine = [s for s in samples if s.case == case]
    good = [s for s in mine if s.measurement.ok]
    return Row(case, [s.measurement.workflow_s for s in good], [s.process_s for s in good],
               [f"round {s.round}: {s.measurement.error}" for s in mine if not s.measurement.ok],
               good[-1].measurement if good else None)


def fmt_s(values: list[float]) -> str:
    """'median (min-max)' in seconds, or 'failed'."""
    if not values:
        return "failed"
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.1f}x" if a is not None and b else "-"


def table(settings: Settings, samples: Sequence[Sample]) -> list[str]:
    """Medians per case and DBOS / unum ratios, one block per workflow."""
    titles = {"chain": f"chain ({settings.chain_steps} steps)",
              "fanout": f"fan-out ({settings.fanout_width} branches + sum)"}
    header = f"{'system / setting':<40}{'workflow s: median (min-max)':>30}{'process s: median (min-max)':>30}{'DBOS/unum wf':>14}{'proc':>8}"
    lines = [header, "-" * len(header)]
    for workflow, cases in cases_for(settings).items():
        rows = [summarise(samples, c) for c in cases]
        # Like for like: a DBOS row is divided by unum on SQLite with the same durability.
        unum = {row.case.durable: row for row in rows if row.case.system == "unum" and row.case.durable is not None}
        lines.append(titles[workflow])
        for row in rows:
            pair = unum.get(row.case.durable) if row.case.system == "dbos" else None
            lines.append(f"  {row.case.label:<38}{fmt_s(row.workflow_s):>30}{fmt_s(row.process_s):>30}"
                         f"{ratio(row.workflow_median, pair.workflow_median) if pair else '':>14}"
                         f"{ratio(row.process_median, pair.process_median) if pair else '':>8}")
        lines.append("")
    return lines


def persistence_lines(settings: Settings, samples: Sequence[Sample]) -> list[str]:
    """What each case's last successful run left on disk, and DBOS's SQLite settings."""
    lines = ["What one run left on disk (last successful round; unum: files per store folder (and rows of its "
             "SQLite store), DBOS: rows per table of its SQLite file):"]
    for cases in cases_for(settings).values():
        for case in cases:
            row = summarise(samples, case)
            if row.last is None:
                continue
            kept = ", ".join(f"{k} {v}" for k, v in sorted(row.last.persisted.items())) or "nothing"
            lines.append(f"  {case.workflow:<7} {case.label:<38} {row.last.disk_bytes / 1024:>8.0f} KiB allocated: {kept}")
            if row.last.sqlite:
                s = row.last.sqlite
                lines.append(f"  {'':<7} {'':<38} SQLite: synchronous={s.get('synchronous')}, "
                             f"journal_mode={s.get('journal_mode')}, connections opened={s.get('connections')}")
    return lines


def setup_lines(settings: Settings, samples: Sequence[Sample]) -> list[str]:
    """Median setup and teardown inside the subprocess, per case (what process s adds)."""
    lines = ["Inside the subprocess, median seconds: setup (imports, store/DB, launch) | teardown:"]
    for cases in cases_for(settings).values():
        for case in cases:
            good = [s.measurement for s in samples if s.case == case and s.measurement.ok]
            if good:
                lines.append(f"  {case.workflow:<7} {case.label:<38} {statistics.median(m.setup_s for m in good):7.3f} | "
                             f"{statistics.median(m.teardown_s for m in good):.3f}")
    return lines


def failure_lines(settings: Settings, samples: Sequence[Sample]) -> list[str]:
    """Every failed measurement, one line each."""
    failures = [f"  {case.workflow} / {case.label}: {f}"
                for cases in cases_for(settings).values() for case in cases
                for f in summarise(samples, case).failures]
    return ["FAILED measurements (left out of the medians):", *failures, ""] if failures else []


def raw_lines(samples: Sequence[Sample]) -> list[str]:
    """Every sample, in the order it ran."""
    lines = ["Every run, in order (workflow s / process s, 1-minute load average at its start):"]
    for s in samples:
        m = s.measurement
        what = f"{m.workflow_s:.3f} / {s.process_s:.3f}" if m.ok else f"FAILED / {s.process_s:.3f}"
        lines.append(f"  round {s.round}  {s.case.workflow:<7} {s.case.label:<38} {what}  (load {s.load:.1f})")
    return lines


def load_summary(samples: Sequence[Sample]) -> str:
    """'median (min-max)' of the load averages the samples started under."""
    loads = [s.load for s in samples]
    if not loads:
        return "-"
    return f"{statistics.median(loads):.1f} ({min(loads):.1f}-{max(loads):.1f}) on {os.cpu_count()} CPUs"


def render(settings: Settings, samples: Sequence[Sample], unum_line: str, elapsed: float) -> str:
    """The report text."""
    v = versions()
    tmp_fs = filesystem_of(Path(tempfile.gettempdir()))
    lines = [
        f"unum embedded platform vs DBOS Transact on SQLite ({'quick' if settings.quick else 'full'}) - "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M UTC}",
        f"Python {v['python']} on {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs; "
        f"temp dirs in {tempfile.gettempdir()} ({tmp_fs or 'filesystem unknown'}) for both systems",
        f"unum: {unum_line}",
        f"DBOS Transact {v['dbos']}, SQLAlchemy {v['SQLAlchemy']}, SQLite {v['sqlite']}",
        f"1-minute load average at the start of each run: median {load_summary(samples)}",
        f"{settings.rounds} rounds; each measurement in a fresh subprocess with a fresh store/database; "
        "per round and workflow: unum first, then each DBOS setting.",
        "workflow s = the workflow call alone (inside the subprocess, after setup); process s = the whole "
        "subprocess; ratios are DBOS median / unum median with the same durability (>1: DBOS slower): "
        "DBOS default (FULL) / unum SQLite full, DBOS sync=OFF / unum SQLite off.",
        "",
        *table(settings, samples),
        *failure_lines(settings, samples),
        *persistence_lines(settings, samples),
        "",
        *setup_lines(settings, samples),
        "",
        *raw_lines(samples),
        "",
        f"(comparison took {elapsed:.0f} s)",
    ]
    return "\n".join(lines) + "\n"


# ---- entry point ----------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="unum's embedded platform vs DBOS Transact on SQLite (see bench/README.md)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per case (default 5; 2 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a 20-step chain and a 64-way fan-out")
    parser.add_argument("--workers", type=int, default=8, help="unum local platform workers (default 8)")
    parser.add_argument("--unum-rev", default=None, metavar="REV",
                        help="run unum_entry/ of this git commit (exported to a temp dir) instead of the working tree")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="report path (default bench/dbos-report.txt)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--unum-src", type=Path, default=REPO, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        return child_main(args.child, args.result_file, args.unum_src)
    if importlib.util.find_spec("dbos") is None:
        print(f"dbos_compare: DBOS Transact is not installed; install the bench extra: {INSTALL_HINT}", file=sys.stderr)
        return 2
    settings = settings_for(args.quick, args.rounds, args.workers)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dbos-compare-unum-") as export_dir:
        if args.unum_rev is not None:
            commit = export_unum(args.unum_rev, Path(export_dir))
            unum_src = Path(export_dir)
        else:
            commit, unum_src = git("rev-parse", "HEAD"), REPO
        unum_line = unum_provenance(args.unum_rev, commit)
        print(f"unum: {unum_line}", file=sys.stderr)
        samples = run_rounds(settings, unum_src)
        if args.unum_rev is None and git("rev-parse", "HEAD") != commit:
            unum_line += f"; HEAD moved to {git('rev-parse', 'HEAD')} during the run"
    report = render(settings, samples, unum_line, time.perf_counter() - started)
    args.out.write_text(report)
    print(report, end="")
    return 0 if all(s.measurement.ok for s in samples) else 1


if __name__ == "__main__":
    sys.exit(main())
