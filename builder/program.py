"""How the user calls us, for the commands we suggest to them: the program's name (`unum` or
`python -m builder`), a command line they can paste, the default store, and how to complete a
waiting Task. Shared by the command line (builder.commands) and the web console (builder.ui)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

DEFAULT_STORE = ".unum/unum.db"  # the SQLite store (unum_entry.stores.sqlite)


def program_name(argv0: str | None = None) -> str:
    """How the user started us: `unum` (the console script) or `python -m builder`."""
    name = Path(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")).name
    return "python -m builder" if name in ("__main__.py", "", "-c") else name


def command_line(*words: str) -> str:
    """A command the user can paste: our program name, then `words` shell-quoted."""
    return " ".join([program_name(), *(shlex.quote(w) for w in words)])


def callback_hint(store_url: str, folder: str | None, functions: str | None = None) -> str:
    """How to complete a waiting Task: `task-success TOKEN --output JSON …` (or task-failure);
    `functions`: the state machine's function code as given (--functions), if it was."""
    store = [] if store_url == DEFAULT_STORE else ["--store", store_url]
    where = ["--workflow", folder] if folder else ["--workflow", "STATEMACHINE"]
    if functions is not None:
        where += ["--functions", functions]
    success = command_line("task-success", "TOKEN", "--output", "JSON", *store, *where)
    return f"{success}   (or: task-failure TOKEN --error E --cause C)"
