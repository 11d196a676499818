"""The local AWS stack's pieces besides moto: the Lambda Runtime Interface Emulator (RIE), function
containers running under it, and a local OCI registry (Debian's `docker-registry`).

- `rie_binary()` takes `aws-lambda-rie-x86_64` out of the `aws-sam-cli` wheel (downloaded once
  with pip, cached): no other way to get it here.
- `lambda_container_config()` is how a function image runs as a Lambda: the RIE mounted in front
  of the image's own entrypoint, host networking, one RIE/runtime-API port pair per container.
- `LocalRegistry` runs `docker-registry serve` on a loopback port (for `builder push` tests);
  `HostLambdaFunction` runs the RIE around a function folder on the host (no image).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.image.wheelhouse import cache_dir
from builder.local_stack.process import (DIRECT_HTTP, LOOPBACK, LocalStackError, ManagedProcess, free_port, http_answers,
                                         port_open, wait_until)

__all__ = ["HostLambdaFunction", "LambdaContainerConfig", "LambdaPorts", "LocalRegistry", "lambda_container_config",
           "manifest_digest", "registry_config", "rie_binary", "wait_for_rie"]

RIE_IN_WHEEL = "samcli/local/rapid/aws-lambda-rie-x86_64"
RIE_IN_CONTAINER = "/usr/local/bin/aws-lambda-rie"
INVOKE_PATH = "/2015-03-31/functions/function/invocations"


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


def wait_for_rie(container: Any, config: LambdaContainerConfig, timeout: float = 60) -> None:
    """Until the RIE in `container` (a docker SDK container running `config`) accepts
    connections on its invoke port. ExitedEarlyError as soon as the container has exited (one
    of its ports taken meanwhile: they were free when picked, not reserved), LocalStackError
    after `timeout` seconds; both end with the tail of its log."""

    def exited() -> str | None:
        try:
            container.reload()
        except Exception:  # (the daemon is busy: ask again at the next poll)
            return None
        if container.status in ("exited", "dead"):
            return f"exited with code {container.attrs.get('State', {}).get('ExitCode')}"
        return None

    def log_tail() -> str:
        try:
            tail = container.logs(tail=5).decode(errors="replace").strip()
        except Exception:
            return ""
        return f"its log ends: {' | '.join(tail.splitlines())}" if tail else "its log is empty"

    wait_until(lambda: port_open(config.ports.invoke), timeout=timeout,
               what=f"RIE of {config.image} on {LOOPBACK}:{config.ports.invoke}", gone=exited, describe=log_tail)


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


class LocalRegistry(ManagedProcess):
    """Debian's `docker-registry` (the CNCF distribution registry) on a loopback port, storing
    into a temp folder (or `root` when given: it then outlives the process); a context manager.
    Docker treats 127.0.0.0/8 registries as insecure (plain HTTP) by default, so
    `docker push 127.0.0.1:PORT/name` works without daemon config."""

    name = "docker-registry"

    def __init__(self, *, port: int | None = None, binary: str = "docker-registry",
                 root: str | os.PathLike[str] | None = None, start_timeout: float = 30.0) -> None:
        super().__init__(port=port, start_timeout=start_timeout)
        self.binary = binary
        self.root = Path(root) if root is not None else None
        self._dir: Path | None = None

    def check_installed(self) -> None:
        if shutil.which(self.binary) is None and not Path(self.binary).is_file():
            raise LocalStackError(f"{self.binary} is not installed: apt-get install docker-registry "
                                  "(localstack/setup.d/30-aws.sh does it)")

    def command(self) -> list[str]:
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="unum-registry-"))
        config = self._dir / "config.yml"
        config.write_text(registry_config(self.root or self._dir / "data", self.port or 0))
        return [shutil.which(self.binary) or self.binary, "serve", str(config)]

    def ready(self) -> bool:
        return http_answers(f"http://{LOOPBACK}:{self.port}/v2/")

    def stop(self, *, keep_log: bool = False) -> None:
        super().stop(keep_log=keep_log)
        if self._dir is not None and not keep_log:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    @property
    def url(self) -> str:
        return self.endpoint

    def manifest_digest(self, repository: str, tag: str) -> str | None:
        """The digest the registry reports for repository:tag (None when absent)."""
        return manifest_digest(self.url, repository, tag)


def registry_config(root: str | os.PathLike[str], port: int) -> str:
    """A `docker-registry serve` config: filesystem storage under `root`, deletes allowed,
    listening on 127.0.0.1:`port` only."""
    return ("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
            f"    rootdirectory: {root}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {LOOPBACK}:{port}\n")


def manifest_digest(registry_url: str, repository: str, tag: str) -> str | None:
    """The digest a registry (`http://host:port`) serves for repository:tag (None when absent)."""
    request = urllib.request.Request(f"{registry_url}/v2/{repository}/manifests/{tag}", method="HEAD", headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"})
    try:
        with DIRECT_HTTP.open(request, timeout=10) as response:
            digest: str | None = response.headers.get("Docker-Content-Digest")
            return digest
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


class HostLambdaFunction(ManagedProcess):
    """A function folder run as a Lambda straight on the host: the RIE around
    `python -m unum_entry` (no image, no container; the same adapter and runtime code path).
    A context manager; `invoke_url` is what the Invoke endpoint delivers to."""

    def __init__(self, function_dir: str | os.PathLike[str], *, function_name: str,
                 environment: Mapping[str, str], python: str = sys.executable, start_timeout: float = 30.0) -> None:
        self.ports = LambdaPorts.free()
        super().__init__(port=self.ports.invoke, start_timeout=start_timeout)
        self.name = f"rie-{function_name}"
        self.function_dir = Path(function_dir)
        self.function_name = function_name
        self._environment = dict(environment)
        self.python = python

    def command(self) -> list[str]:
        return [str(rie_binary()), "--runtime-interface-emulator-address", f"{LOOPBACK}:{self.ports.invoke}",
                "--runtime-api-address", f"{LOOPBACK}:{self.ports.runtime_api}", self.python, "-m", "unum_entry"]

    def environment(self) -> Mapping[str, str]:
        return {**os.environ, "AWS_LAMBDA_FUNCTION_NAME": self.function_name, "AWS_REGION": "us-east-1",
                "UNUM_FUNCTION_DIR": str(self.function_dir), **self._environment}

    def ready(self) -> bool:
        return port_open(self.ports.invoke)

    @property
    def invoke_url(self) -> str:
        return self.ports.invoke_url
