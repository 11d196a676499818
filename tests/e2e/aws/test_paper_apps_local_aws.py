"""The paper's applications as Lambda containers: each app (the state machines compiled) built
into function images and run by `python -m builder local-aws` — the Invoke endpoint, one RIE
container per function, DynamoDB on a moto that applies one request at a time (the fan-ins race
on set shards, which moto's threaded server can lose — see builder/local_stack/moto_serialized.py) — with
wordcount's and ExCamera's data in S3 on the same moto (the containers share no folder). Small
sizes; results checked against expected.json or an independent computation."""

from __future__ import annotations

import collections
import json
import lzma
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from builder.local_stack.process import MotoServer

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]
IMAGES = REPO / "images"
WORDCOUNT = IMAGES / "wordcount"
EXCAMERA_SIZE = {"seconds": 1, "chunk_frames": 8, "width": 64, "height": 36}  # 24 frames in 3 chunks


def workflow_folder(app: str, tmp_path: Path) -> Path:
    """The app's workflow folder; a state machine compiled with the real CLI first."""
    machine = IMAGES / app / "statemachine.json"
    if not machine.is_file():
        return IMAGES / app
    folder = tmp_path / app
    compiled = subprocess.run([sys.executable, "-m", "builder", "compile", str(machine), "--out", str(folder)],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
    assert compiled.returncode == 0, compiled.stderr
    return folder


def local_aws(folder: Path, given: Any, moto: str) -> tuple[Any, str]:
    """`python -m builder local-aws` on images built before: (result, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "builder", "local-aws", str(folder), "--no-build",
                           "--tag-prefix", "unum-e2e/", "--moto-endpoint", moto, "--input", json.dumps(given),
                           "--compact", "--retry-delay", "0.2", "--timeout", "240"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout), proc.stderr


def bucket(moto: str) -> tuple[str, Any, str]:
    import boto3

    name = f"unum-e2e-{uuid.uuid4().hex[:10]}"
    client = boto3.client("s3", endpoint_url=moto, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    return f"s3://{name}?endpoint={moto}&create=1", client, name


def keys(client: Any, name: str) -> list[str]:
    return sorted(o["Key"] for o in client.list_objects_v2(Bucket=name).get("Contents", []))


@pytest.mark.parametrize("app", ["iot-pipeline-sfn", "text-processing-sfn"])
def test_state_machine_app_in_lambda_containers(app: str, built_images, tmp_path: Path) -> None:
    folder = workflow_folder(app, tmp_path)
    images = built_images(folder)
    with MotoServer(serialized=True) as server:
        moto = server.endpoint
        result, stderr = local_aws(folder, json.loads((IMAGES / app / "input.json").read_text()), moto)

    assert result == json.loads((IMAGES / app / "expected.json").read_text())
    assert f"{len(images)} function containers behind http://127.0.0.1:" in stderr


def test_wordcount_state_machine_in_lambda_containers(built_images, tmp_path: Path) -> None:
    folder = workflow_folder("wordcount", tmp_path)
    built_images(folder)
    size = {"mappers": 5, "reducers": 3, "corpus_fraction": 0.01, "top": 5}

    with MotoServer(serialized=True) as server:
        moto = server.endpoint
        objects, s3, name = bucket(moto)
        result, stderr = local_aws(folder, {**size, "objects": objects}, moto)
        written = keys(s3, name)

    text = lzma.decompress((WORDCOUNT / "corpus" / "shakespeare.txt.xz").read_bytes())[:result["corpus_bytes"]]
    counts = collections.Counter(re.findall(rb"[a-z]+(?:'[a-z]+)*", text.lower()))
    top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:5]
    assert result == {"corpus_bytes": result["corpus_bytes"], "mappers": 5, "reducers": 3,
                      "words": sum(counts.values()), "distinct": len(counts),
                      "top": [[word.decode(), n] for word, n in top]}
    assert "5 function containers behind http://127.0.0.1:" in stderr
    # the counts went mapper -> shuffle -> reducer through S3, by key
    assert [k.rsplit("/", 1)[1].rsplit("-", 1)[0] for k in written] == \
        [f"map-{i:05d}" for i in range(5)] + [f"reduce-{r:05d}" for r in range(3)]


@pytest.mark.parametrize("app", ["excamera", "excamera-sfn"])
def test_excamera_in_lambda_containers(app: str, built_images, tmp_path: Path) -> None:
    folder = workflow_folder(app, tmp_path)
    images = built_images(folder)

    with MotoServer(serialized=True) as server:
        moto = server.endpoint
        objects, s3, name = bucket(moto)
        result, stderr = local_aws(folder, {**EXCAMERA_SIZE, "objects": objects}, moto)
        written = keys(s3, name)

    assert result == {"codec": "vp8", "width": 64, "height": 36, "fps": 24, "chunks": 3, "frames": 24,
                      "decoded_frames": 24, "shown_keyframes": 1, "hidden_reference_frames": 2,
                      "all_chunks_decodable": True, "frames_match_source": True}
    assert f"{len(images)} function containers behind http://127.0.0.1:" in stderr
    kinds = collections.Counter(k.rsplit("/", 1)[1].split("-")[0] for k in written)
    # the Map version decodes every chunk (its branches are identical), the IR all but the last
    assert kinds == {"vpxenc": 3, "xcenc": 3, "state": 3 if app == "excamera-sfn" else 2}
