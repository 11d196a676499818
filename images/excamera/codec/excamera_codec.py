"""ExCamera's video work with a real codec: VP8 through libvpx (PyAV), on a generated test pattern.

ExCamera (NSDI'17; the unum paper's §5.4) encodes a video in parallel chunks: `vpxenc` encodes
each chunk on its own (it must start with a key frame), `xcdec` decodes a chunk to get the
decoder's state at its end, and `xcenc` re-encodes chunk i so that it starts from the state chunk
i-1 leaves in the decoder instead of from a key frame. The functions here do the same steps:

- `vpxenc(video, chunk)`: encode the chunk's raw frames (a key frame, then inter frames);
- `xcdec(packets)`: decode a chunk; its last decoded frame is the state handed to the neighbour;
- `xcenc(video, chunk, state, guide)`: re-encode the chunk after the neighbour's decoded frame.
  libvpx cannot be started from a foreign decoder state (ExCamera patched its own VP8 encoder for
  that), so a fresh encoder is primed with the neighbour's decoded last frame: it is coded as a
  key frame that is *not shown* (VP8's show_frame bit cleared), and the chunk's own frames follow
  as inter frames predicted from it. The spliced stream therefore shows exactly one key frame,
  and every chunk's first shown frame is predicted from the frame the viewer's decoder showed
  last — the dependency of the paper, with a real codec. (It does not save ExCamera's bits: the
  hidden reference frame costs about what a key frame does.)
- `splice_and_check(video, chunks)`: concatenate, decode the whole stream with a fresh decoder,
  and check it against the source.

The source video is a deterministic moving test pattern: frame t of any chunk is `render(video, t)`,
the stand-in for reading raw chunks from S3. Encoded chunks and decoder states go through a bucket
(`app_objects.py`: S3, or a local folder on the embedded platform), as in the paper: results carry
object keys, never the video data.
"""

from __future__ import annotations

import struct
import sys
from fractions import Fraction
from typing import Any

import app_objects

try:
    import av
    import numpy as np
except ImportError as exc:  # reported by require_codec, so importing this module never fails
    av = np = None
    _IMPORT_ERROR: str | None = f"{type(exc).__name__}: {exc}"
else:
    _IMPORT_ERROR = None

CODEC = "vp8"
ENCODER = "libvpx"
MIN_PSNR_DB = 30.0  # every decoded frame against its source frame (the encodes reach ~45 dB)
DEFAULTS = {"seconds": 4, "fps": 24, "width": 160, "height": 90, "chunk_frames": 16}


class EncoderMissing(RuntimeError):
    """PyAV, numpy or libvpx's VP8 encoder is not available."""


def require_codec() -> None:
    """Fail with one clear line when the encoder cannot run here."""
    if _IMPORT_ERROR is not None:
        raise EncoderMissing(f"ExCamera needs PyAV with libvpx and numpy ({_IMPORT_ERROR}); "
                             f"install them: pip install av numpy")
    try:
        av.codec.Codec(ENCODER, "w")
    except Exception as exc:  # noqa: BLE001 - whatever this PyAV build says
        raise EncoderMissing(f"ExCamera needs libvpx's VP8 encoder, which this PyAV build lacks "
                             f"({type(exc).__name__}: {exc})") from None


# ---- the job -------------------------------------------------------------------------------

def plan(config: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The chunks of the video `config` describes (DEFAULTS for what it leaves out)."""
    video = {**DEFAULTS, **(config or {})}
    objects = app_objects.resolve(video.pop("objects", None))
    unknown = sorted(set(video) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown input field {unknown[0]!r} (fields: {', '.join(DEFAULTS)}, objects)")
    width, height, fps, chunk_frames = (int(video[k]) for k in ("width", "height", "fps", "chunk_frames"))
    if width < 16 or height < 16 or width % 2 or height % 2:
        raise ValueError(f"width and height must be even and at least 16, got {width}x{height}")
    if fps < 1 or chunk_frames < 1:
        raise ValueError(f"fps and chunk_frames must be at least 1, got {fps} and {chunk_frames}")
    frames = round(float(video["seconds"]) * fps)
    if frames < 1:
        raise ValueError(f"seconds={video['seconds']} at {fps} fps is no frame at all")
    spec = {"width": width, "height": height, "fps": fps, "frames": frames}
    starts = list(range(0, frames, chunk_frames))
    return [{"index": i, "chunks": len(starts), "first": first, "count": min(chunk_frames, frames - first),
             "last": i == len(starts) - 1, "video": spec, "objects": objects} for i, first in enumerate(starts)]


def render(video: dict[str, Any], t: int) -> Any:
    """Source frame t (yuv420p, planar, shape (h*3/2, w)): moving waves, a bouncing box, drifting chroma."""
    w, h = video["width"], video["height"]
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    luma = 128 + 50 * np.sin((x + 3 * t) / 11.0) * np.cos((y - 2 * t) / 7.0) + 30 * np.sin((x + y + t) / 23.0)
    bw, bh = max(2, w // 7), max(2, h // 6)
    bx = int((w - bw) * abs(np.sin(t / 17.0)))
    by = int((h - bh) * abs(np.cos(t / 13.0)))
    luma[by:by + bh, bx:bx + bw] = 235
    cy, cx = y[::2, ::2], x[::2, ::2]
    u = 128 + 40 * np.sin((cx + t) / 29.0)
    v = 128 + 40 * np.cos((cy - t) / 19.0)
    planes = [np.clip(p, 0, 255).astype(np.uint8).ravel() for p in (luma, u, v)]
    return np.concatenate(planes).reshape(h * 3 // 2, w)


# ---- the three ExCamera steps --------------------------------------------------------------

def vpxenc(video: dict[str, Any], chunk: dict[str, Any]) -> list[bytes]:
    """Encode the chunk's source frames on their own: a key frame, then inter frames."""
    frames = [render(video, chunk["first"] + k) for k in range(chunk["count"])]
    return _encode(video, frames)


def xcdec(packets: list[bytes]) -> tuple[int, bytes]:
    """Decode a chunk: (frames shown, the last shown frame as planar yuv420p bytes)."""
    shown = _decode(packets)
    if not shown:
        raise ValueError("the chunk decoded to no frame")
    return len(shown), shown[-1].tobytes()


def xcenc(video: dict[str, Any], chunk: dict[str, Any], state: bytes, guide: list[bytes]) -> list[bytes]:
    """Re-encode the chunk after the neighbour's decoded last frame `state`: a hidden reference
    key frame, then the chunk's frames as inter frames. `guide` (vpxenc's encoding of the chunk)
    sets the bit budget, so the re-encode spends what the independent encode spent per frame."""
    w, h = video["width"], video["height"]
    reference = np.frombuffer(state, dtype=np.uint8)
    if reference.size != w * h * 3 // 2:
        raise ValueError(f"the neighbour's state is {reference.size} bytes, expected a {w}x{h} yuv420p frame")
    frames = [reference.reshape(h * 3 // 2, w)] + [render(video, chunk["first"] + k) for k in range(chunk["count"])]
    bits_per_second = sum(map(len, guide)) * 8 * video["fps"] // max(1, len(guide))
    packets = _encode(video, frames, bit_rate=max(bits_per_second, 50_000))
    if not (is_key(packets[0]) and not any(is_key(p) for p in packets[1:])):
        raise ValueError("libvpx put a key frame inside the re-encoded chunk")
    return [hide(packets[0])] + packets[1:]


def splice_and_check(video: dict[str, Any], chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """Concatenate the re-encoded chunks (in order), decode the stream with a fresh decoder and
    check it: frame count, one shown key frame, every frame close to its source (PSNR)."""
    stream = [packet for chunk in chunks for packet in load_packets(chunk["objects"], chunk["packets"])]
    shown = _decode(stream)
    scores = [_psnr(frame, render(video, t)) for t, frame in enumerate(shown)]
    measured = {"stream_bytes": sum(map(len, stream)), "vpxenc_bytes": sum(c["vpxenc_bytes"] for c in chunks),
                "psnr_min_db": round(min(scores), 2) if scores else None,
                "psnr_mean_db": round(sum(scores) / len(scores), 2) if scores else None}
    print(f"excamera: {len(chunks)} chunks, {len(shown)} frames decoded; {measured}", file=sys.stderr)
    return {
        "codec": CODEC, "width": video["width"], "height": video["height"], "fps": video["fps"],
        "chunks": len(chunks), "frames": video["frames"], "decoded_frames": len(shown),
        "shown_keyframes": sum(1 for p in stream if is_key(p) and is_shown(p)),
        "hidden_reference_frames": sum(1 for p in stream if not is_shown(p)),
        "all_chunks_decodable": all(c["decodable"] for c in chunks),
        "frames_match_source": len(shown) == video["frames"] and all(s >= MIN_PSNR_DB for s in scores),
    }


# ---- VP8 frames ----------------------------------------------------------------------------

def is_key(packet: bytes) -> bool:
    """VP8 frame tag (RFC 6386 §9.1): bit 0 of the first byte is 0 for a key frame."""
    return not packet[0] & 0x01


def is_shown(packet: bytes) -> bool:
    """VP8 frame tag: bit 4 of the first byte is show_frame."""
    return bool(packet[0] & 0x10)


def hide(packet: bytes) -> bytes:
    """Clear show_frame: the decoder decodes the frame (it becomes the reference) but shows nothing."""
    return bytes([packet[0] & ~0x10]) + packet[1:]


def pack(packets: list[bytes]) -> bytes:
    """Packets as one object: each a 4-byte big-endian length, then its bytes."""
    return b"".join(struct.pack(">I", len(p)) + p for p in packets)


def unpack(data: bytes) -> list[bytes]:
    packets, at = [], 0
    while at < len(data):
        (n,) = struct.unpack_from(">I", data, at)
        packets.append(data[at + 4:at + 4 + n])
        at += 4 + n
    if at != len(data):
        raise ValueError("a packed chunk ends inside a packet")
    return packets


def store_packets(objects: str, prefix: str, packets: list[bytes]) -> str:
    """Put a chunk's packets in the bucket; return the key."""
    return app_objects.put_content(objects, prefix, pack(packets))


def load_packets(objects: str, key: str) -> list[bytes]:
    return unpack(app_objects.get(objects, key))


def _encode(video: dict[str, Any], frames: list[Any], bit_rate: int | None = None) -> list[bytes]:
    require_codec()
    ctx = av.CodecContext.create(ENCODER, "w")
    ctx.width, ctx.height, ctx.pix_fmt = video["width"], video["height"], "yuv420p"
    ctx.time_base = Fraction(1, video["fps"])
    ctx.framerate = video["fps"]
    ctx.gop_size = len(frames) + 1  # one key frame: the first
    ctx.thread_count = 1
    ctx.bit_rate = bit_rate or video["width"] * video["height"] * video["fps"] // 2
    # constrained quality, no look-ahead and no alt-ref frames: one packet per frame, in order
    ctx.options = {"deadline": "good", "cpu-used": "4", "crf": "12", "lag-in-frames": "0",
                   "auto-alt-ref": "0", "kf-max-dist": str(len(frames) + 1)}
    packets: list[bytes] = []
    for t, array in enumerate(frames):
        frame = av.VideoFrame.from_ndarray(array, format="yuv420p")
        frame.pts = t
        packets += [bytes(p) for p in ctx.encode(frame)]
    packets += [bytes(p) for p in ctx.encode(None)]
    if len(packets) != len(frames):
        raise ValueError(f"libvpx made {len(packets)} packets for {len(frames)} frames")
    return packets


def _decode(packets: list[bytes]) -> list[Any]:
    require_codec()
    ctx = av.CodecContext.create(CODEC, "r")  # FFmpeg's own VP8 decoder, independent of libvpx
    ctx.thread_count = 1
    shown = []
    for data in packets:
        shown += [f.to_ndarray(format="yuv420p") for f in ctx.decode(av.Packet(data))]
    shown += [f.to_ndarray(format="yuv420p") for f in ctx.decode(None)]
    return shown


def _psnr(a: Any, b: Any) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 99.0 if mse == 0 else 10 * float(np.log10(255.0 ** 2 / mse))
