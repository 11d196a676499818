"""Shared fixtures for the container tests of both clouds: the Docker engine, the local OS
image, the ONE unum base image and function images built once per session.

They start what is missing (dockerd, the mmdebstrap OS image) through the same scripts `.ci/run`
uses (`localstack/setup.d/`), so `pytest -m e2e` works on a machine where those ran once; when
that fails the test errors with the reason: these tests never skip.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

# testcontainers' reaper image (Ryuk) cannot be pulled here; containers are stopped by fixtures.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "localstack" / "setup.d"
BASE_OS_IMAGE = os.environ.get("UNUM_TEST_BASE_OS_IMAGE", "local/debian-python:bookworm")
E2E_TAG_PREFIX = "unum-e2e/"


def _run_setup(script: str) -> None:
    result = subprocess.run(["bash", str(SETUP / script)], capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        pytest.fail(f"{script} failed (exit {result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}",
                    pytrace=False)


@pytest.fixture(scope="session")
def docker_client():
    """A docker SDK client; starts dockerd (setup.d/10-docker.sh) when none answers."""
    from builder.images import docker_client as connect
    from unum_entry.errors import BuildError

    try:
        return connect()
    except BuildError:
        _run_setup("10-docker.sh")
        return connect()


@pytest.fixture(scope="session")
def base_os_image(docker_client) -> str:
    """The locally made OS image (no registry can be pulled from here)."""
    import docker

    try:
        docker_client.images.get(BASE_OS_IMAGE)
    except docker.errors.ImageNotFound:
        _run_setup("20-base-image.sh")
    return BASE_OS_IMAGE


@pytest.fixture(scope="session")
def base_tag(docker_client, base_os_image) -> str:
    """The unum base image built from the code under test (cached layers make a rebuild cheap)."""
    from builder.images import ensure_base

    return ensure_base(docker_client, base_image=base_os_image, rebuild=True, progress=lambda line: None)


@pytest.fixture(scope="session")
def built_images(docker_client, base_tag) -> Callable[[str | Path], dict[str, str]]:
    """`built_images(folder)` → {function: image tag}; each workflow is built once per session."""
    from builder.images import build_images

    cache: dict[str, dict[str, str]] = {}

    def build(folder: str | Path) -> dict[str, str]:
        key = str(Path(folder).resolve())
        if key not in cache:
            cache[key] = {image.function: image.tag for image in
                          build_images(docker_client, folder, base_tag=base_tag, tag_prefix=E2E_TAG_PREFIX,
                                       progress=lambda line: None)}
        return cache[key]

    return build
