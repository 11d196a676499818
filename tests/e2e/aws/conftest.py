"""Fixtures for the AWS e2e tests: function images run as Lambda containers (RIE, host network)
behind the local asynchronous Invoke endpoint, with DynamoDB on moto.

`lambda_stack(folder)` builds the workflow's images (once per session), starts one container per
function with testcontainers, registers them on an `AsyncInvokeEndpoint`, and gives every stack
its own DynamoDB table. Stacks live for the session (container start copies the image on vfs).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from testcontainers.core.container import DockerContainer

from builder.aws_local import LambdaContainerConfig, lambda_container_config, wait_for_port
from builder.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry
from builder.localstack import MotoServer
from unum_entry.outcome import RunResult, read_outcome
from unum_entry.runtime import new_workflow
from unum_entry.stores import open_store
from unum_entry.stores.base import Store

FAST_RETRY = LambdaRetry(delays=(0.2, 0.5), unavailable_delay=0.25, max_event_age=120.0, request_timeout=60.0)


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
        wait_for_port(self.config.ports.invoke, 60, what=f"RIE of {self.image}")
        return self

    def restart(self) -> None:
        """Start the stopped container again (same ports, same configuration)."""
        self.get_wrapped_container().start()
        wait_for_port(self.config.ports.invoke, 60, what=f"RIE of {self.image}")


@dataclass
class LambdaStack:
    """One workflow deployed locally: containers, the Invoke endpoint and a DynamoDB table."""

    workflow: str
    entry: str
    store: Store
    store_url: str
    endpoint: AsyncInvokeEndpoint
    containers: dict[str, LambdaFunctionContainer] = field(default_factory=dict)

    def lambda_client(self) -> Any:
        from unum_entry.invokers.aws_lambda import build_client

        return build_client(endpoint=self.endpoint.endpoint, region="us-east-1")

    def start(self, input_value: Any, workflow_id: str | None = None) -> str:
        """Invoke the entry function asynchronously (as a user would with boto3)."""
        import json

        env = new_workflow(input_value, workflow_id or f"wf-{uuid.uuid4().hex[:12]}")
        response = self.lambda_client().invoke(FunctionName=self.entry, InvocationType="Event",
                                               Payload=json.dumps(env.to_wire()))
        assert response["StatusCode"] == 202
        return env.workflow

    def run(self, input_value: Any, *, workflow_id: str | None = None, timeout: float = 120.0) -> RunResult:
        workflow_id = self.start(input_value, workflow_id)
        assert self.endpoint.wait_idle(timeout), f"deliveries still in flight after {timeout} s: {self.endpoint.stats}"
        return read_outcome(self.store, workflow_id)


@pytest.fixture(scope="session")
def aws_moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


@pytest.fixture(scope="session")
def lambda_stack(built_images, aws_moto) -> Iterator[Callable[[str | Path], LambdaStack]]:
    """`lambda_stack(folder)` → a running LambdaStack for that workflow (one per session)."""
    from unum_entry.workflow import load_workflow

    stacks: dict[str, LambdaStack] = {}
    try:
        def get(folder: str | Path) -> LambdaStack:
            key = str(Path(folder).resolve())
            if key in stacks:
                return stacks[key]
            workflow = load_workflow(folder)
            images = built_images(folder)
            table = f"unum-e2e-{workflow.name}-{uuid.uuid4().hex[:8]}"
            store_url = f"dynamodb://{table}?endpoint={aws_moto.endpoint}&region=us-east-1"
            store = open_store(store_url + "&create=1")
            endpoint = AsyncInvokeEndpoint(retry=FAST_RETRY).start()
            stack = LambdaStack(workflow.name, workflow.entry, store, store_url, endpoint)
            stacks[key] = stack
            environment = {"UNUM_STORE": store_url, "UNUM_INVOKER": f"lambda://?endpoint={endpoint.endpoint}",
                           "UNUM_RETRY_BASE_DELAY": "0.05", "UNUM_LOG_LEVEL": "WARNING"}
            configs = {name: lambda_container_config(images[name], function_name=name, environment=environment)
                       for name in workflow.functions}
            stack.containers.update({name: LambdaFunctionContainer(c) for name, c in configs.items()})
            with ThreadPoolExecutor(4) as pool:  # registered first: teardown stops whatever started
                list(pool.map(LambdaFunctionContainer.start, stack.containers.values()))
            for name, container in stack.containers.items():
                endpoint.register(name, container.config.ports.invoke_url)
            return stack

        yield get
    finally:
        for stack in stacks.values():
            stack.endpoint.stop()
            for container in stack.containers.values():
                try:
                    container.stop()
                except Exception:  # already gone: nothing to clean
                    pass
            stack.store.close()
