"""Fixtures for the AWS e2e tests: function images run as Lambda containers (RIE, host network)
behind the local asynchronous Invoke endpoint, with DynamoDB on moto.

`lambda_stack(folder)` builds the workflow's images (once per session), and starts a
`LocalLambdaStack` whose containers are testcontainers `LambdaFunctionContainer`s, with its own
DynamoDB table and its own EventBridge Scheduler group on the same moto (durable timers, fired
by the stack's `SchedulerFiringLoop`). Stacks live for the session.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from testcontainers.core.container import DockerContainer

from builder.local_stack.lambda_containers import LambdaContainerConfig, wait_for_rie
from builder.local_stack.aws_stack import LocalLambdaStack
from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry
from builder.local_stack.process import MotoServer

FAST_RETRY = LambdaRetry(delays=(0.2, 0.5), unavailable_delay=0.25, max_event_age=120.0, request_timeout=60.0)


def local_aws_cli(folder: Path, workflow_id: str, *, timeout: float) -> subprocess.CompletedProcess[str]:
    """`python -m builder local-aws FOLDER` on this session's images (`built_images(folder)` first)
    with the folder's `input.json` and short handler retries, as a user runs it; exit 0 asserted."""
    from tests.e2e.conftest import E2E_TAG_PREFIX

    proc = subprocess.run([sys.executable, "-m", "builder", "local-aws", str(folder), "--no-build",
                           "--tag-prefix", E2E_TAG_PREFIX, "--input", f"@{folder / 'input.json'}",
                           "--workflow-id", workflow_id, "--compact", "--retry-delay", "0.2"],
                          cwd=Path(__file__).resolve().parents[3], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc


class LambdaFunctionContainer(DockerContainer):
    """A function image running under the RIE with host networking; `start()` returns once the
    RIE listens."""

    def __init__(self, config: LambdaContainerConfig) -> None:
        super().__init__(config.image)
        self.config = config
        self.with_kwargs(entrypoint=config.entrypoint, network_mode=config.network_mode)
        self.with_envs(**config.environment)
        for host, mount in config.volumes.items():
            self.with_volume_mapping(host, mount["bind"], mount["mode"])

    def start(self) -> LambdaFunctionContainer:
        super().start()
        try:
            wait_for_rie(self.get_wrapped_container(), self.config)
        except Exception:
            self.stop()
            raise
        return self

    def restart(self) -> None:
        """Start the stopped container again (same ports, same configuration)."""
        self.get_wrapped_container().start()
        wait_for_rie(self.get_wrapped_container(), self.config)


@pytest.fixture(scope="session")
def aws_moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


@pytest.fixture(scope="session")
def lambda_stack(built_images, aws_moto) -> Iterator[Callable[[str | Path], LocalLambdaStack]]:
    """`lambda_stack(folder)` → a running LocalLambdaStack for that workflow (one per session)."""
    from unum_entry.workflow import load_workflow

    stacks: dict[str, LocalLambdaStack] = {}
    endpoints: list[AsyncInvokeEndpoint] = []

    def get(folder: str | Path) -> LocalLambdaStack:
        key = str(Path(folder).resolve())
        if key not in stacks:
            workflow = load_workflow(folder)
            endpoint = AsyncInvokeEndpoint(retry=FAST_RETRY).start()
            endpoints.append(endpoint)
            table = f"unum-e2e-{workflow.name}-{uuid.uuid4().hex[:8]}"
            stack = LocalLambdaStack(workflow, built_images(folder), endpoint=endpoint,
                                     store_url=f"dynamodb://{table}?endpoint={aws_moto.endpoint}&region=us-east-1",
                                     start_container=lambda config: LambdaFunctionContainer(config).start(),
                                     environment={"UNUM_RETRY_BASE_DELAY": "0.05", "UNUM_LOG_LEVEL": "WARNING"},
                                     scheduler_endpoint=aws_moto.endpoint)  # durable timers: moto + firing loop
            stacks[key] = stack.start()
        return stacks[key]

    try:
        yield get
    finally:
        for stack in stacks.values():
            stack.__exit__(None, None, None)
        for endpoint in endpoints:
            endpoint.stop()
