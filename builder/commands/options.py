"""Options several commands share: validated value types, and flags that fall back to environment
variables (functions-framework's convention: `--store` ← `UNUM_STORE`, `--workers` ←
`UNUM_WORKERS`, `--timeout` ← `UNUM_TIMEOUT`, `--durability` ← `UNUM_DURABILITY`; the function
images read `UNUM_STORE` too).

A value from the environment is checked like one from the command line; a bad one is a usage
error naming the variable (exit 2).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from builder.program import DEFAULT_STORE as DEFAULT_STORE  # its home: builder.program

if TYPE_CHECKING:
    from unum_entry.stores.base import Store

STORE_ENV = "UNUM_STORE"
DURABILITY_ENV = "UNUM_DURABILITY"
DURABILITIES = ("full", "normal", "off")
WORKERS_ENV = "UNUM_WORKERS"
HELPERS_ENV = "UNUM_HELPERS"  # (unum_entry.local.helpers.SWITCH)
TIMEOUT_ENV = "UNUM_TIMEOUT"


class _FromEnv(str):
    """A default read from the environment: a string that remembers its variable, so a bad value
    is reported as `$NAME`'s (argparse parses string defaults with the option's type)."""

    envvar: str

    def __new__(cls, value: str, envvar: str) -> _FromEnv:
        text = super().__new__(cls, value)
        text.envvar = envvar
        return text


def positive_int(text: str) -> int:
    """A whole number ≥ 1 (argparse type)."""
    return _checked(text, int, lambda value: value >= 1, "a whole number >= 1")


def non_negative_int(text: str) -> int:
    """A whole number ≥ 0 (argparse type)."""
    return _checked(text, int, lambda value: value >= 0, "a whole number >= 0")


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0 (argparse type)."""
    return _checked(text, float, lambda value: value > 0 and math.isfinite(value), "seconds > 0")


def non_negative_seconds(text: str) -> float:
    """A finite number of seconds >= 0 (argparse type)."""
    return _checked(text, float, lambda value: value >= 0 and math.isfinite(value), "seconds >= 0")


def _checked(text: str, convert: Callable[[str], Any], accept: Callable[[Any], bool], expected: str) -> Any:
    """`convert(text)` if it converts and `accept`s, else the usage error saying what was expected."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, found {text!r}") from None
    if not accept(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, found {text!r}")
    return value


def _naming_env(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse_value(text: str) -> Any:
        try:
            return parse(text)
        except argparse.ArgumentTypeError as exc:
            if isinstance(text, _FromEnv):
                raise argparse.ArgumentTypeError(f"{exc} (from ${text.envvar})") from None
            raise
    parse_value.__name__ = parse.__name__
    return parse_value


def env_option(parser: argparse.ArgumentParser, flag: str, *, envvar: str, default: Any,
               type: Callable[[str], Any] = str, help: str, default_text: str | None = None) -> None:
    """Add `flag` whose default is `$envvar` when set (parsed and checked as `type`), else
    `default`; the help says both (`default_text`: what the default means, when not its value)."""
    raw = os.environ.get(envvar)
    value: Any = _FromEnv(raw, envvar) if raw else default
    parser.add_argument(flag, type=_naming_env(type), default=value,
                        help=f"{help} (default: ${envvar}, else {default if default_text is None else default_text})")


def store_location(text: str) -> str:
    """A store URL, database file or folder (argparse type): not empty (an unset variable must not
    turn the current folder into a store)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a store URL, database file or folder, found {text!r} "
                                         "(an unset variable?)")
    return text


def add_store_option(parser: argparse.ArgumentParser, help: str = "store URL, database file or folder") -> None:
    """`--store`, falling back to `$UNUM_STORE`, then `.unum/unum.db`."""
    env_option(parser, "--store", envvar=STORE_ENV, default=DEFAULT_STORE, type=store_location, help=help)


def durability(text: str) -> str:
    """A SQLite store's durability setting (argparse type): full, normal or off."""
    return _checked(text, str.lower, lambda value: value in DURABILITIES, "full, normal or off")


def add_durability_option(parser: argparse.ArgumentParser) -> None:
    """`--durability full|normal|off` of the SQLite store, falling back to `$UNUM_DURABILITY`;
    unset: the store's default (full, or the store URL's `durability=`)."""
    raw = os.environ.get(DURABILITY_ENV)
    default = _FromEnv(raw, DURABILITY_ENV) if raw else None
    parser.add_argument("--durability", type=_naming_env(durability), default=default,
                        help="SQLite store: full (default: a returned commit survives power loss), normal (survives "
                             "a crash of the process; a power loss may lose the last commits) or off (no fsync) "
                             f"(default: ${DURABILITY_ENV}, else the store URL's durability=, else full)")


def store_options(url: str, durability: str | None) -> dict[str, Any]:
    """`open_store`'s keyword arguments for `--durability`: it applies to the SQLite store only
    (given on the command line for another store it is a usage error; from the environment it
    is ignored there)."""
    from unum_entry.errors import UnumError
    from unum_entry.stores.sqlite import is_sqlite_location

    if durability is None:
        return {}
    if is_sqlite_location(url):
        return {"durability": durability}
    if os.environ.get(DURABILITY_ENV):  # argparse has parsed the env default: tell it apart by the variable
        return {}
    raise UnumError(f"--durability applies to the SQLite store (a .db file or sqlite:// URL), not --store {url}")


def add_wait_options(parser: argparse.ArgumentParser, *, workers: bool, timeout_help: str) -> None:
    """The options of a command that runs a workflow until it stops and prints its result:
    `--workers` (if `workers`; falling back to `$UNUM_WORKERS`, then 8), `--timeout` (`$UNUM_TIMEOUT`,
    then 300 seconds) and `--compact`."""
    if workers:
        env_option(parser, "--workers", envvar=WORKERS_ENV, default=8, type=positive_int,
                   help="concurrent executions")
    env_option(parser, "--timeout", envvar=TIMEOUT_ENV, default=300.0, type=positive_seconds, help=timeout_help)
    parser.add_argument("--compact", action="store_true", help="print the result on one line")


def open_existing_store(url: str) -> Store:
    """`open_store(url)`, refusing a SQLite database file or a file store folder that is missing
    or (a folder) not a unum store (either store would create it)."""
    from pathlib import Path

    from unum_entry.errors import StoreError
    from unum_entry.stores import open_store
    from unum_entry.stores.sqlite import is_sqlite_location, parse_url

    if is_sqlite_location(url):  # SQLite would create a missing database file
        if not parse_url(url)[0].is_file():
            raise StoreError(f"--store {url}: no such database file (run writes its store there; "
                             f"default {DEFAULT_STORE})")
        return open_store(url)
    if "://" not in url or url.startswith("file://"):
        folder = Path(url.removeprefix("file://"))
        if not folder.is_dir():
            raise StoreError(f"--store {url}: no such folder (run writes its store there; default {DEFAULT_STORE})")
        if not (folder / "objects").is_dir():
            raise StoreError(f"--store {url}: not a unum store (no objects/ folder in it)")
    return open_store(url)
