"""Function images: requirements installed hermetically from the builder's wheelhouse into their
own layer, and a code change rebuilding only the last step (cache hits for the rest)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.e2e

APP = "import toolz\n\ndef handler(event, context):\n    return {{'version': {version}, 'firsts': toolz.first(event)}}\n"


def test_requirements_layer_is_cached_when_code_changes(tmp_path: Path, docker_client, base_tag) -> None:
    from builder.image.build import build_images

    folder = tmp_path / "reqs"
    write_workflow(folder, name="reqs", entry="Echo", functions={"Echo": FunctionSource(APP.format(version=1))})
    (folder / "Echo" / "requirements.txt").write_text("toolz>=0.12\n")

    first_lines: list[str] = []
    (first,) = build_images(docker_client, folder, base_tag=base_tag, tag_prefix="unum-e2e/", progress=first_lines.append)
    probe = "import sys; sys.path.insert(0, '/var/task'); import app; print(app.handler([7, 8], None))"
    out = docker_client.containers.run(first.tag, entrypoint=["python3", "-c", probe], network_mode="host", remove=True)
    assert out.decode().strip() == "{'version': 1, 'firsts': 7}"

    # A change no earlier run made: its layer cannot come from the engine's cache of a past session.
    (folder / "Echo" / "app.py").write_text(APP.format(version=2) + f"# change {uuid.uuid4().hex}\n")
    lines: list[str] = []
    (second,) = build_images(docker_client, folder, base_tag=base_tag, tag_prefix="unum-e2e/", progress=lines.append)
    steps = [line for line in lines if "Step " in line]
    cached = [line for line in lines if "Using cache" in line]
    assert len(steps) == 4 and len(cached) == 2, lines  # FROM, COPY wheels (cached), RUN pip (cached), COPY code
    assert steps[-1].endswith("COPY function/ /var/task/")
    out = docker_client.containers.run(second.tag, entrypoint=["python3", "-c", probe], network_mode="host", remove=True)
    assert out.decode().strip() == "{'version': 2, 'firsts': 7}"
