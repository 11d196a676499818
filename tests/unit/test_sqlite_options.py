"""How a store location and a durability setting are read (no I/O): which URLs and paths name
the SQLite store, its URL options, and `--durability` / `$UNUM_DURABILITY` for `run`."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.commands.options import DURABILITY_ENV, store_options
from unum_entry.errors import StoreError, UnumError
from unum_entry.stores.sqlite import Durability, is_sqlite_location, parse_url

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("url, expected", [
    (".unum/unum.db", True), ("/tmp/x.sqlite", True), ("a.sqlite3", True), ("sqlite:///abs/u.db", True),
    ("sqlite://rel/u", True), (".unum/store", False), ("file:///tmp/x.db", False), ("dynamodb://t", False),
])
def test_which_locations_name_the_sqlite_store(url: str, expected: bool) -> None:
    assert is_sqlite_location(url) is expected


def test_a_url_gives_its_path_and_options() -> None:
    assert parse_url("sqlite:///abs/u.db?durability=off&busy_timeout=2") == (
        Path("/abs/u.db"), {"durability": "off", "busy_timeout": "2"})
    assert parse_url("sqlite://rel/u.db") == (Path("rel/u.db"), {})
    assert parse_url("plain/u.db") == (Path("plain/u.db"), {})
    with pytest.raises(StoreError, match="unknown option"):
        parse_url("sqlite:///u.db?sync=1")
    with pytest.raises(StoreError, match="names no database file"):
        parse_url("sqlite://")


def test_durability_names() -> None:
    assert Durability.parse("FULL") is Durability.FULL
    assert Durability.parse(Durability.OFF) is Durability.OFF
    with pytest.raises(StoreError, match="unknown durability 'fast'"):
        Durability.parse("fast")


def test_durability_applies_to_the_sqlite_store_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DURABILITY_ENV, raising=False)
    assert store_options(".unum/unum.db", None) == {}
    assert store_options(".unum/unum.db", "normal") == {"durability": "normal"}
    with pytest.raises(UnumError, match="--durability applies to the SQLite store"):
        store_options(".unum/store", "off")
    monkeypatch.setenv(DURABILITY_ENV, "off")  # from the environment: ignored by other stores
    assert store_options("dynamodb://t", "off") == {}
