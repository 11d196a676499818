"""The local stack: real cloud APIs served by emulators on loopback, for tests and local runs.

`MotoServer` runs moto's server (DynamoDB, SQS, S3, ECR, ...) as a separate process speaking
HTTP on 127.0.0.1, so clients go through the same botocore HTTP path they use against AWS:

    with MotoServer() as moto:
        store = open_store(f"dynamodb://my-table?endpoint={moto.endpoint}&create=1")

Only loopback addresses are ever used.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

LOOPBACK = "127.0.0.1"

# Talk to the emulator directly even when $HTTP_PROXY is set: it is on loopback.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class LocalStackError(RuntimeError):
    """An emulator could not be started or did not answer."""


class _ExitedEarlyError(LocalStackError):
    """The server process ended before answering (e.g. its port was taken)."""


class MotoServer:
    """moto's server as a subprocess on a free loopback port; a context manager.

    `start()` returns once the server answers HTTP; `.endpoint` is its URL (`endpoint_url` for
    boto3). `reset()` drops every resource (all services); `stop()` ends the process.
    The server's output goes to `log_path` (a file in a temp dir unless given).
    `serialized` (default): one request at a time, as atomic as DynamoDB's requests are
    (builder/local_stack/moto_serialized.py says why moto's own threaded server is not); False runs
    `python -m moto.server` as it is.
    """

    def __init__(self, *, port: int | None = None, start_timeout: float = 30.0,
                 stop_timeout: float = 5.0, log_path: str | os.PathLike[str] | None = None,
                 serialized: bool = True) -> None:
        self.serialized = serialized
        self.port = port
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._log_path = Path(log_path) if log_path is not None else None
        self._log_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> MotoServer:
        """Start the server and wait until it answers. Returns self."""
        if self._process is not None:
            return self
        if importlib.util.find_spec("moto") is None or importlib.util.find_spec("flask") is None:
            raise LocalStackError(f"moto's server is not installed for {sys.executable}: "
                                  "pip install 'moto[server]'")
        if self._log_path is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="unum-moto-"))
            self._log_path = self._log_dir / "moto-server.log"
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        pick_port = self.port is None
        for attempt in range(3 if pick_port else 1):
            if pick_port:
                self.port = free_port()
            with open(self._log_path, "ab") as log:
                command = ([sys.executable, "-m", "builder.local_stack.moto_serialized", LOOPBACK, str(self.port)]
                           if self.serialized else
                           [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(self.port)])
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C in a terminal reaches pytest, not the server
                )
            self._process = process
            try:
                self._wait_until_ready(process)
                return self
            except _ExitedEarlyError:
                # Most likely another process took the free port in between: pick another.
                self.stop(keep_log=True)
                if attempt == 2 or not pick_port:
                    raise
            except BaseException:
                self.stop(keep_log=True)
                raise
        return self

    def stop(self, *, keep_log: bool = False) -> None:
        """Terminate the server (kill it if it does not exit within `stop_timeout`). Idempotent.
        The temp log dir is removed unless `keep_log` (a log path given by the caller is kept)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=self.stop_timeout)
        if self._log_dir is not None and not keep_log:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None
            self._log_path = None

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # ---- use -----------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:PORT`, the `endpoint_url` for boto3 clients."""
        if self._process is None:
            raise LocalStackError("moto server is not running: call start() first")
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def reset(self) -> None:
        """Drop every resource of every service (moto's `POST /moto-api/reset`)."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", data=b"", method="POST")
        with _DIRECT.open(request, timeout=10) as response:
            response.read()

    def log_tail(self, lines: int = 30) -> str:
        """The last lines the server wrote (for error messages)."""
        if self._log_path is None or not self._log_path.exists():
            return "(no log)"
        text = self._log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:]) or "(log is empty)"

    # ---- helpers -------------------------------------------------------------------------

    def _wait_until_ready(self, process: subprocess.Popen[bytes]) -> None:
        url = f"http://{LOOPBACK}:{self.port}/moto-api/"
        deadline = time.monotonic() + self.start_timeout
        delay = 0.05
        while True:
            code = process.poll()
            if code is not None:
                raise _ExitedEarlyError(
                    f"moto server exited with code {code} before answering on {LOOPBACK}:{self.port}; "
                    f"log {self._log_path}:\n{self.log_tail()}")
            try:
                with _DIRECT.open(url, timeout=1) as response:
                    response.read()
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() >= deadline:
                raise LocalStackError(
                    f"moto server did not answer on {url} within {self.start_timeout:.0f} s; "
                    f"log {self._log_path}:\n{self.log_tail()}")
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]
