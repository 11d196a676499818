"""The Cloud Tasks emulator (`gcloud-tasks-emulator`, PyPI) as a managed process on loopback.

    with CloudTasksEmulator() as tasks:
        tasks.create_queue("projects/demo-test/locations/local/queues/unum-timers")
        env = tasks.env()      # CLOUD_TASKS_EMULATOR_HOST=127.0.0.1:PORT (unum_entry.invokers.cloud_tasks)

The emulator needs protobuf < 5 and unum pins protobuf 7, so it lives in its own virtualenv
(`localstack/setup.d/35-cloud-tasks-emulator.sh` makes it under the unum cache, pinned by
`localstack/gcloud-tasks-emulator.txt`). It binds its gRPC port on every interface; the
launcher below binds it on 127.0.0.1 only. It delivers HTTP tasks to their URL when due
(retrying failures every 0.1 s), ignores OIDC/OAuth tokens, and does not de-duplicate task
names: the runtime's own idempotence is what makes a timer exactly-once here.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from builder.local_stack.process import LOOPBACK, LocalStackError, ManagedProcess, port_open

EMULATOR_ENV = "CLOUD_TASKS_EMULATOR_HOST"

# Runs in the emulator's virtualenv: bind the gRPC API on loopback, then the emulator's own CLI.
_LAUNCHER = """
import sys, grpc
_server = grpc.server
def _loopback_server(*args, **kwargs):
    server = _server(*args, **kwargs)
    bind = server.add_insecure_port
    server.add_insecure_port = lambda address: bind(address.replace("[::]", "127.0.0.1"))
    return server
grpc.server = _loopback_server
from gcloud_tasks_emulator.__main__ import main
sys.argv = ["gcloud-tasks-emulator", *sys.argv[1:]]
main()
"""


def emulator_python() -> Path:
    """The Python of the emulator's virtualenv: `$UNUM_TASKS_EMULATOR_PYTHON`, else the one
    next to `gcloud-tasks-emulator` on PATH, else the setup script's under the unum cache."""
    from builder.image.wheelhouse import cache_dir

    explicit = os.environ.get("UNUM_TASKS_EMULATOR_PYTHON")
    if explicit:
        return Path(explicit)
    on_path = shutil.which("gcloud-tasks-emulator")
    if on_path:
        return Path(on_path).resolve().parent / "python"
    return cache_dir() / "gcloud-tasks-emulator" / "bin" / "python"


class CloudTasksEmulator(ManagedProcess):
    """`gcloud-tasks-emulator start` on a loopback port; ready once the port accepts connections."""

    name = "cloud-tasks"

    def __init__(self, *, port: int | None = None, max_retries: int = 100, start_timeout: float = 60.0,
                 stop_timeout: float = 10.0) -> None:
        super().__init__(port=port, start_timeout=start_timeout, stop_timeout=stop_timeout)
        self.max_retries = max_retries
        self._client: Any = None

    def check_installed(self) -> None:
        if not emulator_python().is_file():
            raise LocalStackError(f"the Cloud Tasks emulator is not installed (no {emulator_python()}): "
                                  "run bash localstack/setup.d/35-cloud-tasks-emulator.sh")

    def command(self) -> list[str]:
        return [str(emulator_python()), "-c", _LAUNCHER, "start", "--port", str(self.port),
                "--max-retries", str(self.max_retries)]

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}  # tasks POST to loopback
        return {**env, "NO_PROXY": "*", "PYTHONWARNINGS": "ignore"}

    def ready(self) -> bool:
        return port_open(self.port) if self.port is not None else False

    def env(self) -> dict[str, str]:
        """What clients (and function processes) need to use this emulator."""
        return {EMULATOR_ENV: self.host}

    def client(self) -> Any:
        """A CloudTasksClient on this emulator."""
        if self._client is None:
            import grpc  # type: ignore[import-untyped]
            from google.cloud import tasks_v2
            from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport

            self._client = tasks_v2.CloudTasksClient(
                transport=CloudTasksGrpcTransport(channel=grpc.insecure_channel(self.host)))
        return self._client

    def create_queue(self, queue: str) -> None:
        """Create `projects/P/locations/L/queues/Q` (the emulator replaces an existing one)."""
        from google.cloud import tasks_v2

        self.client().create_queue(parent=queue.rsplit("/queues/", 1)[0], queue=tasks_v2.Queue(name=queue), timeout=30)

    def tasks(self, queue: str) -> list[Any]:
        """The tasks waiting in `queue` (not yet delivered, or failing)."""
        return list(self.client().list_tasks(parent=queue, timeout=30))

    def stop(self, *, keep_log: bool = False) -> None:
        self._client = None
        super().stop(keep_log=keep_log)


__all__ = ["EMULATOR_ENV", "LOOPBACK", "CloudTasksEmulator", "emulator_python"]
