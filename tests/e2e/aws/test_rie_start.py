"""Starting a function's container under the RIE (builder.local_stack): a container that exits
before its RIE answers is named at once with its exit code and log, not after a minute of
polling a port nobody will open; the stack starts such a function once more on other ports."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from builder.image.build import LOCAL_BASE_IMAGE, docker_client
from builder.local_stack.lambda_containers import LambdaContainerConfig, LambdaPorts, wait_for_rie
from builder.local_stack.process import ExitedEarlyError

pytestmark = pytest.mark.e2e


def test_a_container_that_exits_before_its_rie_answers_is_named_at_once() -> None:
    client = docker_client()
    config = LambdaContainerConfig(image=LOCAL_BASE_IMAGE, ports=LambdaPorts.free(),
                                   entrypoint=["sh", "-c", "echo the port is taken >&2; exit 3"], environment={})
    container = client.containers.run(detach=True, **config.run_kwargs())
    try:
        began = time.monotonic()
        with pytest.raises(ExitedEarlyError) as raised:
            wait_for_rie(container, config, timeout=60)
        assert time.monotonic() - began < 30
        message = str(raised.value)
        assert "exited with code 3" in message and "the port is taken" in message
        assert f"RIE of {LOCAL_BASE_IMAGE} on 127.0.0.1:{config.ports.invoke}" in message
    finally:
        container.remove(force=True)


def test_the_stack_starts_a_function_whose_container_exited_once_more_on_other_ports(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from builder.local_stack import aws_stack
    from builder.local_stack.aws_stack import LocalLambdaStack
    from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint
    from unum_entry.stores.memory import MemoryStore
    from unum_entry.workflow import FunctionSource, write_workflow

    monkeypatch.setattr(aws_stack, "open_store", lambda url: MemoryStore())  # (the stack's DynamoDB is moto's)
    workflow = write_workflow(tmp_path / "wf", name="one", entry="A",
                              functions={"A": FunctionSource(code="def handler(event, context):\n    return event\n",
                                                             instructions=[])})
    tried: list[LambdaContainerConfig] = []

    class Started:
        def stop(self) -> None:
            pass

    def start(config: LambdaContainerConfig) -> Started:
        tried.append(config)
        if len(tried) == 1:
            raise ExitedEarlyError("RIE of A: exited with code 1 before answering")
        return Started()

    with AsyncInvokeEndpoint() as endpoint:
        stack = LocalLambdaStack(workflow, {"A": "unum-e2e/a:latest"}, store_url="dynamodb://unused",
                                 endpoint=endpoint, start_container=start)
        stack.start()
        try:
            assert len(tried) == 2 and tried[0].ports != tried[1].ports
            assert replace(tried[0], ports=tried[1].ports, entrypoint=tried[1].entrypoint) == tried[1]
        finally:
            stack.stop()
