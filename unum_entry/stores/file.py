"""Embedded file-backed store: one directory, safe across threads and processes.

Layout under `root`:
- `objects/<key>`: every record (checkpoints, results, failures, chunks *and* sets), one small
  file each, made of frames: a 4-byte big-endian length, then that many bytes of msgpack. The
  first frame is the record (`[key, kind, workflow, expiry, value, size, None]`); a set's file
  has one more frame per filled slot (`[slot, member]`), appended in the order they were added.
  A file whose first frame is incomplete (empty, or cut short) is a record being written, or
  one whose writer crashed mid-write: every reader treats it as absent.
- `tmp/`: scratch files of transactional steps (redo records, application items).
- `app/<table>/<key>`: application items of transactional steps (msgpack `{v, ver}`), outside
  `objects/` so `records()` never lists them. `app/.lock` serialises transactions and
  application reads; `app/.redo/<step key>` is a transaction's redo record (see `_transact`).

How each primitive stays atomic. Every *change* of an existing file in `objects/` is made under
an exclusive `flock` on that very file; the holder then checks that the file is still linked
(`st_nlink`), so a lock taken on a file deleted meanwhile is dropped and the path opened again.
Readers take no lock: they read the file and keep the complete frames.
- `create` (the hot path: one per workflow transition) opens `objects/<key>` with
  `O_CREAT|O_EXCL` (create-if-absent), locks it, checks it is still empty and linked, writes its
  one frame with one write(2) and closes it: one inode, no rename, no scratch file. A loser
  (`EEXIST`) reads the winner's file. When that file is incomplete (being written, or its writer
  died) or expired, the loser locks it — which waits for a live writer — and reads it again;
  still incomplete or expired, it truncates the file and writes its own record in its place. A
  writer that created the file but lost the lock to such a takeover finds the file non-empty
  once it holds the lock, and becomes a loser. So a value, once complete, never changes while it
  is live, and no reader ever sees a half-written one.
- `add_to_set`: under the set file's lock, read it, and append one frame (the slot's member)
  unless the slot is taken. O(1) per add: a set file is a header plus at most a few hundred
  bytes (fan-ins are sharded at 16 slots). A fresh or expired set is (re)written from offset 0.
- `delete` and `sweep` unlink a file under its lock (sweep after reading it again, so a record
  replaced since it expired survives).
Lock order: `app/.lock` before object locks, object locks in key order; nobody waits for
`app/.lock` or a second object lock while holding an object lock outside a transaction.

Durability: no fsync. What the embedded platform promises is surviving a *process* crash (a
handler that dies, a worker that is killed): a completed write(2) is in the kernel's page cache
and every other process sees it, crashed or not. Surviving a power loss or kernel crash would
need an fsync of the file and of its directory per write, which costs milliseconds on most
disks and would cap the store at a few hundred transitions per second; use a cloud store
(DynamoDB, Firestore) where that matters.

Expiry: every read path treats a record whose expiry has passed as absent (`Store`), `create`
and `add_to_set` replace it, and `sweep` (`python -m builder gc --store …`) deletes expired
records (and files left incomplete by a crashed writer for over an hour), the file store having
no server-side TTL.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import struct
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import msgpack  # type: ignore[import-untyped]

from unum_entry.errors import GuardFailed, StoreError, StoreMisuse, TransactionConflict
from unum_entry.stores.base import AppOp, Guard, Kind, Record, SetState, Store, Versioned

_ABANDONED_AFTER = 3600  # seconds before sweep removes an incomplete object or scratch file
_KINDS = {kind.value: kind for kind in Kind}
_LENGTH = struct.Struct(">I")
_READ_SIZE = 1 << 18


class FileStore(Store):
    """Store over a local directory (the embedded platform's default)."""

    def __init__(self, root: str | os.PathLike[str], **kwargs) -> None:
        super().__init__(**kwargs)
        self.root = Path(root)
        self._objects = os.path.join(self.root, "objects")
        self._tmp = os.path.join(self.root, "tmp")
        self._app = self.root / "app"
        self._redo = self._app / ".redo"
        for folder in (self._objects, self._tmp):
            os.makedirs(folder, exist_ok=True)
        # Objects are opened relative to this descriptor: no path walk per call.
        self._dir = os.open(self._objects, os.O_RDONLY | os.O_DIRECTORY)
        # Scratch names: unique per store instance, process (a fork copies the instance) and call.
        self._token = uuid.uuid4().hex[:12]
        self._counter = itertools.count()

    def close(self) -> None:
        """Close the directory descriptor (reopened if the store is used again)."""
        fd, self._dir = getattr(self, "_dir", -1), -1
        if fd >= 0:
            os.close(fd)

    def _d(self) -> int:
        fd = self._dir
        if fd < 0:
            fd = self._dir = os.open(self._objects, os.O_RDONLY | os.O_DIRECTORY)
        return fd

    def __getstate__(self) -> dict:
        """Picklable (e.g. for a spawned process): the descriptor and scratch names are per process."""
        state = dict(self.__dict__)
        state.update(_dir=-1, _counter=None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._token, self._counter = uuid.uuid4().hex[:12], itertools.count()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # ---- primitives ----------------------------------------------------------------------

    def _create(self, record: Record) -> Record | None:
        name = _safe(record.key)
        data = _frame(_pack(record))
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=self._d())
        except FileExistsError:
            existing = self._read(name)
            if existing is not None and existing.expires_at > self._clock():
                return existing
            return self._create_over(name, data)  # being written, abandoned or expired
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            status = os.fstat(fd)
            if status.st_nlink and not status.st_size:
                _write_at(fd, data, 0)
                return None
        finally:
            os.close(fd)
        # Taken over (or removed) between our create and our lock: compete again.
        return self._create_over(name, data)

    def _create_over(self, name: str, data: bytes) -> Record | None:
        """Under the file's lock: the live record there, or (absent, incomplete, expired) None
        after writing `data` in its place."""
        with self._locked_new(name) as fd:
            existing = _decode(name, _read_fd(fd))
            if existing is not None and existing.expires_at > self._clock():
                return existing
            os.ftruncate(fd, 0)
            _write_at(fd, data, 0)
            return None

    def _get_many(self, keys: list[str]) -> dict[str, Record]:
        found: dict[str, Record] = {}
        for key in keys:
            record = self._read(_safe(key))
            if record is not None:
                found[key] = record
        return found

    def _delete(self, keys: list[str]) -> None:
        for key in keys:
            name = _safe(key)
            with self._locked(name, create=False) as fd:
                if fd is not None:
                    os.unlink(name, dir_fd=self._d())

    def _add_to_set(self, record: Record, slot: int, member: str) -> SetState:
        if record.size is None:  # Store.add_to_set always gives one
            raise StoreMisuse(f"set {record.key!r}: an add needs the set's size")
        name = _safe(record.key)
        entry = _frame(msgpack.packb([slot, member], use_bin_type=True))
        with self._locked_new(name) as fd:
            data = _read_fd(fd)
            frames, end = _frames(data)
            current = _decode_frames(name, frames)
            if current is not None and current.expires_at > self._clock():
                if current.kind is not Kind.SET or current.size is None:
                    raise StoreError(f"store key {record.key!r} holds a {current.kind.value}, not a set")
                members = dict(current.members)
                if slot in members:  # a slot keeps its first member: nothing to write
                    return SetState(size=current.size, members=members)
                if end < len(data):
                    os.ftruncate(fd, end)  # a frame cut short by a crashed adder
                _write_at(fd, entry, end)
                members[slot] = member
                return SetState(size=current.size, members=members)
            # Absent (a new, empty file), abandoned or expired: a fresh set.
            if data:
                os.ftruncate(fd, 0)
            _write_at(fd, _frame(_pack(record)) + entry, 0)
        return SetState(size=record.size, members={slot: member})

    def _scan(self, workflow: str | None) -> Iterable[Record]:
        with os.scandir(self._objects) as entries:
            names = [entry.name for entry in entries]
        for name in names:
            record = self._read(name)
            if record is not None and (workflow is None or record.workflow == workflow):
                yield record

    def _sweep(self, now: float) -> int:
        abandoned_before = time.time() - _ABANDONED_AFTER
        with os.scandir(self._objects) as entries:
            names = [entry.name for entry in entries]
        deleted = 0
        for name in names:
            record = self._read(name)
            if record is not None and record.expires_at > now:
                continue
            with self._locked(name, create=False) as fd:
                if fd is None:
                    continue
                record = _decode(name, _read_fd(fd))  # again, under the lock: it may have been replaced
                if record is not None:
                    if record.expires_at <= now:
                        os.unlink(name, dir_fd=self._d())
                        deleted += 1
                elif os.fstat(fd).st_mtime < abandoned_before:
                    os.unlink(name, dir_fd=self._d())  # incomplete for an hour: its writer died
        self._sweep_scratch(abandoned_before)
        return deleted

    def _app_read(self, table: str, keys: list[str]) -> dict[str, Versioned]:
        with self._app_locked():
            found = {key: self._app_item(table, key) for key in keys}
        return {key: item for key, item in found.items() if item is not None}

    def _transact(self, record: Record, ops: list[AppOp], guards: list[Guard]) -> Record | None:
        # Crash-atomic without a database: under one exclusive fcntl lock (released by the OS
        # if the holder dies), (1) finish or discard whatever a dead holder left (`_recover`),
        # (2) validate, (3) write the redo record (every application write) by rename,
        # (4) create the step record in objects/ — the commit point, (5) apply the writes,
        # (6) drop the redo record. Dying before (4) completes leaves a redo record without a
        # complete step record: discarded. Dying after leaves one with it: its writes are
        # (re)applied. Either both the step record and the writes exist, or neither; nobody
        # reads application items without the lock, so nobody sees a half-applied transaction.
        # The guarded objects' locks are held too, so no add, sweep or delete changes them
        # between the checks and the commit.
        with self._app_locked(), self._held(guard.key for guard in guards if guard.key != record.key):
            existing = self._read(_safe(record.key))
            if existing is not None and existing.expires_at > self._clock():
                return existing
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
            existing = self._commit_record(record)
            if existing is not None:  # a plain create of this key got there first
                _unlink(redo)
                return existing
            self._apply(writes)
            _unlink(redo)
        return None

    # ---- helpers -------------------------------------------------------------------------

    def _read(self, name: str) -> Record | None:
        """The record in objects/`name` as stored (expired or not), or None (absent or
        incomplete). Lock-free."""
        try:
            fd = os.open(name, os.O_RDONLY, dir_fd=self._d())
        except FileNotFoundError:
            return None
        try:
            return _decode(name, _read_fd(fd))
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _locked(self, name: str, *, create: bool) -> Iterator[int | None]:
        """objects/`name` opened read-write and exclusively locked, still linked; None when it
        does not exist (and `create` is false)."""
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        while True:
            try:
                fd = os.open(name, flags, 0o644, dir_fd=self._d())
            except FileNotFoundError:
                fd = -1
                break
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if os.fstat(fd).st_nlink:
                    break
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # deleted while we waited for the lock: open whatever is there now
        try:
            yield fd if fd >= 0 else None
        finally:
            if fd >= 0:
                os.close(fd)  # releases the lock

    @contextlib.contextmanager
    def _locked_new(self, name: str) -> Iterator[int]:
        """`_locked(name, create=True)`: the file, created if absent (never None)."""
        with self._locked(name, create=True) as fd:
            if fd is None:  # O_CREAT found no folder to create it in
                raise StoreError(f"cannot create {name!r} in {self._objects}: the store's folder is gone")
            yield fd

    @contextlib.contextmanager
    def _held(self, keys: Iterable[str]) -> Iterator[None]:
        """Hold the locks of the existing objects among `keys` (in key order)."""
        with contextlib.ExitStack() as stack:
            for key in sorted(set(keys)):
                stack.enter_context(self._locked(_safe(key), create=False))
            yield

    def _guard_holds(self, guard: Guard) -> bool:
        found = self._read(_safe(guard.key))
        if found is not None and found.expires_at <= self._clock():
            found = None
        if guard.slot is not None:
            return found is not None and found.kind is Kind.SET and guard.slot not in found.members
        return (found is not None) == guard.present

    def _commit_record(self, record: Record) -> Record | None:
        """A transaction's commit point: create its step record (`_create`)."""
        return self._create(record)

    def _prepare_redo(self, redo: Path, writes: list[list]) -> None:
        os.replace(self._scratch(msgpack.packb(writes, use_bin_type=True)), redo)

    def _apply(self, writes: list[list]) -> None:
        for table, key, value, version in writes:
            path = self._app_path(table, key)
            if value is None:
                _unlink(path)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self._scratch(msgpack.packb({"v": value, "ver": version}, use_bin_type=True)), path)

    def _recover(self) -> None:
        """Under the app lock: finish committed transactions a dead holder left half-applied,
        discard uncommitted ones."""
        for name in os.listdir(self._redo):
            redo = self._redo / name
            if self._read(name) is not None:  # the step record is complete: committed
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

    def _scratch(self, data: bytes) -> str:
        """A new file in tmp/ holding `data`; the caller moves it into place or unlinks it."""
        path = os.path.join(self._tmp, f"{self._token}.{os.getpid()}.{next(self._counter)}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_at(fd, data, 0)
        finally:
            os.close(fd)
        return path

    def _sweep_scratch(self, cutoff: float) -> None:
        with os.scandir(self._tmp) as entries:
            for entry in entries:
                with contextlib.suppress(FileNotFoundError):
                    if entry.stat().st_mtime < cutoff:
                        _unlink(entry.path)


def _safe(key: str) -> str:
    if not key or "/" in key or key.startswith(".") or "\0" in key:
        raise StoreError(f"store key {key!r} is not a valid file name")
    return key


def _unlink(path: str | os.PathLike[str]) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _read_fd(fd: int) -> bytes:
    """The whole file behind `fd`, from offset 0 (pread: the descriptor's offset is not used)."""
    data = os.pread(fd, _READ_SIZE, 0)
    if len(data) < _READ_SIZE:
        return data
    parts = [data]
    offset = len(data)
    while chunk := os.pread(fd, _READ_SIZE, offset):
        parts.append(chunk)
        offset += len(chunk)
    return b"".join(parts)


def _write_at(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _frame(payload: bytes) -> bytes:
    return _LENGTH.pack(len(payload)) + payload


def _frames(data: bytes) -> tuple[list[bytes], int]:
    """The complete frames at the start of `data`, and where they end."""
    frames: list[bytes] = []
    offset, size = 0, len(data)
    while offset + 4 <= size:
        (length,) = _LENGTH.unpack_from(data, offset)
        if offset + 4 + length > size:
            break
        frames.append(data[offset + 4:offset + 4 + length])
        offset += 4 + length
    return frames, offset


def _decode(name: str, data: bytes) -> Record | None:
    return _decode_frames(name, _frames(data)[0])


def _decode_frames(name: str, frames: list[bytes]) -> Record | None:
    if not frames:
        return None  # empty or cut short: being written, or abandoned by a crashed writer
    try:
        key, kind, workflow, expires_at, value, size, _ = msgpack.unpackb(frames[0], raw=False)
        kind = _KINDS[kind]
        members: dict[int, str] = {}
        if kind is Kind.SET:
            for frame in frames[1:]:
                slot, member = msgpack.unpackb(frame, raw=False)
                members.setdefault(slot, member)
        return Record(key=key, kind=kind, workflow=workflow, expires_at=expires_at, value=value,
                      size=size, members=members)
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as exc:
        raise StoreError(f"objects/{name} is not a unum record ({type(exc).__name__}: {exc})") from exc


def _pack(record: Record) -> bytes:
    return msgpack.packb([record.key, record.kind.value, record.workflow, record.expires_at, record.value,
                          record.size, None], use_bin_type=True)
