"""`python -m builder versions` (the versions a store's workflows run, with their running and
retained workflow counts), `python -m builder upgrade WF --to VERSION|FOLDER [--dry-run]` (move
a workflow to another version after a replay check), and `pin`: which copy of a workflow's code
`run`, `redrive` and the callback continuations load (builder.versions; docs/versions.md).

Pinned by default: a workflow runs the version its start record names (its last upgrade's),
whatever its folder holds now. `upgrade` is the one way to move it, guarded by the replay check
(`replay_check`): every invocation the workflow still has pending - a queued delivery or timer
of the embedded engine, a committed wait decision (a Wait, a Retry back-off, a Task waiting for
its token), its failed invocation (for a later redrive) - must exist in the new version as the
same function, and for a compiled state machine the state it stands at must exist in that
function with the same Type; each durable execution not ended must replay against the new
handler with the same operations up to where it stands (`durable_check`:
unum_entry.durable_functions.replay_check); and no durable `invoke` child in flight may have
functions that differ in the new version (`children_check`: a child runs the version it was
started on). A failing check changes nothing and names the first function, state or operation
that diverges (exit 2). `builder.runs.start_record.upgrade_history` reads each workflow's upgrades (the UI shows them).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unum_entry.errors import UnumError

from builder import versions
from builder.commands.console import Console
from builder.commands.options import add_store_option

if TYPE_CHECKING:
    from unum_entry.stores.base import Store

    from builder.runs.start_record import StartRecord


class ReplayCheckFailed(UnumError):
    """`upgrade` to a version the workflow's pending invocations do not exist in."""


# ---- which copy a command loads -------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Pinned:
    """The folder to load a workflow from and the version it is (None: no version recorded:
    a workflow started before versions existed, or a store that keeps none)."""

    folder: str
    version: str | None


def pin(store: Store, recorded: StartRecord | None, folder: str | None, *, source: str | None = None,
        snapshot: bool = True) -> Pinned:
    """What to load for a workflow recorded as `recorded` (None: not started yet) whose folder,
    as given now, is `folder`: the copy of its recorded version; for a new workflow the version
    of `folder`, snapshotted now (unless `snapshot` is False, or the store keeps no versions:
    `folder` itself). A recorded version whose copy is gone is an error naming it, unless
    `folder` is that very version (its copy is made again)."""
    where = versions.directory(store)
    if recorded is not None and recorded.version is not None:
        found = versions.find(where, recorded.version)
        if found is not None:
            return Pinned(str(found.path), found.id)
        if folder is not None and where is not None and Path(folder).is_dir() \
                and versions.content_id(folder) == recorded.version:
            again = versions.snapshot(folder, where, source=source)
            return Pinned(str(again.path), again.id)
        raise versions.UnknownVersion(
            f"workflow runs on version {recorded.version}, whose copy is not in {where} (removed by hand, or the "
            f"workflow was started on another machine); run it again from that machine, or move it with: "
            f"upgrade WORKFLOW_ID --to FOLDER")
    if recorded is not None or folder is None or not snapshot or where is None:
        if folder is None:
            raise UnumError("the store has no record of where this workflow was run from; pass its workflow folder")
        return Pinned(folder, None)
    made = versions.snapshot(folder, where, source=source)
    return Pinned(str(made.path), made.id)


def changed_since(folder: str | None, version: str | None) -> str | None:
    """The version `folder` is now, if it is a folder and not `version` (a note: the folder has
    changed since the workflow started); else None."""
    if folder is None or version is None or not Path(folder).is_dir():
        return None
    now = versions.content_id(folder)
    return now if now != version else None


def shown_trace(where: Path | None, recorded: StartRecord | None, trace: Any) -> Any:
    """A failure record's `Trace` with each frame's file in the version's copy shown as the
    user's own file while that is unchanged (builder.versions.source_path): what `inspect` prints."""
    if recorded is None or recorded.version is None or not isinstance(trace, list) or not Path(recorded.folder).is_dir():
        return trace
    found = versions.find(where, recorded.version)  # (`where`: the store's versions folder)
    if found is None:
        return trace
    return [{**frame, "File": versions.source_path(frame["File"], found.path, recorded.folder)}
            if isinstance(frame, dict) and isinstance(frame.get("File"), str) else frame for frame in trace]


# ---- versions -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Usage:
    """How many workflows with live objects use a version, and how many of them have not ended."""

    running: int = 0
    retained: int = 0


def usage(store: Store) -> dict[str, Usage]:
    """Per version id: the workflows the store retains that run it (start records and upgrades,
    builder.runs.start_record.versions_of), and how many have no outcome yet."""
    from unum_entry.outcome import ENDED

    from builder.runs.start_record import versions_of
    from builder.ui.listing import status_of

    entries = {entry.workflow: entry for entry in store.workflows()}
    found: dict[str, Usage] = {}
    for workflow, version in versions_of(store, list(entries)).items():
        running = status_of(store, entries[workflow]) not in ENDED
        seen = found.get(version, Usage())
        found[version] = Usage(seen.running + int(running), seen.retained + 1)
    return found


def cmd_versions(args: argparse.Namespace) -> int:
    from builder.commands.options import open_existing_store

    store = open_existing_store(args.store)
    try:
        where = versions.directory(store)
        counts = usage(store)
    finally:
        store.close()
    rows = []
    for version in versions.listed(where):
        info = versions.manifest(version)
        used = counts.pop(version.id, Usage())
        rows.append({"version": version.id, "running": used.running, "retained": used.retained,
                     "source": info.get("source"), "created": info.get("created"), "path": str(version.path)})
    for missing, used in sorted(counts.items()):  # recorded by workflows, no copy here (another machine's)
        rows.append({"version": missing, "running": used.running, "retained": used.retained, "source": None,
                     "created": None, "path": None})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from builder.commands.io import utc

    table = [("VERSION", "RUNNING", "RETAINED", "CREATED", "SOURCE")]
    table += [(str(r["version"]), str(r["running"]), str(r["retained"]),
               utc(int(r["created"])) if isinstance(r["created"], int) else "-",
               str(r["source"]) if r["path"] else "(no copy here)") for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    if not rows:
        Console().message(f"no versions in {where} (run makes one per workflow folder content)")
    return 0


def collect(store: Store) -> tuple[int, int]:
    """Remove every local copy no retained workflow of `store` uses (never one in use); returns
    (removed, kept). Staging folders a killed snapshot left behind go too."""
    where = versions.directory(store)
    in_use = usage(store)
    removed = kept = 0
    for version in versions.listed(where):
        if version.id in in_use:
            kept += 1
            continue
        versions.remove(version)
        removed += 1
    versions.remove_staging(where)
    return removed, kept


# ---- upgrade --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Point:
    """Where a workflow stands: a function with work pending, at `state` (a compiled state
    machine's state; None: anywhere in the function), and why it counts (`what`)."""

    function: str
    state: str | None
    what: str


def pending_points(store: Store, workflow_id: str) -> list[Point]:
    """What the workflow still has to run (module docstring), in a stable order."""
    from unum_entry.asl.callbacks import WAIT
    from unum_entry.codec import decode
    from unum_entry.history import split
    from unum_entry.outcome import Ending
    from unum_entry.stores.base import Kind

    points: list[Point] = []
    marker = WAIT.encode()
    failure_key = Ending.of(workflow_id).failure
    for record in store.records(workflow_id):
        if record.value is None:
            continue
        if record.kind is Kind.FAILURE or record.key == failure_key:
            own, _ = split(record.value)
            try:
                failure = decode(own)
            except Exception:  # noqa: BLE001 - not a failure record of ours
                continue
            if isinstance(failure, dict) and isinstance(failure.get("Function"), str):
                points.append(Point(failure["Function"], None, "its failed invocation"))
            continue
        if record.kind is not Kind.CHECKPOINT or marker not in record.value:
            continue
        own, meta = split(record.value)
        try:
            decision = decode(own)
        except Exception:  # noqa: BLE001 - not a decision
            continue
        if not (isinstance(decision, dict) and decision.get("__next__") == WAIT and isinstance(decision.get("wait"), dict)):
            continue
        function = meta.get("f") if isinstance(meta, dict) else None
        wait = decision["wait"]
        if isinstance(function, str) and isinstance(wait.get("state"), str):
            kind = wait.get("timer")
            what = "a Wait timer" if kind == "wait" else "a Retry back-off" if kind == "retry" else "a waiting Task"
            points.append(Point(function, wait["state"], what))
    points += [Point(function, None, "a queued delivery") for function in _queued_functions(store, workflow_id)]
    return sorted(set(points), key=lambda p: (p.function, p.state or "", p.what))


def _queued_functions(store: Store, workflow_id: str) -> list[str]:
    """The functions of the workflow's deliveries and timers in the embedded engine's queue (read only)."""
    from unum_entry.local.runs import queue_path

    path = queue_path(store)
    if path is None or not path.exists():
        return []
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            found: set[str] = set()
            for table in ("unum_queue", "unum_fan_outs"):
                if table in tables:
                    found |= {r[0] for r in conn.execute(f"SELECT DISTINCT function FROM {table} WHERE workflow = ?",
                                                         (workflow_id,))}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise UnumError(f"delivery queue {path}: {exc}") from exc
    return sorted(found)


def _machine_states(function_folder: Path) -> dict[str, Any] | None:
    """A compiled function's states (its unum-asl.json), or None for a plain IR function."""
    path = function_folder / "unum-asl.json"
    if not path.is_file():
        return None
    states = json.loads(path.read_text()).get("states")
    return states if isinstance(states, dict) else {}


def replay_check(points: list[Point], old_folder: str, new_folder: str) -> str | None:
    """None when every point exists in the new version as in the old one, else what diverges
    first (one line)."""
    from unum_entry.workflow import load_workflow

    old, new = load_workflow(old_folder), load_workflow(new_folder)
    for point in points:
        if point.function not in new.functions:
            return (f"function {point.function!r} ({point.what}) does not exist in the new version "
                    f"(its functions: {', '.join(sorted(new.functions))})")
        if point.state is None:
            continue
        new_states = _machine_states(new.functions[point.function].folder) or {}
        was = old.functions.get(point.function)
        old_states = (_machine_states(was.folder) or {}) if was is not None else {}
        if point.state not in new_states:
            return f"state {point.state!r} of function {point.function!r} ({point.what}) does not exist in the new version"
        before, after = old_states.get(point.state, {}).get("Type"), new_states[point.state].get("Type")
        if before is not None and before != after:
            return (f"state {point.state!r} of function {point.function!r} ({point.what}) is a {after} in the new "
                    f"version, a {before} in the old")
    return None


def durable_executions(store: Store, workflow_id: str) -> list[Any]:
    """The workflow's durable executions that have not ended (their retained logs,
    unum_entry.durable_functions.replay_check.Execution): what a durable replay check replays.
    An ended execution runs nothing again, so it is not replayed."""
    from unum_entry.durable_functions.replay_check import executions, has_ended

    return [execution for execution in executions(store, workflow_id) if not has_ended(execution)]


def durable_check(durable: list[Any], new_folder: str) -> str | None:
    """The durable replay check (docs/versions.md): each execution's log replayed against the
    handler of its function in the new version (unum_entry.durable_functions.replay_check);
    None when every one produces the same operations up to where it stands, else the first
    divergence (one line). Loads the new version's handlers; writes nothing."""
    if not durable:
        return None
    import time

    from unum_entry.durable_functions.replay_check import check
    from unum_entry.handlers import load_handler
    from unum_entry.workflow import load_workflow

    new = load_workflow(new_folder)
    for execution in durable:
        spec = new.functions.get(execution.function)
        if spec is None:
            return (f"function {execution.function!r} (a durable execution) does not exist in the new version "
                    f"(its functions: {', '.join(sorted(new.functions))})")
        try:
            handler = load_handler(spec.folder, spec.ir.handler, function=execution.function)
        except UnumError as exc:
            return f"the new version's handler of {execution.function!r} does not load: {exc}"
        sdk_handler = _sdk_handler(handler)
        if sdk_handler is None:
            return (f"function {execution.function!r} ran a durable execution, but its handler in the new version "
                    "is not decorated with @durable_execution")
        diverges = check(sdk_handler, execution, now_ms=int(time.time() * 1000))
        if diverges is not None:
            return diverges
    return None


def _sdk_handler(handler: Any) -> Any:
    """The SDK-decorated handler a loaded handler runs (unum_entry.durable_functions.adapter's
    DurableHandler.sdk_handler), also through the wrappers of a compiled Step Functions Task
    (`__wrapped__`); None when it runs none."""
    for _ in range(8):
        found = getattr(handler, "sdk_handler", None)
        if found is not None or handler is None:
            return found
        handler = getattr(handler, "__wrapped__", None)
    return None


MAX_CHILD_DEPTH = 16  # invoked children of invoked children followed, at most


def children_check(store: Store, workflow_id: str, old_folder: str, new_folder: str) -> str | None:
    """A durable `context.invoke` child runs the version its parent started it on: the
    embedded engine runs one version per process, so moving a parent while a child of it is
    in flight is refused when a function of that child (the invoke's target, the functions it
    has run or has pending, and so on for its own children in flight) is not the same in the
    new version; None when every child in flight runs the same code in both (or there is none)."""
    from unum_entry.durable_functions.replay_check import executions
    from unum_entry.outcome import invoked_children
    from unum_entry.workflow import load_workflow

    old, new = load_workflow(old_folder), load_workflow(new_folder)

    def same(function: str) -> bool:
        was, now = old.functions.get(function), new.functions.get(function)
        return was is not None and now is not None and versions.content_id(was.folder) == versions.content_id(now.folder)

    parents, depth = [workflow_id], 0
    while parents and depth < MAX_CHILD_DEPTH:
        children: list[str] = []
        for parent in parents:
            targets = _invoke_targets(executions(store, parent), parent)
            for child in invoked_children(store, parent):
                functions = {targets.get(child, "")} - {""}
                functions |= {point.function for point in pending_points(store, child)}
                functions |= {execution.function for execution in executions(store, child)}
                for function in sorted(functions):
                    if not same(function):
                        return (f"its invoked child {child} (function {function!r}) is still running on version "
                                f"{versions.content_id(old_folder)}, and {function!r} is not the same in the new "
                                "version: a child runs the version it was started on; upgrade after it ends")
                children.append(child)
        parents, depth = children, depth + 1
    return None


def _invoke_targets(executions: list[Any], workflow_id: str) -> dict[str, str]:
    """Per invoked child workflow of `workflow_id`: the function its invoke targets (from the
    parent's durable logs)."""
    from unum_entry import naming

    found: dict[str, str] = {}
    for execution in executions:
        for op_id, target in execution.state.invokes.items():
            found[naming.invoked_workflow(workflow_id, op_id)] = str(target.get("function") or "")
    return found


def cmd_upgrade(args: argparse.Namespace) -> int:
    from unum_entry.outcome import ENDED, WorkflowStatus, read_outcome

    from builder.runs import start_record
    from builder.runs.folders import runnable_workflow
    from builder.commands.options import open_existing_store

    console = Console()
    store = open_existing_store(args.store)
    try:
        recorded = start_record.read(store, args.workflow_id)
        if recorded is None:
            raise UnumError(f"upgrade: no workflow {args.workflow_id!r} in store {args.store} (mistyped, another "
                            "--store, or expired)")
        if recorded.version is None:
            raise UnumError(f"upgrade: workflow {args.workflow_id} records no version (started before versions "
                            "existed): it runs from its folder")
        where = versions.directory(store)
        target = _target(args.to, where, runnable_workflow)
        old = pin(store, recorded, None)
        if target.id == recorded.version:
            console.message(f"workflow {args.workflow_id} runs version {target.id} already; nothing to do")
            return 0
        status = read_outcome(store, args.workflow_id).status
        if status in ENDED and status is not WorkflowStatus.FAILED:  # a failed one moves for its redrive
            raise UnumError(f"upgrade: workflow {args.workflow_id} has ended ({status}): nothing of it runs any more")
        points = pending_points(store, args.workflow_id)
        diverges = replay_check(points, old.folder, str(target.path))
        durable = durable_executions(store, args.workflow_id)
        if diverges is None:
            diverges = durable_check(durable, str(target.path))
        if diverges is None:
            diverges = children_check(store, args.workflow_id, old.folder, str(target.path))
        if diverges is not None:
            raise ReplayCheckFailed(f"upgrade of workflow {args.workflow_id} to {target.id} refused, nothing changed: "
                                    f"{diverges}")
        where_now = ", ".join(f"{p.function}" + (f"/{p.state}" if p.state else "") for p in points) or "nothing pending"
        if durable:
            where_now += f"; {len(durable)} durable execution(s) replayed"
        if args.dry_run:
            print(f"would upgrade workflow {args.workflow_id} from {recorded.version} to {target.id} "
                  f"(replay check passed: {where_now})")
            return 0
        start_record.record_upgrade(store, args.workflow_id, recorded, target.id)
    finally:
        store.close()
    print(f"upgraded workflow {args.workflow_id} from {recorded.version} to {target.id} "
          f"(replay check passed: {where_now})")
    return 0


def _target(to: str, where: Path | None, runnable: Any) -> versions.Version:
    """`--to`: a version id with a copy here, or a workflow folder / state machine (snapshotted now)."""
    if where is None:
        raise UnumError("upgrade: this store keeps no versions (a memory store)")
    if versions.VERSION_PATTERN.match(to):
        return versions.require(where, to)
    if Path(to).exists():
        return versions.snapshot(runnable(to), where, source=str(Path(to).resolve()))
    raise versions.UnknownVersion(f"--to {to!r}: neither a version id (v + 16 hex digits) nor a workflow folder")


def register(sub: argparse._SubParsersAction) -> None:
    listing = sub.add_parser("versions", help="list the workflow versions kept beside a store, with their running "
                                              "and retained workflow counts")
    add_store_option(listing)
    listing.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    listing.set_defaults(func=cmd_versions)

    upgrade = sub.add_parser("upgrade", help="move a running workflow to another version, after a replay check")
    upgrade.add_argument("workflow_id", help="the workflow id (printed by run)")
    upgrade.add_argument("--to", required=True, metavar="VERSION|FOLDER",
                         help="the version id (see `versions`), or a workflow folder / state machine (its version "
                              "is made now)")
    upgrade.add_argument("--dry-run", action="store_true", help="only run the replay check and say what would change")
    add_store_option(upgrade)
    upgrade.set_defaults(func=cmd_upgrade)
