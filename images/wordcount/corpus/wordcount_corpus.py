"""The wordcount corpus as the functions see it: one text, read in byte ranges (the stand-in for
the S3 objects of the paper's wordcount), cut at line ends so no word is split between mappers.

Shared by Partition and Mapper (each function folder links this file and the corpus next to it,
so a function image carries its own copy). The decompressed text is cached per process, as a warm
Lambda container would keep it.
"""

from __future__ import annotations

import lzma
import re
from functools import lru_cache
from pathlib import Path

CORPUS = Path(__file__).with_name("shakespeare.txt.xz")
WORD = re.compile(rb"[a-z]+(?:'[a-z]+)*")


@lru_cache(maxsize=1)
def text() -> bytes:
    """The whole corpus (5,057,281 bytes of ASCII text)."""
    return lzma.decompress(CORPUS.read_bytes())


def ranges(fraction: float, parts: int) -> tuple[int, list[tuple[int, int]]]:
    """(bytes used, `parts` [start, end) ranges covering the first `fraction` of the corpus),
    every boundary moved forward to just after a newline. Ranges may be empty (more parts
    than lines), never overlap, and cover the used prefix exactly (a line end is monotone in its
    position and `used` is one)."""
    data = text()
    used = len(data) if fraction >= 1 else _line_end(data, int(len(data) * fraction))
    cuts = [0] + [_line_end(data, used * k // parts) for k in range(1, parts)] + [used]
    return used, [(cuts[k], cuts[k + 1]) for k in range(parts)]


def words(start: int, end: int) -> list[bytes]:
    """The lower-cased words (letters with inner apostrophes: o'er, king's) of one range."""
    return WORD.findall(text()[start:end].lower())


def _line_end(data: bytes, at: int) -> int:
    if at <= 0:
        return 0
    newline = data.find(b"\n", at - 1)
    return len(data) if newline < 0 else newline + 1
