"""stderr, the CLI's channel for messages (stdout carries results only): one-line messages, the
runtime's log records as one line each, and a status line redrawn in place on a terminal.

On a terminal, a message first clears the status line (the next `status` redraws it); anywhere
else nothing is drawn in place, so logs and CI output hold messages only.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
from typing import TextIO

_CLEAR = "\r\x1b[K"  # carriage return, erase to the end of the line


class Console:
    """Writes messages and (on a terminal) one status line to `stream` (default: stderr at the
    time of the call). Thread-safe: the runtime logs from worker threads. Every Console drawing
    on the same stream shares its status line (the CLI's log handler has a Console of its own),
    so a message from any of them clears the line first."""

    _LOCK = threading.RLock()  # re-entrant: Ctrl-C may land while the main thread draws
    _STATUS: dict[int, str] = {}  # id(stream) -> the status line drawn on it now

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = Console._LOCK

    @property
    def _status(self) -> str:
        return Console._STATUS.get(id(self.stream), "")

    @_status.setter
    def _status(self, line: str) -> None:
        if line:
            Console._STATUS[id(self.stream)] = line
        else:
            Console._STATUS.pop(id(self.stream), None)

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    @property
    def is_terminal(self) -> bool:
        try:
            return self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    def message(self, text: str) -> None:
        """One line (clearing the status line first on a terminal)."""
        with self._lock:
            prefix = _CLEAR if self._status else ""
            self._status = ""
            self.stream.write(f"{prefix}{text}\n")
            self.stream.flush()

    def status(self, text: str) -> None:
        """Show `text` as the status line, cut to the terminal's width; nothing off a terminal."""
        if not self.is_terminal:
            return
        line = text[:max(10, self._columns() - 1)]
        with self._lock:
            self._status = line
            self.stream.write(f"{_CLEAR}{line}")
            self.stream.flush()

    @property
    def columns(self) -> int:
        """The width of the terminal the status line is drawn on."""
        return self._columns()

    def _columns(self) -> int:
        """The terminal's width: $COLUMNS, else the size of the terminal we draw on, else 100."""
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
        if os.environ.get("COLUMNS", "").isdigit() or not columns:
            return shutil.get_terminal_size((columns or 100, 24)).columns
        return columns

    def clear_status(self) -> None:
        with self._lock:
            if self._status:
                self.stream.write(_CLEAR)
                self.stream.flush()
                self._status = ""


class ConsoleLines:
    """A text stream whose every line becomes a `Console.message` (so a line written from a
    worker thread never lands inside the status line)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def write(self, text: str) -> int:
        for line in text.splitlines():
            self.console.message(line)
        return len(text)

    def flush(self) -> None:
        """Every line is flushed as it is written."""


REPEATS_SHOWN = 3  # lines of one kind shown (unless verbose): a 2,000-item map failing logs 6,000


class OneLineLogHandler(logging.Handler):
    """Log records as `warning: …` lines through a Console; tracebacks only when `verbose`.
    Unless `verbose`, each kind of line (logger and message template) is shown REPEATS_SHOWN
    times, then one line says the rest are hidden."""

    def __init__(self, console: Console, *, verbose: bool = False) -> None:
        super().__init__(logging.DEBUG if verbose else logging.WARNING)
        self.console = console
        self.verbose = verbose
        self._shown: dict[tuple[str, str], int] = {}
        self._shown_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if not self.verbose and self._hidden(record):
                return
            text = f"{record.levelname.lower()}: {record.getMessage()}"
            if self.verbose and record.exc_info:
                text += "\n" + logging.Formatter().formatException(record.exc_info)
            elif not self.verbose:
                text = " ".join(text.split("\n"))
            self.console.message(text)
        except Exception:  # a log line must never take the command down
            self.handleError(record)

    def _hidden(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        with self._shown_lock:
            seen = self._shown[key] = self._shown.get(key, 0) + 1
        if seen == REPEATS_SHOWN + 1:
            kind = " ".join(str(record.msg).replace("%s", "…").replace("%d", "…").split())
            self.console.message(f"{record.levelname.lower()}: more lines like {kind!r} hidden (-v shows every one)")
        return seen > REPEATS_SHOWN


def route_logs(console: Console, *, verbose: bool) -> None:
    """Send the `unum` loggers (runtime, platforms) to `console`, one line per record."""
    logger = logging.getLogger("unum")
    for handler in list(logger.handlers):
        if isinstance(handler, OneLineLogHandler):
            logger.removeHandler(handler)
    logger.addHandler(OneLineLogHandler(console, verbose=verbose))
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False
