"""Shared pytest options. Layers are selected by markers: unit, integration, e2e."""

from __future__ import annotations

import signal

import pytest
from hypothesis import settings

# Google's emulators, one of each per session for every layer that uses them (integration and e2e).
from tests.support.gcp_emulators import cloud_tasks_emulator, firestore_emulator, pubsub_emulator  # noqa: F401

# No wall-clock deadlines in property tests: a loaded CI machine makes any deadline flaky, and a
# slow example is a benchmark question, not a correctness failure.
settings.register_profile("unum", deadline=None)
settings.load_profile("unum")

# A shell without job control starts background jobs (`.ci/run &`) with SIGINT ignored, and an
# ignored signal stays ignored in every child: the Ctrl-C tests' `run` would never see theirs.
# Tests play a user at a terminal, so their children start with SIGINT's default action.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--schedules", type=int, default=None,
                     help="fault schedules per store in the exactly-once suite (default: the CI count)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (README's test command: `-n 2 --dist loadgroup`) the e2e tests run on one
    worker, one after another as without xdist: they build, tag and push images and start
    containers on one Docker engine and one registry. Every other test is spread over the workers."""
    for item in items:
        if item.nodeid.startswith("tests/e2e/"):
            item.add_marker(pytest.mark.xdist_group("containers"))


@pytest.fixture(scope="session")
def schedules(request: pytest.FixtureRequest) -> int | None:
    return request.config.getoption("--schedules")
