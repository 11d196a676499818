"""Ctrl-C and SIGTERM as exceptions the command line catches, and why they are our own classes.

Within `raised()` (the main thread only), SIGINT raises `Interrupted` and, with `sigterm=True`,
SIGTERM raises `Terminated`; both are KeyboardInterrupts, so every `except KeyboardInterrupt`
still sees them. On leaving, the previous handlers are back.

Why not the interpreter's own KeyboardInterrupt: CPython (3.11, started as `python -m`) marks an
exact KeyboardInterrupt that leaves code run by `exec` of a string - `dataclasses` and
`namedtuple` build their methods that way, so any lazy import may - as unhandled, and at exit
kills the process with SIGINT whatever `main` returned: a Ctrl-C'd `run` then ended by the
signal, not with its exit code 130, about once in forty. Only the exact class is marked.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM: stop as Ctrl-C does."""


@contextmanager
def raised(*, sigterm: bool = False) -> Iterator[None]:
    """Within: SIGINT raises `Interrupted` (and, if `sigterm`, SIGTERM raises `Terminated`) in
    the main thread. Called from another thread (a test's), it installs nothing."""
    with ExitStack() as handlers:
        _raise_on(signal.SIGINT, Interrupted, handlers)
        if sigterm:
            _raise_on(signal.SIGTERM, Terminated, handlers)
        yield


def _raise_on(signum: signal.Signals, error: type[KeyboardInterrupt], handlers: ExitStack) -> None:
    def stop(received: int, frame: Any) -> None:
        raise error()

    try:
        previous = signal.signal(signum, stop)
    except ValueError:  # not the main thread
        return
    handlers.callback(signal.signal, signum, previous)
