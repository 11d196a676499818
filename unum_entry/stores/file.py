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
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path

import msgpack

from unum_entry.errors import SetGone, StoreError
from unum_entry.stores.base import Kind, Record, SetState, Store

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

    # ---- helpers -------------------------------------------------------------------------

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
