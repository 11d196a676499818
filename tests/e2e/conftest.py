"""Shared fixtures for the container tests of both clouds: the Docker engine, the local OS
image, the ONE unum base image and function images built once per session.

They start what is missing (dockerd, the mmdebstrap OS image) through the same scripts `.ci/run`
uses (`localstack/setup.d/`), so `pytest -m e2e` works on a machine where those ran once; when
that fails the test errors with the reason: these tests never skip.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

# testcontainers' reaper image (Ryuk) cannot be pulled here; containers are stopped by fixtures.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "localstack" / "setup.d"
BASE_OS_IMAGE = os.environ.get("UNUM_TEST_BASE_OS_IMAGE", "local/debian-python:bookworm")
E2E_TAG_PREFIX = "unum-e2e/"
BASE_REPOSITORY = "unum/base"


def _run_setup(script: str) -> None:
    result = subprocess.run(["bash", str(SETUP / script)], capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        pytest.fail(f"{script} failed (exit {result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}",
                    pytrace=False)


@pytest.fixture(scope="session")
def docker_client():
    """A docker SDK client; starts dockerd (setup.d/10-docker.sh) when none answers."""
    from builder.image.build import docker_client as connect
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


def base_content_key(os_image_id: str) -> str:
    """A hash of everything `builder.image.build.build_base` puts into the base image."""
    from builder.image.wheelhouse import DEFAULT_TARGET, base_requirements, download_wheels, project_root, write_unum_wheel

    root = project_root()
    requirements = base_requirements(root)
    wheels = sorted(p.name for p in download_wheels(requirements, target=DEFAULT_TARGET).glob("*.whl"))  # cached
    digest = hashlib.sha256()
    digest.update((root / "Dockerfile.base").read_bytes())
    digest.update(json.dumps([sorted(requirements), wheels, os_image_id], sort_keys=True).encode())
    with tempfile.TemporaryDirectory(prefix="unum-wheel-") as tmp:
        digest.update(write_unum_wheel(root, Path(tmp)).read_bytes())  # deterministic zip
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def base_tag(docker_client, base_os_image) -> str:
    """`unum/base:src-<hash>`: built only when no image of that content exists yet."""
    import docker

    from builder.image.build import ensure_base

    tag = f"{BASE_REPOSITORY}:src-{base_content_key(docker_client.images.get(base_os_image).id)}"
    try:
        docker_client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    ensure_base(docker_client, base_image=base_os_image, tag=tag, rebuild=False, progress=lambda line: None)
    for image in docker_client.images.list(name=BASE_REPOSITORY):  # drop stale content tags
        for stale in (t for t in image.tags if t.startswith(f"{BASE_REPOSITORY}:src-") and t != tag):
            try:  # the image goes too once untagged, unless function images still build on it
                docker_client.images.remove(stale, noprune=False)
            except docker.errors.APIError:
                pass  # in use by a container or another engine call: harmless to keep
    return tag


@pytest.fixture(scope="session")
def local_registry(docker_client) -> str:
    """The registry the README pushes to, `127.0.0.1:5000` (started by setup.d/40-registry.sh)."""
    _run_setup("40-registry.sh")
    return "127.0.0.1:5000"


@pytest.fixture(scope="session")
def built_images(docker_client, base_tag) -> Callable[[str | Path], dict[str, str]]:
    """`built_images(folder)` → {function: image tag}; each workflow is built once per session."""
    from builder.image.build import build_images

    cache: dict[str, dict[str, str]] = {}

    def build(folder: str | Path) -> dict[str, str]:
        key = str(Path(folder).resolve())
        if key not in cache:
            cache[key] = {image.function: image.tag for image in
                          build_images(docker_client, folder, base_tag=base_tag, tag_prefix=E2E_TAG_PREFIX,
                                       progress=lambda line: None)}
        return cache[key]

    return build
