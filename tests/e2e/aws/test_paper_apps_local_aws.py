"""A paper application as Lambda containers: the wordcount state machine compiled, its images
built, and `python -m builder local-aws` running it (Invoke endpoint, RIE containers, DynamoDB on
a moto that applies one request at a time: the fan-ins race on set shards, which moto's threaded
server can lose — see tests/support/serial_moto.py)."""

from __future__ import annotations

import collections
import json
import lzma
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.serial_moto import serialized_moto

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]
WORDCOUNT = REPO / "images" / "wordcount"


def test_wordcount_state_machine_in_lambda_containers(built_images, tmp_path: Path) -> None:
    folder = tmp_path / "wordcount"
    compiled = subprocess.run([sys.executable, "-m", "builder", "compile", str(WORDCOUNT / "statemachine.json"),
                               "--out", str(folder)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert compiled.returncode == 0, compiled.stderr
    built_images(folder)
    size = {"mappers": 5, "reducers": 3, "corpus_fraction": 0.01, "top": 5}

    with serialized_moto() as moto:
        proc = subprocess.run([sys.executable, "-m", "builder", "local-aws", str(folder), "--no-build",
                               "--tag-prefix", "unum-e2e/", "--moto-endpoint", moto, "--input", json.dumps(size),
                               "--compact", "--retry-delay", "0.2"],
                              cwd=REPO, capture_output=True, text=True, timeout=300)

    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    text = lzma.decompress((WORDCOUNT / "corpus" / "shakespeare.txt.xz").read_bytes())[:result["corpus_bytes"]]
    counts = collections.Counter(re.findall(rb"[a-z]+(?:'[a-z]+)*", text.lower()))
    top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:5]
    assert result == {"corpus_bytes": result["corpus_bytes"], "mappers": 5, "reducers": 3,
                      "words": sum(counts.values()), "distinct": len(counts),
                      "top": [[word.decode(), n] for word, n in top]}
    assert "5 function containers behind http://127.0.0.1:" in proc.stderr
