"""Embedded file-backed store: one directory, safe across threads and processes, no locks.

Layout under `root`:
- `objects/<key>`: a checkpoint, result or failure record (msgpack). Created by writing a
  temp file and `os.link`-ing it into place: link fails if the name exists, which makes
  create-if-absent atomic *with* its content (no reader ever sees a half-written value).
- `sets/<key>/`: a set is a directory holding `size` and one file per filled slot. It is created
  by renaming a fully prepared temp directory into place (rename fails onto an existing
  non-empty directory). Adding links a slot file in; deleting renames the directory away
  first, so a concurrent add either lands before the delete or sees the set gone.
- `tmp/`: scratch space for the two steps above.
- `app/<table>/<key>`: application items of transactional steps (msgpack `{v, ver}`), outside
  `objects/` so `records()` never lists them. `app/.lock` (fcntl) serialises transactions and
  application reads; `app/.redo/<step key>` is a transaction's redo record (see `_transact`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import msgpack

from unum_entry.errors import GuardFailed, SetGone, StoreError, TransactionConflict
from unum_entry.stores.base import AppOp, Guard, Kind, Record, SetState, Store, Versioned

_SIZE_FILE = "size"
_META_FILE = "meta"


class FileStore(Store):
    """Store over a local directory (the embedded platform's default)."""

    def __init__(self, root: str | os.PathLike[str], **kwargs) -> None:
        super().__init__(**kwargs)
        self.root = Path(root)
        self._objects = self.root / "objects"
        self._sets = self.root / "sets"
        self._tmp = self.root / "tmp"
        self._app = self.root / "app"
        self._redo = self._app / ".redo"
        for folder in (self._objects, self._sets, self._tmp):
            folder.mkdir(parents=True, exist_ok=True)

    # ---- primitives ----------------------------------------------------------------------

    def _create(self, record: Record) -> Record | None:
        if record.kind is Kind.SET:
            return self._create_set_dir(record)
        path = self._object_path(record.key)
        tmp = self._scratch()
        tmp.write_bytes(_pack(record))
        try:
            for _ in range(3):
                try:
                    os.link(tmp, path)
                    return None
                except FileExistsError:
                    existing = self._read_object(path)
                    if existing is None:
                        continue  # deleted between link and read: try again
                    if existing.expires_at > self._clock():
                        return existing
                    _unlink(path)  # expired: TTL says it is gone
            raise StoreError(f"could not create {record.key!r}: it keeps reappearing")
        finally:
            _unlink(tmp)

    def _get_many(self, keys: list[str]) -> dict[str, Record]:
        found: dict[str, Record] = {}
        for key in keys:
            record = self._read_object(self._object_path(key)) or self._read_set_record(self._set_path(key))
            if record is not None:
                found[key] = record
        return found

    def _delete(self, keys: list[str]) -> None:
        for key in keys:
            _unlink(self._object_path(key))
            set_dir = self._set_path(key)
            if set_dir.exists():
                doomed = self._scratch()
                try:
                    os.rename(set_dir, doomed)
                except FileNotFoundError:
                    continue
                shutil.rmtree(doomed, ignore_errors=True)

    def _add_to_set(self, key: str, slot: int, member: str) -> SetState:
        set_dir = self._set_path(key)
        tmp = self._scratch()
        tmp.write_text(member)
        try:
            os.link(tmp, set_dir / str(slot))
        except FileExistsError:
            pass  # slot already filled (a retry): adding is idempotent
        except FileNotFoundError as exc:
            raise SetGone(f"set {key!r} does not exist") from exc
        finally:
            _unlink(tmp)
        state = self._read_set(set_dir)
        if state is None:
            raise SetGone(f"set {key!r} was deleted while adding slot {slot}")
        return state

    def _scan(self, workflow: str | None) -> Iterable[Record]:
        for path in self._objects.iterdir():
            record = self._read_object(path)
            if record is not None and (workflow is None or record.workflow == workflow):
                yield record
        for set_dir in self._sets.iterdir():
            record = self._read_set_record(set_dir)
            if record is not None and (workflow is None or record.workflow == workflow):
                yield record

    def _app_read(self, table: str, keys: list[str]) -> dict[str, Versioned]:
        with self._app_locked():
            found = {key: self._app_item(table, key) for key in keys}
        return {key: item for key, item in found.items() if item is not None}

    def _transact(self, record: Record, ops: list[AppOp], guards: list[Guard]) -> Record | None:
        # Crash-atomic without a database: under one exclusive fcntl lock (released by the OS
        # if the holder dies), (1) finish or discard whatever a dead holder left (`_recover`),
        # (2) validate, (3) write the redo record (every application write) by rename,
        # (4) link the step record into objects/ — the commit point, (5) apply the writes,
        # (6) drop the redo record. Dying before (4) leaves a redo record without its step
        # record: discarded. Dying after (4) leaves one with it: its writes are (re)applied.
        # Either both the step record and the writes exist, or neither; nobody reads
        # application items without the lock, so nobody sees a half-applied transaction.
        with self._app_locked():
            existing = self._read_object(self._object_path(record.key))
            if existing is not None:
                if existing.expires_at > self._clock():
                    return existing
                _unlink(self._object_path(record.key))
            # Guards after the record: witnesses are deleted before records, and whoever deletes
            # them does so with one atomic unlink/rename, so this order cannot be fooled.
            for guard in guards:
                if not self._guard_holds(guard):
                    raise GuardFailed(f"step {record.key!r}: guard on {guard.key!r} does not hold")
            for op in ops:
                current = self._app_item(op.table, op.key)
                if (current.version if current else 0) != op.expected:
                    raise TransactionConflict(f"application item {op.table}/{op.key} changed since it was read")
            writes = [[op.table, op.key, op.value, op.expected + 1] for op in ops if op.write]
            redo = self._redo / _safe(record.key)
            self._prepare_redo(redo, writes)
            self._commit_record(record)
            self._apply(writes)
            _unlink(redo)
        return None

    # ---- helpers -------------------------------------------------------------------------

    def _guard_holds(self, guard: Guard) -> bool:
        if guard.slot is not None:
            set_dir = self._set_path(guard.key)
            return set_dir.is_dir() and not (set_dir / str(guard.slot)).exists()
        found = self._read_object(self._object_path(guard.key)) is not None or self._set_path(guard.key).is_dir()
        return found == guard.present

    def _prepare_redo(self, redo: Path, writes: list[list]) -> None:
        tmp = self._scratch()
        tmp.write_bytes(msgpack.packb(writes, use_bin_type=True))
        os.replace(tmp, redo)

    def _commit_record(self, record: Record) -> None:
        tmp = self._scratch()
        tmp.write_bytes(_pack(record))
        try:
            os.link(tmp, self._object_path(record.key))
        finally:
            _unlink(tmp)

    def _apply(self, writes: list[list]) -> None:
        for table, key, value, version in writes:
            path = self._app_path(table, key)
            if value is None:
                _unlink(path)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._scratch()
            tmp.write_bytes(msgpack.packb({"v": value, "ver": version}, use_bin_type=True))
            os.replace(tmp, path)

    def _recover(self) -> None:
        """Under the app lock: finish committed transactions a dead holder left half-applied,
        discard uncommitted ones."""
        for name in os.listdir(self._redo):
            redo = self._redo / name
            if self._object_path(name).exists():
                self._apply(msgpack.unpackb(redo.read_bytes(), raw=False))
            _unlink(redo)

    @contextlib.contextmanager
    def _app_locked(self) -> Iterator[None]:
        self._redo.mkdir(parents=True, exist_ok=True)
        # One open file description per acquisition: flock then excludes other threads of this
        # process as well as other processes.
        with open(self._app / ".lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                self._recover()
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _app_item(self, table: str, key: str) -> Versioned | None:
        try:
            raw = msgpack.unpackb(self._app_path(table, key).read_bytes(), raw=False)
        except FileNotFoundError:
            return None
        return Versioned(raw["v"], raw["ver"])

    def _app_path(self, table: str, key: str) -> Path:
        return self._app / _safe(table) / _safe(key)

    def _create_set_dir(self, record: Record) -> Record | None:
        target = self._set_path(record.key)
        for _ in range(3):
            staging = self._scratch()
            staging.mkdir()
            (staging / _SIZE_FILE).write_text(str(record.size))
            (staging / _META_FILE).write_bytes(_pack(record))
            try:
                os.rename(staging, target)
                return None
            except OSError as exc:
                shutil.rmtree(staging, ignore_errors=True)
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
            existing = self._read_set_record(target)
            if existing is None or existing.expires_at > self._clock():
                # A set deleted between our rename and this read counts as "existed": the
                # caller (the fan-out origin) must not assume it owns a fresh set.
                return existing or record
            self._delete([record.key])  # expired: TTL says it is gone
        raise StoreError(f"could not create set {record.key!r}: it keeps reappearing")

    def _read_object(self, path: Path) -> Record | None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return _unpack(data)

    def _read_set(self, set_dir: Path) -> SetState | None:
        try:
            names = os.listdir(set_dir)
            size = int((set_dir / _SIZE_FILE).read_text())
            members = {int(n): (set_dir / n).read_text() for n in names if n.isdigit()}
        except FileNotFoundError:
            return None
        return SetState(size=size, members=members)

    def _read_set_record(self, set_dir: Path) -> Record | None:
        try:
            meta = _unpack((set_dir / _META_FILE).read_bytes())
        except FileNotFoundError:
            return None
        state = self._read_set(set_dir)
        members = state.members if state else {}
        return Record(key=meta.key, kind=Kind.SET, workflow=meta.workflow,
                      expires_at=meta.expires_at, size=meta.size, members=members)

    def _object_path(self, key: str) -> Path:
        return self._objects / _safe(key)

    def _set_path(self, key: str) -> Path:
        return self._sets / _safe(key)

    def _scratch(self) -> Path:
        return self._tmp / uuid.uuid4().hex


def _safe(key: str) -> str:
    if not key or "/" in key or key.startswith("."):
        raise StoreError(f"store key {key!r} is not a valid file name")
    return key


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _pack(record: Record) -> bytes:
    return msgpack.packb({
        "k": record.key, "t": record.kind.value, "w": record.workflow, "e": record.expires_at,
        "v": record.value, "n": record.size,
    })


def _unpack(data: bytes) -> Record:
    raw = msgpack.unpackb(data)
    return Record(key=raw["k"], kind=Kind(raw["t"]), workflow=raw["w"], expires_at=raw["e"],
                  value=raw["v"], size=raw["n"])
