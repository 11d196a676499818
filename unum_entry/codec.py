"""Values as bytes: msgpack for everything stored; JSON-compatible shapes for events."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgpack  # type: ignore[import-untyped]

from unum_entry.errors import UnencodableValue
from unum_entry.packing import pack_value

__all__ = ["MSGPACK_INTS", "UnencodableValue", "decode", "decode_many", "encode"]

#: The ints msgpack can encode (int64 and uint64): a wire round trip returns them unchanged.
MSGPACK_INTS = range(-2**63, 2**64)


def encode(value: Any, *, what: str = "value") -> bytes:
    """Encode a JSON-like value (dict/list/str/int/float/bool/None/bytes) as msgpack."""
    try:
        return pack_value(value)  # `msgpack.packb(value, use_bin_type=True)`, without a Packer per call
    except (TypeError, ValueError, OverflowError) as exc:
        raise UnencodableValue(f"{what} cannot be stored: {exc} (return JSON-like data: dict, list, str, number, bool, None or bytes)") from exc


# What may follow a value: a msgpack ext object (a commit's history stamp, unum_entry.history).
_EXT_HEADS = frozenset(b"\xc7\xc8\xc9\xd4\xd5\xd6\xd7\xd8")
_BUFFER = 1 << 24  # `decode_many`'s Unpacker: longer data goes to `decode`


def decode(data: bytes) -> Any:
    """Inverse of `encode`. Maps come back as dicts, arrays as lists. A value followed by a
    msgpack ext object (a commit's history stamp, unum_entry.history) decodes as the value."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except msgpack.ExtraData as extra:
        if extra.extra[:1] and extra.extra[0] in _EXT_HEADS:
            return extra.unpacked
        raise


def decode_many(datas: Iterable[bytes]) -> list[Any]:
    """`decode` of each of `datas` (a fan-in's checkpoints: each its value, then its stamp).

    Why not `decode` one by one: `unpackb` refuses a stamp by raising ExtraData, and raising
    costs twice the decode. One Unpacker reads each value and drops what follows; data it
    cannot read that way (malformed, or anything but an ext object after the value) is decoded
    by `decode`, which raises what it always raised."""
    unpacker = _unpacker()
    values: list[Any] = []
    for data in datas:
        if len(data) > _BUFFER:
            values.append(decode(data))
            continue
        start = unpacker.tell()
        try:
            unpacker.feed(data)
            value = unpacker.unpack()
            end = unpacker.tell() - start
            if end == len(data) or data[end] in _EXT_HEADS:
                if end != len(data):
                    unpacker.read_bytes(len(data) - end)
                values.append(value)
                continue
        except Exception:  # noqa: S110 - said again by `decode`, as it always said it
            pass
        unpacker = _unpacker()  # a fresh one: this one may hold the rest of `data`
        values.append(decode(data))
    return values


def _unpacker() -> Any:
    """An Unpacker that reads as `decode` does, buffering up to `_BUFFER` bytes."""
    return msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=_BUFFER)
