"""`python -m builder ...` with stderr on a pseudo-terminal of a given width (stdout a pipe), as a
user's shell runs it: what the CLI draws only on a terminal (the progress line) can be read."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_on_terminal(args: list[str], columns: int, timeout: float = 90) -> tuple[int, str, str]:
    """(exit code, what was drawn on the terminal (stderr, "\\r\\n" read as "\\n"), stdout), the
    command run from the repository with a 24-row terminal `columns` wide (COLUMNS and LINES left
    out of its environment); the terminal is read for at most `timeout` seconds."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "builder", *args], cwd=REPO, stdout=subprocess.PIPE, stderr=child,
                            text=True, env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")})
    os.close(child)
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    out, _ = proc.communicate(timeout=30)
    os.close(main)
    return proc.returncode, seen.decode().replace("\r\n", "\n"), out
