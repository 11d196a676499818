"""Fixtures for the GCP e2e tests: the emulators (shared with tests/integration/gcp) and the
function images, built once per session on the ONE unum base image (`builder.images`)."""

from __future__ import annotations

import os

import pytest

from tests.integration.gcp.conftest import firestore_emulator, pubsub_emulator  # noqa: F401 (fixtures)

BASE_OS_IMAGE = os.environ.get("UNUM_TEST_BASE_OS_IMAGE", "local/debian-python:bookworm")


@pytest.fixture(scope="session")
def docker_client():
    from builder.images import docker_client as connect

    return connect()  # BuildError naming the problem when no engine answers: fail, never skip


@pytest.fixture(scope="session")
def base_tag(docker_client) -> str:
    from builder.images import ensure_base

    # rebuild: the unum wheel layer must carry the code under test (cached layers make it cheap)
    return ensure_base(docker_client, base_image=BASE_OS_IMAGE, rebuild=True)


@pytest.fixture(scope="session")
def built_images(docker_client, base_tag):
    """workflow folder name -> {function: image tag}, built on first request."""
    from builder.images import build_images

    cache: dict[str, dict[str, str]] = {}

    def build(folder) -> dict[str, str]:
        key = str(folder)
        if key not in cache:
            cache[key] = {image.function: image.tag for image in
                          build_images(docker_client, folder, base_tag=base_tag, tag_prefix="unum-e2e-gcp/",
                                       progress=lambda line: None)}
        return cache[key]

    return build
