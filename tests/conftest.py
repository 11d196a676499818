"""Shared pytest options. Layers are selected by markers: unit, integration, e2e."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--schedules", type=int, default=None,
                     help="fault schedules per store in the exactly-once suite (default: the CI count)")


@pytest.fixture(scope="session")
def schedules(request: pytest.FixtureRequest) -> int | None:
    return request.config.getoption("--schedules")
