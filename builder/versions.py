"""Versions of a workflow: the content hash of its build, and a content-addressed copy of it.

A version is what a workflow runs: every file of its workflow folder (each function's code and
`unum-ir.json`, `unum-workflow.json`, a compiled state machine's `unum-asl.json`, data files)
plus the runtime's version (the installed `unum` package). Its id is `v` + 16 hex digits of a
SHA-256 over the files' relative paths and bytes and that runtime version: the same folder gives
the same id on every machine; any changed byte gives another. Hidden files and folders (`.git`,
`.venv`, a `.unum` store inside the folder), `__pycache__` and `*.pyc` are not part of it
(Python writes them as it runs; they are not the build).

`snapshot(folder, versions_dir)` hashes the folder once and, unless `versions_dir/<id>/` exists
already, copies the files into a staging folder beside it and renames it into place (atomic: a
reader sees a whole version or none; two processes snapshotting the same folder at once both end
with the one copy). What a copy holds is what was hashed: a file changed between hashing and
copying gives the copy the id of what it holds. `.unum-version.json` inside the copy says where
it came from and when (not part of the version).

The copy holds the workflow's files only: the runtime a resumed workflow runs with is the one
installed now (its version is part of the id so that a run after an upgrade of unum starts a new
version; docs/versions.md).

Where the copies live is the store's business (`directory`): beside a SQLite database file
(`.unum/unum.db` -> `.unum/versions`, `DIR/NAME.db` -> `DIR/NAME.versions`), beside a file
store's folder (`DIR/FOLDER.versions`), and for a store reached over the network (DynamoDB, Firestore) in
`.unum/versions-<digest of its location>` in the current directory, as its delivery queue is
(unum_entry.local.runs.queue_path): one folder per store, so `gc` of one store never removes a
version another store's workflows use.

This module knows files only; which workflows use a version is read from the store's start
records by the commands (builder.runs.start_record, builder.commands.versions). It is meant
to serve any engine that pins work to a build (`serve` pins Step Functions executions to a
compiled folder the same way).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from unum_entry.errors import UnumError

if TYPE_CHECKING:
    from unum_entry.stores.base import Store

VERSION_PATTERN = re.compile(r"^v[0-9a-f]{16}$")
MANIFEST = ".unum-version.json"  # inside a copy: where it came from (hidden: not part of the version)
STAGING_PREFIX = ".staging-"
DEFAULT_DATABASE_STEM = "unum"  # `.unum/unum.db` keeps its versions in `.unum/versions`
REMOTE_FOLDER = ".unum"  # (as unum_entry.local.runs.REMOTE_QUEUE_FOLDER)
_CHUNK = 1 << 20


class UnknownVersion(UnumError):
    """A version id that is malformed, or has no copy in the store's versions folder."""


@dataclass(frozen=True, slots=True)
class Version:
    """A workflow version: its id and the folder holding its copy (load it with load_workflow)."""

    id: str
    path: Path


def runtime_version() -> str:
    """The installed unum package's version (part of every version id)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("unum")
    except PackageNotFoundError:
        return "unknown"


def _files(folder: Path) -> Iterator[tuple[str, Path]]:
    """(posix relative path, path) of every file that is part of the version, sorted."""
    found: list[tuple[str, Path]] = []
    for root, dirs, names in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        base = Path(root)
        for name in names:
            if name.startswith(".") or name.endswith(".pyc"):
                continue
            path = base / name
            if path.is_file():
                found.append((path.relative_to(folder).as_posix(), path))
    yield from sorted(found)


def _file_digest(path: Path, copy_to: Path | None) -> bytes:
    """SHA-256 of the file's bytes, copied to `copy_to` as they are read (when given)."""
    h = hashlib.sha256()
    with open(path, "rb") as source:
        target = open(copy_to, "wb") if copy_to is not None else None
        try:
            while chunk := source.read(_CHUNK):
                h.update(chunk)
                if target is not None:
                    target.write(chunk)
        finally:
            if target is not None:
                target.close()
    return h.digest()


def _walk(folder: Path, copy_to: Path | None = None) -> tuple[str, int]:
    """The version id of `folder` and its file count, copying each file under `copy_to` as it
    is read (so the id is that of what the copy holds). The id hashes the runtime version, then
    each file's relative path and the SHA-256 of its bytes."""
    h = hashlib.sha256(b"unum-version\x001\x00" + runtime_version().encode() + b"\x00")
    count = 0
    for relative, path in _files(folder):
        target = None
        if copy_to is not None:
            target = copy_to / relative
            target.parent.mkdir(parents=True, exist_ok=True)
        h.update(relative.encode() + b"\x00" + _file_digest(path, target))
        count += 1
    return "v" + h.hexdigest()[:16], count


def content_id(folder: str | Path) -> str:
    """The version id of the workflow folder `folder` (module docstring). Reads every file once."""
    path = Path(folder)
    if not path.is_dir():
        raise UnumError(f"{folder}: not a folder")
    return _walk(path)[0]


def snapshot(folder: str | Path, versions_dir: str | Path, *, source: str | None = None) -> Version:
    """The version of `folder`, its copy kept in `versions_dir/<id>/` (written now unless it
    exists: module docstring). `source`: what to record as its origin (default `folder`)."""
    folder, versions_dir = Path(folder), Path(versions_dir)
    version_id = content_id(folder)
    final = versions_dir / version_id
    if final.is_dir():
        return Version(version_id, final)
    try:
        return _copy(folder, versions_dir, version_id, source)
    except OSError as exc:  # a full disk, a read-only store folder: one line naming where
        import errno

        reason = {errno.EROFS: "the file system is read-only", errno.ENOSPC: "the disk is full"}.get(
            exc.errno or 0, exc.strerror or str(exc))
        raise UnumError(f"{versions_dir}: cannot keep the workflow's version there: {reason}") from None


def _copy(folder: Path, versions_dir: Path, version_id: str, source: str | None) -> Version:
    """`snapshot`'s write of a version that is not there yet."""
    versions_dir.mkdir(parents=True, exist_ok=True)
    staging = versions_dir / f"{STAGING_PREFIX}{version_id}-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        copied, files = _walk(folder, copy_to=staging)  # the id of what the copy holds
        (staging / MANIFEST).write_text(json.dumps({
            "version": copied, "runtime": runtime_version(), "files": files,
            "source": source if source is not None else str(folder.resolve()), "created": int(time.time())},
            indent=1) + "\n")
        final = versions_dir / copied
        try:
            os.rename(staging, final)
        except OSError:
            if not final.is_dir():  # (a rename onto an existing non-empty folder fails: it is there already)
                raise
        return Version(copied, final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def source_path(file: str, copy: str | Path, folder: str | Path) -> str:
    """Where the user edits the file `file` of the copy `copy`: the same file in `folder` when it
    still holds the same bytes (a traceback then links to their editor's file), else `file`
    itself (the folder has changed since: the copy is the code that ran)."""
    try:
        relative = Path(file).resolve().relative_to(Path(copy).resolve())
    except (ValueError, OSError):
        return file
    original = Path(folder) / relative
    try:
        if original.is_file() and original.read_bytes() == Path(file).read_bytes():
            return str(original)
    except OSError:
        pass
    return file


def check_id(version_id: str) -> str:
    """`version_id` if it has a version id's form, else UnknownVersion naming it."""
    if not VERSION_PATTERN.match(version_id):
        raise UnknownVersion(f"{version_id!r} is not a version id (v + 16 hex digits, as `versions` lists them)")
    return version_id


def find(versions_dir: str | Path | None, version_id: str) -> Version | None:
    """The copy of `version_id` in `versions_dir`, or None."""
    check_id(version_id)
    if versions_dir is None:
        return None
    path = Path(versions_dir) / version_id
    return Version(version_id, path) if path.is_dir() else None


def require(versions_dir: str | Path | None, version_id: str) -> Version:
    """`find`, or UnknownVersion naming the version and the folder it is missing from."""
    found = find(versions_dir, version_id)
    if found is None:
        raise UnknownVersion(f"unknown version {version_id!r}: no copy of it in {versions_dir} (see `python -m "
                             f"builder versions`)")
    return found


def listed(versions_dir: str | Path | None) -> list[Version]:
    """Every complete copy in `versions_dir` (staging folders left by a crash are not), by id."""
    if versions_dir is None or not Path(versions_dir).is_dir():
        return []
    return [Version(p.name, p) for p in sorted(Path(versions_dir).iterdir())
            if p.is_dir() and VERSION_PATTERN.match(p.name)]


def manifest(version: Version) -> dict[str, object]:
    """What the copy's `.unum-version.json` says (empty if it cannot be read)."""
    try:
        found = json.loads((version.path / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def remove(version: Version) -> None:
    """Delete the copy: renamed out of the way first, so no reader finds half of it."""
    doomed = version.path.with_name(f"{STAGING_PREFIX}removed-{version.id}-{secrets.token_hex(4)}")
    os.rename(version.path, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def remove_staging(versions_dir: str | Path | None, older_than: float = 3600.0) -> int:
    """Delete staging folders a killed snapshot left (older than `older_than` s); how many."""
    if versions_dir is None or not Path(versions_dir).is_dir():
        return 0
    removed = 0
    for p in Path(versions_dir).iterdir():
        if p.is_dir() and p.name.startswith(STAGING_PREFIX) and time.time() - p.stat().st_mtime > older_than:
            shutil.rmtree(p, ignore_errors=True)
            removed += 1
    return removed


def directory(store: Store) -> Path | None:
    """Where `store`'s versions are kept (module docstring); None for a store that keeps nothing
    across processes (the memory store): its workflows run from their folder as given."""
    from unum_entry.stores.base import ClientStore
    from unum_entry.stores.file import FileStore
    from unum_entry.stores.sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        db = Path(store.path)
        return db.parent / ("versions" if db.stem == DEFAULT_DATABASE_STEM else f"{db.stem}.versions")
    if isinstance(store, FileStore):  # beside the folder, not in it: the folder holds records only
        root = Path(store.root)
        return root.parent / f"{root.name}.versions"
    if isinstance(store, ClientStore):
        digest = hashlib.sha256(store.location().encode()).hexdigest()[:16]
        return Path.cwd() / REMOTE_FOLDER / f"versions-{digest}"
    return None


__all__ = ["UnknownVersion", "Version", "check_id", "content_id", "directory", "find", "listed", "manifest", "remove",
           "remove_staging", "require", "runtime_version", "snapshot", "source_path"]
