"""msgpack on the hot path without a Packer per call: `pack(value)` is `msgpack.packb(value,
use_bin_type=True)` byte for byte, and `ext(code, body)` is `msgpack.packb(msgpack.ExtType(code,
body))` (names and history stamps are stored: their bytes must never change).

`msgpack.packb` builds a new Packer each call, about half of what packing a small value costs;
here each thread keeps one (a Packer is not safe to share between threads). Only for values
made of builtin types that cannot call back into Python while being packed (names, stamps
without user values): a callback that packed again on the same thread would interleave with the
outer pack in the one buffer. User values go through `unum_entry.codec`, which packs them with
`pack_value`: the thread's other Packer, taken out of reach while it packs, so a value that
calls back into Python (a dict subclass's `items()`) and packs again gets one of its own.
"""

from __future__ import annotations

import threading
from typing import Any

import msgpack  # type: ignore[import-untyped]

_local = threading.local()
_FIXEXT = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}  # body lengths with a one-byte header


def pack(value: Any) -> bytes:
    """`msgpack.packb(value, use_bin_type=True)` (raises as it does; the Packer resets itself)."""
    try:
        packer = _local.packer
    except AttributeError:
        packer = _local.packer = msgpack.Packer(use_bin_type=True)
    packed: bytes = packer.pack(value)
    return packed


def pack_value(value: Any) -> bytes:
    """`msgpack.packb(value, use_bin_type=True)` for any value, user values included (raises as
    it does). Reentrant: the thread's kept Packer is taken while it packs, so a nested call
    (from a callback inside the value) makes its own instead of writing into the same buffer."""
    kept = _local.__dict__
    packer = kept.pop("value_packer", None)
    if packer is None:
        packer = msgpack.Packer(use_bin_type=True)
    try:
        packed: bytes = packer.pack(value)
    finally:
        kept["value_packer"] = packer  # (a Packer resets its buffer when packing raises)
    return packed


def ext(code: int, body: bytes) -> bytes:
    """The msgpack ext object of type `code` holding `body` (as msgpack writes it)."""
    n = len(body)
    fixed = _FIXEXT.get(n)
    if fixed is not None:
        return bytes((fixed, code)) + body
    if n < 0x100:
        return bytes((0xC7, n, code)) + body
    if n < 0x10000:
        return b"\xc8" + n.to_bytes(2, "big") + bytes((code,)) + body
    return b"\xc9" + n.to_bytes(4, "big") + bytes((code,)) + body
