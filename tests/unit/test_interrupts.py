"""builder.commands.interrupts: a Ctrl-C'd command started as `python -m` ends with the exit code
it returns (130), even when the signal lands in code run by `exec` of a string - where CPython
marks a plain KeyboardInterrupt as unhandled and kills the process with SIGINT at exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """\
import contextlib, sys
from builder.commands.interrupts import Interrupted, Terminated, raised

def main() -> int:
    with {within}:
        try:
            open(sys.argv[1], "w").close()
            while True:
                exec("for i in range(10 ** 6): pass")  # as a dataclass being made: the signal lands in here
        except KeyboardInterrupt as stop:
            print(type(stop).__name__, file=sys.stderr)
            return 143 if isinstance(stop, Terminated) else 130

sys.exit(main())
"""


def stopped(tmp_path: Path, within: str, how: signal.Signals) -> tuple[int, str]:
    (tmp_path / "stoppable.py").write_text(PROGRAM.format(within=within))
    started = tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = subprocess.Popen([sys.executable, "-m", "stoppable", str(started)], env=env, cwd=tmp_path, text=True,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    proc.send_signal(how)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err.strip()


def test_ctrl_c_in_exec_code_ends_with_the_exit_code_returned(tmp_path: Path) -> None:
    assert stopped(tmp_path, "raised()", signal.SIGINT) == (130, "Interrupted")


def test_sigterm_is_raised_only_when_asked_for(tmp_path: Path) -> None:
    assert stopped(tmp_path, "raised(sigterm=True)", signal.SIGTERM) == (143, "Terminated")
    assert stopped(tmp_path, "raised()", signal.SIGTERM)[0] == -signal.SIGTERM


def test_without_it_the_interpreter_kills_itself_with_sigint(tmp_path: Path) -> None:
    """The cause, kept visible: were CPython to stop marking it, the module's reason would go."""
    assert stopped(tmp_path, "contextlib.nullcontext()", signal.SIGINT) == (-signal.SIGINT, "KeyboardInterrupt")


def test_the_previous_handlers_are_back_after_it() -> None:
    from builder.commands.interrupts import raised

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with raised(sigterm=True):
        assert signal.getsignal(signal.SIGINT) is not before[0]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
