"""Names and history stamps are stored: their bytes never change when their code gets faster.

The pinned values were computed by the code before the hot path got its own Packer
(unum_entry.packing); the reference functions are the straightforward msgpack formulas."""

from __future__ import annotations

import hashlib
import threading

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from unum_entry import history, naming
from unum_entry.envelope import DataRef, Envelope, Frame, Gather
from unum_entry.packing import ext, pack

pytestmark = pytest.mark.unit


def test_names_are_the_pinned_ones() -> None:
    frames = (Frame(), Frame(2, 5, 1))
    assert naming.checkpoint_key("wf-1", "F1", frames) == "c-42c4bd9e69b9fd338af3a53c3508d0b7"
    assert naming.result_key("wf-1", frames) == "r-ce54329bd6d9c6e1f55ffafbfb8d14c6"
    assert naming.set_shard_key("s-abc", 1, 7) == "s-1cdf5a08f0a3e2f9c4f1744377b9e09c"
    assert naming.fan_in_set_key("wf-1", "Sum", (Frame(),), 16) == "s-b021b29cebbe0e059f905659a0120a9e"
    assert naming.timer_name("wf-1", "wait", "c-x", 3) == "m-e05960731d26387237c882165a7d9d9c"


def test_stamps_are_the_pinned_ones() -> None:
    item = Envelope(workflow="wf-1", frames=(Frame(), Frame(2, 5, 1)),
                    inputs=(DataRef(ref="c-0011", value=[1, 2], item=2, path="$.items"),), attempt=2, lanes=3,
                    deadline=1767225600, failures=((1700000000123, "E: m"),))
    assert history.stamp("F1", item, started=1700000000.5, committed=1700000001.25, with_deadline=True).hex() == (
        "c75a4889a166a24631a163cf0000018bcfe56ce2a170929300010093020501a16102a173cf0000018bcfe569f4a1699193a663"
        "2d3030313102a7242e6974656d73a16c03a164ce6955b900a1789192cf0000018bcfe5687ba4453a206d")
    entry = Envelope(workflow="wf-2", inputs=(DataRef(value={"n": 1}),), start=True)
    assert history.stamp("F0", entry, started=1700000000.5, committed=1700000001.25).hex() == (
        "c7224884a166a24630a163cf0000018bcfe56ce2a173cf0000018bcfe569f4a17781a16e01")
    join = Envelope(workflow="wf-3", gathered=True, gather=Gather("s-1", 16), deadline=5)
    assert history.stamp("Sum", join, started=None, committed=1700000001.25).hex() == (
        "c71e4884a166a353756da163cf0000018bcfe56ce2a16792a3732d3110a2676401")
    assert history.end_stamp("F1", 1700000001.25).hex() == "c7144883a166a24631a163cf0000018bcfe56ce2a16501"
    sent = Envelope(workflow="wf-4", frames=(Frame(0, 1, 2),),
                    inputs=(DataRef(value=5), DataRef(ref="c-9", value=[1]), DataRef(value={"a": "b"})), deadline=9)
    assert history.stamp("G", sent, started=1.5, committed=2.25).hex() == (
        "c7294886a166a147a163cd08caa1709193000102a173cd05dca1699193a3632d39c0c0a176920581a161a162")


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 8, 15, 16, 17, 255, 256, 65535, 65536, 70000])
def test_ext_is_msgpacks_own_header(size: int) -> None:
    body = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    assert ext(history.STAMP_EXT, body) == msgpack.packb(msgpack.ExtType(history.STAMP_EXT, body))


scalars = (st.none() | st.booleans() | st.integers(-2**63, 2**64 - 1) | st.text() | st.binary()
           | st.floats(allow_nan=False))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=20)


@given(value=values)
def test_pack_is_packb(value: object) -> None:
    assert pack(value) == msgpack.packb(value, use_bin_type=True)


@given(wf=st.text(min_size=1, max_size=30), fn=st.text(min_size=1, max_size=12),
       frames=st.lists(st.tuples(st.integers(0, 2**40), st.integers(1, 2**40), st.integers(0, 300)), max_size=3))
def test_checkpoint_names_are_the_plain_formula(wf: str, fn: str, frames: list[tuple[int, int, int]]) -> None:
    framed = (Frame(), *(Frame(*f) for f in frames))
    payload = msgpack.packb(["checkpoint", wf, fn, [[f.index, f.size, f.iteration] for f in framed]],
                            use_bin_type=True)
    assert naming.checkpoint_key(wf, fn, framed) == "c-" + hashlib.blake2b(payload, digest_size=16).hexdigest()


def test_a_failed_pack_leaves_the_threads_packer_clean() -> None:
    with pytest.raises(TypeError):
        pack({"a": [1, object()]})
    assert pack({"x": 1}) == msgpack.packb({"x": 1}, use_bin_type=True)


def test_threads_pack_concurrently_without_mixing_bytes() -> None:
    wrong: list[object] = []

    def work(n: int) -> None:
        for i in range(2000):
            value = {"t": n, "i": i, "s": "x" * (i % 40)}
            if pack(value) != msgpack.packb(value, use_bin_type=True):
                wrong.append(value)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not wrong and not any(t.is_alive() for t in threads)
