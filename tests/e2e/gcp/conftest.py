"""Fixtures for the GCP e2e tests: the emulators (shared with tests/integration/gcp), the Docker
engine and local OS image (shared: tests/e2e/conftest.py) and the function images, built on the
ONE unum base image (`builder.images`).

The base is tagged by the content it is built from (`unum/base:src-<hash>` of Dockerfile.base,
the dependency wheels, the unum wheel and the OS image), so a session whose sources did not change
reuses it without a build; function images are rebuilt through Docker's layer cache (a no-op
when neither base nor code changed). Tags use their own prefix (`unum-e2e-gcp/`) so a
concurrent AWS e2e run never swaps images under these tests.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.gcp.conftest import firestore_emulator, pubsub_emulator  # noqa: F401 (fixtures)

GCP_TAG_PREFIX = "unum-e2e-gcp/"
BASE_REPOSITORY = "unum/base"


def base_content_key(os_image_id: str) -> str:
    """A hash of everything `builder.images.build_base` puts into the base image."""
    from builder.wheelhouse import DEFAULT_TARGET, base_requirements, download_wheels, project_root, write_unum_wheel

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

    from builder.images import ensure_base

    tag = f"{BASE_REPOSITORY}:src-{base_content_key(docker_client.images.get(base_os_image).id)}"
    try:
        docker_client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    ensure_base(docker_client, base_image=base_os_image, tag=tag, rebuild=False, progress=lambda line: None)
    for image in docker_client.images.list(name=BASE_REPOSITORY):  # drop stale content tags (untag only)
        for stale in (t for t in image.tags if t.startswith(f"{BASE_REPOSITORY}:src-") and t != tag):
            try:
                docker_client.images.remove(stale, force=True, noprune=True)
            except docker.errors.APIError:
                pass  # in use by a container or another engine call: harmless to keep
    return tag


@pytest.fixture(scope="session")
def built_images(docker_client, base_tag) -> Callable[[str | Path], dict[str, str]]:
    """`built_images(folder)` -> {function: image tag}; each workflow is built once per session,
    two functions at a time (on the vfs storage driver a build step is mostly copying)."""
    import concurrent.futures

    from builder.images import build_function, resolve_functions

    cache: dict[str, dict[str, str]] = {}

    def build(folder: str | Path) -> dict[str, str]:
        key = str(Path(folder).resolve())
        if key not in cache:
            workflow, specs = resolve_functions(Path(folder))
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                built = list(pool.map(lambda spec: build_function(docker_client, spec, workflow=workflow, base_tag=base_tag,
                                                                  tag_prefix=GCP_TAG_PREFIX, progress=lambda line: None),
                                      specs))
            cache[key] = {image.function: image.tag for image in built}
        return cache[key]

    return build
