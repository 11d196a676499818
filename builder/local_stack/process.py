"""Managed processes of the local stack: one lifecycle for every emulator and server it starts.

`ManagedProcess` is a child process on a loopback port: `start()` launches it in a session of its
own with its output in a log file and returns once it answers (bounded by `start_timeout`);
`stop()` ends its whole process group (SIGTERM, then SIGKILL after `stop_timeout`); it is a
context manager. A subclass says what to run (`command()`) and how to know it is up (`ready()`).
`MotoServer` (below), the Firestore and Pub/Sub emulators (`gcp.emulators`), the registry, the
RIE on the host and the function servers (`lambda_containers`, `gcp.functions`) are such processes.

    with MotoServer() as moto:
        store = open_store(f"dynamodb://my-table?endpoint={moto.endpoint}&create=1")

Only loopback addresses are ever used.
"""

from __future__ import annotations

import http.client
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

from unum_entry.errors import UnumError

LOOPBACK = "127.0.0.1"

# Talk to local servers directly even when $HTTP_PROXY is set: they are on loopback.
DIRECT_HTTP = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class LocalStackError(UnumError):
    """A piece of the local stack could not be started or did not answer."""


class ExitedEarlyError(LocalStackError):
    """The process ended before answering (e.g. its port was taken)."""


class Service:
    """Something started and stopped around a block: `with X(...) as x:` is `x.start()` …
    `x.stop()`. Subclasses implement both; `stop()` must be idempotent."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def http_answers(url: str, *, body: bytes | None = None, timeout: float = 1.0) -> bool:
    """True when something answers HTTP GET on `url` (any status; with `body`, a 2xx whose
    stripped body equals it)."""
    try:
        with DIRECT_HTTP.open(url, timeout=timeout) as response:
            data = response.read()
    except urllib.error.HTTPError:
        return body is None  # it answered (cloudevent functions refuse GET with 405)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False
    except http.client.HTTPException:
        # Not HTTP/1: an HTTP/2-only listener (a gRPC server; Netty's GOAWAY "Unexpected HTTP/1.x
        # request: GET /", seen once in CI by the Pub/Sub emulator's probe) - another emulator
        # on the port we picked, or ours before its HTTP/1 side is up. Not ready yet: keep
        # polling; a process that lost the port exits and `start` picks another one.
        return False
    return body is None or data.strip() == body


def port_open(port: int) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:port."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1):
            return True
    except OSError:
        return False


def wait_until(ready: Callable[[], bool], *, timeout: float, what: str,
               gone: Callable[[], str | None] = lambda: None, describe: Callable[[], str] = lambda: "") -> None:
    """Poll `ready()` (backing off from 50 ms to 0.5 s) until it is true. Raises ExitedEarlyError
    as soon as `gone()` returns a reason (e.g. "exited with code 1"; None while alive),
    LocalStackError after `timeout` seconds; both messages name `what` and end with `describe()`
    (e.g. a log tail)."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        reason = gone()
        if reason is not None:
            raise ExitedEarlyError(f"{what}: {reason} before answering; {describe()}".rstrip("; "))
        if ready():
            return
        if time.monotonic() >= deadline:
            raise LocalStackError(f"{what} did not answer within {timeout:.0f} s; {describe()}".rstrip("; "))
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def kill_group(process: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the process group of a child started with `start_new_session` (its group id is
    its pid): children such as gcloud's java go with it."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def end_process(process: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """SIGTERM the child's process group, SIGKILL it after `timeout`; then SIGKILL once more
    for children that outlive their parent. Idempotent."""
    if process is None:
        return
    if process.poll() is None:
        kill_group(process, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(process, signal.SIGKILL)
            process.wait(timeout=timeout)
    kill_group(process, signal.SIGKILL)


class ManagedProcess(Service):
    """A child process serving on a loopback port; a context manager.

    Subclasses define `name`, `command()` and `ready()` (one probe, no waiting), and may override
    `environment()` (default: this process's environment) and `check_installed()` (raise
    LocalStackError saying how to install what is missing). With `port=None` a free port is
    picked, and picked again (three tries) when the process exits before answering (another
    process took the port in between). Output goes to `log_path` (a file in a temp dir unless
    given, removed by `stop()` unless `keep_log`; a failed start keeps it for its message).
    """

    name = "process"

    def __init__(self, *, port: int | None = None, start_timeout: float = 30.0, stop_timeout: float = 5.0,
                 log_path: str | os.PathLike[str] | None = None) -> None:
        self.port = port
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.log_path: Path | None = Path(log_path) if log_path is not None else None
        self._log_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    # ---- what a subclass says ---------------------------------------------------------------

    def command(self) -> list[str]:
        """The argv to run (self.port is set)."""
        raise NotImplementedError

    def ready(self) -> bool:
        """One readiness probe: True once the process serves."""
        raise NotImplementedError

    def environment(self) -> Mapping[str, str] | None:
        """The child's environment (None: inherit this one)."""
        return None

    def check_installed(self) -> None:
        """Raise LocalStackError naming what to install when the program is missing."""

    # ---- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Self:
        """Launch and wait until `ready()` (at most `start_timeout`). Returns self."""
        if self._process is not None:
            return self
        self.check_installed()
        pick_port = self.port is None
        for attempt in range(3 if pick_port else 1):
            if pick_port:
                self.port = free_port()
            self.launch()
            try:
                self.wait_ready()
                return self
            except ExitedEarlyError:
                self.stop(keep_log=True)
                if attempt == 2 or not pick_port:
                    raise
            except BaseException:
                self.stop(keep_log=True)
                raise
        return self

    def launch(self) -> None:
        """Start the process without waiting for it (pair with `wait_ready()`)."""
        if self.port is None:
            self.port = free_port()
        if self.log_path is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix=f"unum-{self.name}-"))
            self.log_path = self._log_dir / f"{self.name}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = self.environment()
        with open(self.log_path, "ab") as log:  # emulators log a lot under contention: a file
            self._process = subprocess.Popen(
                self.command(), env=dict(env) if env is not None else None,
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)  # Ctrl-C in a terminal reaches the caller, not the child

    def wait_ready(self) -> None:
        """Wait until `ready()`; raise (ExitedEarlyError / LocalStackError, with the log's tail)
        when the process exits first or `start_timeout` passes."""
        wait_until(self.ready, timeout=self.start_timeout, what=f"{self.name} on {LOOPBACK}:{self.port}",
                   gone=self._exit_reason, describe=lambda: f"log {self.log_path}:\n{self.log_tail()}")

    def stop(self, *, keep_log: bool = False) -> None:
        """End the process group (SIGTERM, SIGKILL after `stop_timeout`). Idempotent. The temp
        log dir is removed unless `keep_log` (a log path given by the caller is kept)."""
        process, self._process = self._process, None
        end_process(process, self.stop_timeout)
        if self._log_dir is not None and not keep_log:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None
            self.log_path = None

    # ---- state --------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def host(self) -> str:
        """`127.0.0.1:PORT`."""
        if self._process is None:
            raise LocalStackError(f"{self.name} is not running: call start() first")
        return f"{LOOPBACK}:{self.port}"

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://{self.host}"

    def log_tail(self, lines: int = 30) -> str:
        """The last lines the process wrote (for error messages)."""
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:]) or "(log is empty)"

    def _exit_reason(self) -> str | None:
        code = self._process.poll() if self._process is not None else -1
        return None if code is None else f"exited with code {code}"


class MotoServer(ManagedProcess):
    """moto's server (DynamoDB, SQS, S3, ECR, ...) as a subprocess on a loopback port.

    `.endpoint` is the `endpoint_url` for boto3; `reset()` drops every resource of every service.
    `serialized` (default): one request at a time, as atomic as DynamoDB's requests are
    (builder/local_stack/moto_serialized.py says why moto's own threaded server is not); False
    runs `python -m moto.server` as it is.
    """

    name = "moto-server"

    def __init__(self, *, port: int | None = None, start_timeout: float = 30.0, stop_timeout: float = 5.0,
                 log_path: str | os.PathLike[str] | None = None, serialized: bool = True) -> None:
        super().__init__(port=port, start_timeout=start_timeout, stop_timeout=stop_timeout, log_path=log_path)
        self.serialized = serialized

    def check_installed(self) -> None:
        if importlib.util.find_spec("moto") is None or importlib.util.find_spec("flask") is None:
            raise LocalStackError(f"moto's server is not installed for {sys.executable}: pip install 'moto[server]'")

    def command(self) -> list[str]:
        if self.serialized:
            return [sys.executable, "-m", "builder.local_stack.moto_serialized", LOOPBACK, str(self.port)]
        return [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(self.port)]

    def ready(self) -> bool:
        return http_answers(f"http://{LOOPBACK}:{self.port}/moto-api/")

    def reset(self) -> None:
        """Drop every resource of every service (moto's `POST /moto-api/reset`)."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", data=b"", method="POST")
        with DIRECT_HTTP.open(request, timeout=10) as response:
            response.read()
