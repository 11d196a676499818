"""The local AWS stack's pieces besides moto: the Lambda Runtime Interface Emulator (RIE), function
containers running under it, and a local OCI registry (Debian's `docker-registry`).

- `rie_binary()` takes `aws-lambda-rie-x86_64` out of the `aws-sam-cli` wheel (downloaded once
  with pip, cached): no other way to get it here.
- `lambda_container_config()` is how a function image runs as a Lambda: the RIE mounted in front
  of the image's own entrypoint, host networking, one RIE/runtime-API port pair per container.
- `LocalRegistry` runs `docker-registry serve` on a loopback port (for `builder push` tests).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from builder.local_stack.process import LOOPBACK, LocalStackError, free_port
from builder.image.wheelhouse import cache_dir

RIE_IN_WHEEL = "samcli/local/rapid/aws-lambda-rie-x86_64"
RIE_IN_CONTAINER = "/usr/local/bin/aws-lambda-rie"
INVOKE_PATH = "/2015-03-31/functions/function/invocations"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def rie_binary() -> Path:
    """The RIE executable, extracted from the aws-sam-cli wheel on first use (pip download)."""
    target = cache_dir() / "aws-lambda-rie-x86_64"
    if target.is_file() and os.access(target, os.X_OK):
        return target
    with tempfile.TemporaryDirectory(prefix="unum-samcli-") as tmp:
        result = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                                 "--disable-pip-version-check", "-d", tmp, "aws-sam-cli"],
                                capture_output=True, text=True, timeout=600)
        wheels = sorted(Path(tmp).glob("aws_sam_cli-*.whl"))
        if result.returncode != 0 or not wheels:
            raise LocalStackError(f"cannot download aws-sam-cli to extract the Lambda RIE: {result.stderr.strip()[-500:]}")
        with zipfile.ZipFile(wheels[-1]) as wheel:
            try:
                data = wheel.read(RIE_IN_WHEEL)
            except KeyError:
                raise LocalStackError(f"{wheels[-1].name} has no {RIE_IN_WHEEL}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    partial.replace(target)
    return target


@dataclass(frozen=True)
class LambdaPorts:
    """The two loopback ports one RIE container needs with host networking."""

    invoke: int
    runtime_api: int

    @classmethod
    def free(cls) -> LambdaPorts:
        return cls(free_port(), free_port())

    @property
    def invoke_url(self) -> str:
        return f"http://{LOOPBACK}:{self.invoke}{INVOKE_PATH}"


@dataclass(frozen=True)
class LambdaContainerConfig:
    """Arguments for running a function image as a Lambda under the RIE (docker SDK names)."""

    image: str
    ports: LambdaPorts
    entrypoint: list[str]
    environment: dict[str, str]
    volumes: dict[str, dict[str, str]] = field(default_factory=dict)
    network_mode: str = "host"

    def run_kwargs(self) -> dict[str, Any]:
        return {"image": self.image, "entrypoint": self.entrypoint, "environment": self.environment,
                "volumes": self.volumes, "network_mode": self.network_mode}


def lambda_container_config(image: str, *, function_name: str, environment: Mapping[str, str],
                            ports: LambdaPorts | None = None, timeout_seconds: int = 300,
                            rie: Path | None = None) -> LambdaContainerConfig:
    """How to run `image` (built on the unum base) as Lambda function `function_name`."""
    ports = ports or LambdaPorts.free()
    rie = rie or rie_binary()
    env = {"AWS_LAMBDA_FUNCTION_NAME": function_name, "AWS_LAMBDA_FUNCTION_TIMEOUT": str(timeout_seconds),
           "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", **environment}
    entrypoint = [RIE_IN_CONTAINER, "--runtime-interface-emulator-address", f"{LOOPBACK}:{ports.invoke}",
                  "--runtime-api-address", f"{LOOPBACK}:{ports.runtime_api}", "python3", "-m", "unum_entry"]
    return LambdaContainerConfig(image=image, ports=ports, entrypoint=entrypoint, environment=env,
                                 volumes={str(rie): {"bind": RIE_IN_CONTAINER, "mode": "ro"}})


def wait_for_port(port: int, timeout: float, *, what: str = "service") -> None:
    """Until something accepts TCP connections on 127.0.0.1:port."""
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((LOOPBACK, port), timeout=1):
                return
        except OSError:
            if time.monotonic() >= deadline:
                raise LocalStackError(f"{what} did not listen on {LOOPBACK}:{port} within {timeout:.0f} s") from None
            time.sleep(0.1)


class LocalRegistry:
    """Debian's `docker-registry` (the CNCF distribution registry) on a loopback port, storing
    into a temp folder; a context manager. Docker treats 127.0.0.0/8 registries as insecure
    (plain HTTP) by default, so `docker push 127.0.0.1:PORT/name` works without daemon config."""

    def __init__(self, *, port: int | None = None, binary: str = "docker-registry") -> None:
        self.port = port
        self.binary = binary
        self._dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> LocalRegistry:
        path = shutil.which(self.binary) or (self.binary if Path(self.binary).is_file() else None)
        if path is None:
            raise LocalStackError(f"{self.binary} is not installed: apt-get install docker-registry "
                                  "(localstack/setup.d/30-aws.sh does it)")
        self.port = self.port or free_port()
        self._dir = Path(tempfile.mkdtemp(prefix="unum-registry-"))
        config = self._dir / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {self._dir / 'data'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {LOOPBACK}:{self.port}\n")
        with open(self._dir / "registry.log", "wb") as log:
            self._process = subprocess.Popen([path, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise LocalStackError(f"docker-registry exited: {(self._dir / 'registry.log').read_text()[-800:]}")
            try:
                with _DIRECT.open(f"{self.url}/v2/", timeout=1) as response:
                    response.read()
                return self
            except (urllib.error.URLError, OSError):
                if time.monotonic() >= deadline:
                    self.stop()
                    raise LocalStackError(f"docker-registry did not answer on {self.url} within {timeout:.0f} s") from None
                time.sleep(0.1)

    def stop(self) -> None:
        process, self._process = self._process, None
        _terminate(process)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    @property
    def host(self) -> str:
        """`127.0.0.1:PORT`, the registry part of an image name."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def manifest_digest(self, repository: str, tag: str) -> str | None:
        """The digest the registry reports for repository:tag (None when absent)."""
        request = urllib.request.Request(f"{self.url}/v2/{repository}/manifests/{tag}", method="HEAD", headers={
            "Accept": "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"})
        try:
            with _DIRECT.open(request, timeout=10) as response:
                return response.headers.get("Docker-Content-Digest")
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def __enter__(self) -> LocalRegistry:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class HostLambdaFunction:
    """A function folder run as a Lambda straight on the host: the RIE around
    `python -m unum_entry` (no image, no container; the same adapter and runtime code path).
    A context manager; `invoke_url` is what the Invoke endpoint delivers to."""

    def __init__(self, function_dir: str | os.PathLike[str], *, function_name: str,
                 environment: Mapping[str, str], python: str = sys.executable) -> None:
        self.function_dir = Path(function_dir)
        self.function_name = function_name
        self.environment = dict(environment)
        self.python = python
        self.ports = LambdaPorts.free()
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    def start(self, timeout: float = 30.0) -> HostLambdaFunction:
        env = {**os.environ, "AWS_LAMBDA_FUNCTION_NAME": self.function_name, "AWS_REGION": "us-east-1",
               "UNUM_FUNCTION_DIR": str(self.function_dir), **self.environment}
        fd, log_path = tempfile.mkstemp(prefix=f"unum-rie-{self.function_name}-", suffix=".log")
        self._log = Path(log_path)
        with os.fdopen(fd, "wb") as log:
            self._process = subprocess.Popen(
                [str(rie_binary()), "--runtime-interface-emulator-address", f"{LOOPBACK}:{self.ports.invoke}",
                 "--runtime-api-address", f"{LOOPBACK}:{self.ports.runtime_api}", self.python, "-m", "unum_entry"],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for_port(self.ports.invoke, timeout, what=f"RIE of {self.function_name}")
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        _terminate(process)
        if self._log is not None:
            self._log.unlink(missing_ok=True)
            self._log = None

    def log_text(self) -> str:
        return self._log.read_text(errors="replace") if self._log is not None and self._log.exists() else ""

    @property
    def invoke_url(self) -> str:
        return self.ports.invoke_url

    def __enter__(self) -> HostLambdaFunction:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _terminate(process: subprocess.Popen | None) -> None:
    """Stop a child process: SIGTERM, then SIGKILL after 5 s."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
