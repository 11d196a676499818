"""Fixtures for the GCP e2e tests: the emulators (one of each per session, shared with
tests/integration/gcp: tests/support/gcp_emulators.py), the Docker engine and local OS image
(shared: tests/e2e/conftest.py) and the function images, built on the ONE unum base image
(`builder.image.build`).

The base is tagged by the content it is built from (`unum/base:src-<hash>` of Dockerfile.base,
the dependency wheels, the unum wheel and the OS image), so a session whose sources did not change
reuses it without a build; function images are rebuilt through Docker's layer cache (a no-op
when neither base nor code changed). Tags use their own prefix (`unum-e2e-gcp/`) so a
concurrent AWS e2e run never swaps images under these tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

GCP_TAG_PREFIX = "unum-e2e-gcp/"


@pytest.fixture(scope="session")
def built_images(docker_client, base_tag) -> Callable[[str | Path], dict[str, str]]:
    """`built_images(folder)` -> {function: image tag}; each workflow is built once per session,
    two functions at a time (on the vfs storage driver a build step is mostly copying)."""
    import concurrent.futures

    from builder.image.build import build_function, resolve_functions

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
