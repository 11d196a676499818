"""The unum paper's four applications (NSDI'23 §5) as runnable apps, through the real CLI.

`python -m builder run` on each app in `images/` with small sizes — wordcount (Step Functions,
262 mappers × 250 reducers by default) over the shipped Shakespeare corpus, ExCamera in
hand-written IR (neighbour join) and as the Map-based state machine, the IoT pipeline and text
processing as state machines — with results checked against `expected.json` or an independent
computation; wordcount and ExCamera once more on DynamoDB with their data in S3 (both moto). The
data-heavy apps pass object keys, not data: their checkpoints stay small whatever the input.
"""

from __future__ import annotations

import collections
import hashlib
import json
import lzma
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest


pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "images"
CORPUS = IMAGES / "wordcount" / "corpus" / "shakespeare.txt.xz"
CORPUS_SHA256 = "1cb3c4bee669e3cc307f1bc2f6e75a9c7cd46c12c6303670e99e36f02ccad656"


def run_cli(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m builder ARGS...` from the repository root."""
    return subprocess.run([sys.executable, "-m", "builder", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def run_app(app: str | Path, workflow_input: dict | Path, store: str | Path) -> dict:
    """Run one app with `--compact` and return its result (the run must succeed, no traceback)."""
    given = f"@{workflow_input}" if isinstance(workflow_input, Path) else json.dumps(workflow_input)
    proc = run_cli("run", app, "--input", given, "--store", store, "--compact")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def expected(app: str) -> dict:
    return json.loads((IMAGES / app / "expected.json").read_text())


def independent_count(text: bytes, top: int) -> dict:
    """Word counts over `text` with a plain Counter (no ranges, no partitions)."""
    counts = collections.Counter(re.findall(rb"[a-z]+(?:'[a-z]+)*", text.lower()))
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:top]
    return {"words": sum(counts.values()), "distinct": len(counts), "top": [[w.decode(), n] for w, n in ranked]}


@pytest.fixture(scope="module")
def corpus() -> bytes:
    return lzma.decompress(CORPUS.read_bytes())


def dynamodb_url(endpoint: str) -> str:
    return f"dynamodb://unum-apps-{uuid.uuid4().hex[:10]}?endpoint={endpoint}&create=1"


def s3_bucket(endpoint: str) -> tuple[str, Any]:
    """(an objects URL for a new bucket on moto, which the entry function creates; an S3 client)."""
    import boto3

    bucket = f"unum-apps-{uuid.uuid4().hex[:10]}"
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    return f"s3://{bucket}?endpoint={endpoint}&create=1", (client, bucket)


def bucket_keys(s3: tuple[Any, str]) -> list[str]:
    client, bucket = s3
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def largest_record(store: Path) -> int:
    """The largest record file the file store wrote (checkpoints, sets, results), in bytes; the
    embedded engine's delivery queue (queue.db and its WAL, kept in the same folder) is no record."""
    return max(p.stat().st_size for p in store.rglob("*") if p.is_file() and not p.name.startswith("queue.db"))


# ---- wordcount -----------------------------------------------------------------------------

def test_wordcount_corpus_is_the_documented_public_domain_text(corpus: bytes) -> None:
    assert hashlib.sha256(corpus).hexdigest() == CORPUS_SHA256
    assert len(corpus) == 5_057_281 and corpus.isascii()
    assert b"gutenberg" not in corpus.lower()  # shipped without the Project Gutenberg licence text
    licence = (IMAGES / "wordcount" / "corpus" / "LICENCE.md").read_text()
    assert "public domain" in licence and CORPUS_SHA256 in licence
    for function in ("Partition", "Mapper"):  # each function image carries the corpus
        linked = IMAGES / "wordcount" / "functions" / function / "shakespeare.txt.xz"
        assert linked.resolve() == CORPUS.resolve()


def test_wordcount_expected_result_is_the_independent_count(corpus: bytes) -> None:
    want = expected("wordcount")
    assert (want["mappers"], want["reducers"]) == (262, 250)  # the paper's counts are the default
    assert json.loads((IMAGES / "wordcount" / "input.json").read_text()) == \
        {"mappers": 262, "reducers": 250, "corpus_fraction": 1.0, "top": 10}
    assert want["corpus_bytes"] == len(corpus)
    assert {k: want[k] for k in ("words", "distinct", "top")} == independent_count(corpus, 10)


def test_wordcount_whole_corpus_with_few_workers_gives_the_expected_counts(tmp_path: Path) -> None:
    result = run_app(IMAGES / "wordcount" / "statemachine.json",
                     {"mappers": 8, "reducers": 6, "corpus_fraction": 1.0, "top": 10}, tmp_path / "store")

    assert (result["mappers"], result["reducers"]) == (8, 6)
    assert {k: v for k, v in result.items() if k not in ("mappers", "reducers")} == \
        {k: v for k, v in expected("wordcount").items() if k not in ("mappers", "reducers")}


def test_wordcount_small_fraction_more_mappers_than_reducers(tmp_path: Path, corpus: bytes) -> None:
    objects = tmp_path / "bucket"
    result = run_app(IMAGES / "wordcount", {"mappers": 20, "reducers": 3, "corpus_fraction": 0.03, "top": 7,
                                            "objects": f"file://{objects}"}, tmp_path / "store")

    used = result["corpus_bytes"]
    assert 0.03 * len(corpus) <= used < 0.03 * len(corpus) + 200 and corpus[used - 1:used] == b"\n"
    assert (result["mappers"], result["reducers"]) == (20, 3)
    assert {k: result[k] for k in ("words", "distinct", "top")} == independent_count(corpus[:used], 7)
    # the counts went through the bucket (one object per mapper, one per reducer), not the results
    written = sorted(p.name.rsplit("-", 1)[0] for p in objects.rglob("*") if p.is_file())
    assert written == [f"map-{i:05d}" for i in range(20)] + [f"reduce-{r:05d}" for r in range(3)]
    # the store holds keys and item lists (O(mappers)), not the counts: a fraction of the bucket
    records = sum(p.stat().st_size for p in (tmp_path / "store").rglob("*")
                  if p.is_file() and not p.name.startswith("queue.db"))  # the delivery queue is no record
    assert records < folder_bytes(objects) / 3


def test_wordcount_on_dynamodb_with_its_data_in_s3(moto_server, corpus: bytes) -> None:
    objects, s3 = s3_bucket(moto_server.endpoint)
    result = run_app(IMAGES / "wordcount", {"mappers": 6, "reducers": 4, "corpus_fraction": 0.02, "top": 5,
                                            "objects": objects}, dynamodb_url(moto_server.endpoint))

    assert {k: result[k] for k in ("words", "distinct", "top")} == \
        independent_count(corpus[:result["corpus_bytes"]], 5)
    keys = bucket_keys(s3)
    assert [k.rsplit("/", 1)[1].rsplit("-", 1)[0] for k in keys] == \
        [f"map-{i:05d}" for i in range(6)] + [f"reduce-{r:05d}" for r in range(4)]


def test_wordcount_objects_url_must_be_a_folder_or_s3(tmp_path: Path) -> None:
    proc = run_cli("run", IMAGES / "wordcount", "--input", '{"objects": "gs://bucket"}', "--store", tmp_path / "s")

    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "expected s3://BUCKET" in proc.stderr.strip().splitlines()[-1]


# ---- ExCamera ------------------------------------------------------------------------------

def excamera_properties(chunk_sizes: list[int], width: int = 160, height: int = 90, fps: int = 24) -> dict:
    """What a correct run reports for these chunk sizes (independent of the libvpx version)."""
    return {"codec": "vp8", "width": width, "height": height, "fps": fps, "chunks": len(chunk_sizes),
            "frames": sum(chunk_sizes), "decoded_frames": sum(chunk_sizes), "shown_keyframes": 1,
            "hidden_reference_frames": len(chunk_sizes) - 1, "all_chunks_decodable": True,
            "frames_match_source": True}


def test_excamera_default_input_gives_the_expected_properties(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("UNUM_OBJECTS", str(tmp_path / "bucket"))  # the env var, when the input names none
    result = run_app(IMAGES / "excamera", IMAGES / "excamera" / "input.json", tmp_path / "store")

    assert result == expected("excamera") == excamera_properties([16] * 6)
    written = sorted(p.name.rsplit("-", 1)[0] for p in (tmp_path / "bucket").rglob("*") if p.is_file())
    assert written == sorted([f"vpxenc-{i:05d}" for i in range(6)] + [f"state-{i:05d}" for i in range(5)]
                             + [f"xcenc-{i:05d}" for i in range(6)])
    assert largest_record(tmp_path / "store") < 4_000  # packets and states travel as keys


def test_excamera_uneven_chunks_ir_and_step_functions_agree(tmp_path: Path) -> None:
    size = {"seconds": 1.5, "chunk_frames": 10, "width": 96, "height": 54}  # 36 frames: 10 10 10 6
    ir = run_app(IMAGES / "excamera", size, tmp_path / "ir")
    sfn = run_app(IMAGES / "excamera-sfn" / "statemachine.json", size, tmp_path / "sfn")

    assert ir == sfn == excamera_properties([10, 10, 10, 6], width=96, height=54)


def test_excamera_single_chunk(tmp_path: Path) -> None:
    result = run_app(IMAGES / "excamera", {"seconds": 0.25}, tmp_path / "store")  # 6 frames, 1 chunk

    assert result == excamera_properties([6])


def test_excamera_neighbour_join_on_dynamodb_with_its_data_in_s3(moto_server) -> None:
    objects, s3 = s3_bucket(moto_server.endpoint)
    result = run_app(IMAGES / "excamera", {"seconds": 1, "chunk_frames": 6, "objects": objects},
                     dynamodb_url(moto_server.endpoint))

    assert result == excamera_properties([6] * 4)
    assert len(bucket_keys(s3)) == 4 + 3 + 4  # vpxenc and xcenc per chunk, a decoder state per neighbour


def test_excamera_without_the_encoder_fails_in_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "no-pyav" / "av"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text('raise ImportError("No module named \'av\' (hidden by the test)")\n')
    proc = subprocess.run([sys.executable, "-m", "builder", "run", str(IMAGES / "excamera"), "--input", "{}",
                           "--store", str(tmp_path / "store")], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(blocker.parent)})

    assert proc.returncode == 1 and proc.stdout == ""
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "'Split' after 1 attempt(s): EncoderMissing: ExCamera needs PyAV" in last
    assert "pip install av numpy" in last


def test_excamera_rejects_an_odd_frame_size(tmp_path: Path) -> None:
    proc = run_cli("run", IMAGES / "excamera", "--input", '{"width": 161}', "--store", tmp_path / "store")

    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "width and height must be even" in proc.stderr.strip().splitlines()[-1]


# ---- the IoT pipeline and text processing as state machines --------------------------------

@pytest.mark.parametrize("app", ["iot-pipeline", "text-processing"])
def test_state_machine_version_matches_the_ir_version(app: str, tmp_path: Path) -> None:
    sfn = IMAGES / f"{app}-sfn"
    result = run_app(sfn / "statemachine.json", sfn / "input.json", tmp_path / "sfn")

    assert result == expected(f"{app}-sfn") == expected(app)
    assert run_app(IMAGES / app, IMAGES / app / "input.json", tmp_path / "ir") == result


def test_iot_state_machine_without_anomalies_ends_at_detect(tmp_path: Path) -> None:
    csv = "oven,1,180.0\noven,2,181.5\noven,3,179.0\n"
    result = run_app(IMAGES / "iot-pipeline-sfn" / "statemachine.json", {"csv": csv}, tmp_path / "store")

    assert result == {"summary": {"oven": {"count": 3, "mean": 180.17, "median": 180.0}}, "malformed": 0,
                      "anomaly_count": 0, "anomalies": []}


@pytest.mark.parametrize(("app", "functions"), [("wordcount", 5), ("excamera-sfn", 6), ("iot-pipeline-sfn", 4),
                                                ("text-processing-sfn", 6)])
def test_state_machines_compile(app: str, functions: int, tmp_path: Path) -> None:
    proc = run_cli("compile", IMAGES / app / "statemachine.json", "--out", tmp_path / app)

    assert proc.returncode == 0, proc.stderr
    assert f"-> {functions} functions" in proc.stdout
    assert (tmp_path / app / "unum-workflow.json").is_file()
