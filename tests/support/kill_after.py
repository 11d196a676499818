"""`python -m tests.support.kill_after N ARGS…`: runs `python -m builder ARGS…` and SIGKILLs
itself right after the N-th store write it makes (create, create_joining, add_to_set, transact,
delete on the store `open_existing_store` opens): a kill -9 at an exact point of a command's
writes, e.g. between `stop`'s claim (write 1) and its failure record (write 2). A command that
makes fewer than N writes runs to its end."""

from __future__ import annotations

import functools
import os
import signal
import sys
from typing import Any

WRITES = ("create", "create_joining", "create_joining_many", "add_to_set", "add_to_set_many", "transact", "delete")


def killing(store: Any, after: int) -> Any:
    """`store` with its write methods wrapped: the process SIGKILLs itself once `after` of them
    have returned."""
    done = [0]
    for name in WRITES:
        method = getattr(store, name, None)
        if method is None:
            continue

        @functools.wraps(method)
        def wrapped(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
            result = _method(*args, **kwargs)
            done[0] += 1
            if done[0] >= after:
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        setattr(store, name, wrapped)
    return store


def main(argv: list[str]) -> int:
    """Patches builder.commands.options.open_existing_store, then runs the builder CLI."""
    after = int(argv[0])
    from builder.commands import options

    opened = options.open_existing_store
    options.open_existing_store = lambda *a, **k: killing(opened(*a, **k), after)  # type: ignore[assignment]
    from builder.cli import main as builder_main

    return builder_main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
