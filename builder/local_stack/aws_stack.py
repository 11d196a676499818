"""A workflow deployed on the local AWS stack: one container per function (its image under the
Lambda RIE, host network), the asynchronous Invoke endpoint in front of them, and a DynamoDB
table (moto). Used by `python -m builder local-aws` and by the e2e tests.

With `scheduler_endpoint` (moto's EventBridge Scheduler API) the functions' invoker arms durable
timers there (`Invoker.invoke_at`: `schedule_role=LOCAL_SCHEDULER_ROLE`, a schedule group of the
stack's own, so stacks sharing one moto never fire each other's timers) and a
`SchedulerFiringLoop` invokes each due schedule's target through the endpoint.

    with LocalLambdaStack(workflow, images, store_url=url, endpoint=endpoint) as stack:
        outcome = stack.run({"name": "x"})

Containers start through `start_container(config) -> handle` (the docker SDK by default; the
tests pass testcontainers); a handle needs `stop()`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Self

from builder.local_stack.lambda_containers import LambdaContainerConfig, lambda_container_config, wait_for_rie
from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint
from builder.local_stack.process import ExitedEarlyError, Service
from builder.local_stack.scheduler_loop import SchedulerFiringLoop
from unum_entry.errors import InvokeError
from unum_entry.outcome import RunResult, WorkflowStatus, read_outcome
from unum_entry.runtime import new_workflow
from unum_entry.stores import open_store
from unum_entry.workflow import Workflow


LOCAL_SCHEDULER_ROLE = "arn:aws:iam::123456789012:role/unum-local-scheduler"


class DockerSdkContainer:
    """A Lambda container started with the docker SDK; `stop()` removes it."""

    def __init__(self, client: Any, config: LambdaContainerConfig) -> None:
        self.config = config
        self.container = client.containers.run(detach=True, **config.run_kwargs())
        try:
            wait_for_rie(self.container, config)
        except Exception:
            self.stop()
            raise

    def stop(self) -> None:
        self.container.remove(force=True)


class LocalLambdaStack(Service):
    """Containers + endpoint registration + store for one workflow; a context manager."""

    def __init__(self, workflow: Workflow, images: Mapping[str, str], *, store_url: str,
                 endpoint: AsyncInvokeEndpoint, start_container: Callable[[LambdaContainerConfig], Any] | None = None,
                 environment: Mapping[str, str] | None = None, scheduler_endpoint: str | None = None,
                 scheduler_interval: float = 0.25) -> None:
        missing = set(workflow.functions) - set(images)
        if missing:
            raise InvokeError(f"no image for function(s) {', '.join(sorted(missing))} of workflow {workflow.name}")
        self.workflow = workflow
        self.images = dict(images)
        self.store_url = store_url
        self.endpoint = endpoint
        invoker = f"lambda://?endpoint={endpoint.endpoint}"
        self.schedule_group = f"unum-local-{uuid.uuid4().hex[:12]}"
        if scheduler_endpoint:
            invoker += (f"&scheduler_endpoint={scheduler_endpoint}&schedule_role={LOCAL_SCHEDULER_ROLE}"
                        f"&schedule_group={self.schedule_group}")
        self.environment = {"UNUM_STORE": store_url, "UNUM_INVOKER": invoker, **(environment or {})}
        self.scheduler_endpoint = scheduler_endpoint
        self.scheduler_interval = scheduler_interval
        self.timers: SchedulerFiringLoop | None = None
        self._start_container = start_container
        self.containers: dict[str, Any] = {}
        self.store = open_store(store_url + ("&" if "?" in store_url else "?") + "create=1")

    def start(self) -> Self:
        start = self._start_container
        if start is None:
            from builder.image.build import docker_client

            client = docker_client()
            start = lambda config: DockerSdkContainer(client, config)  # noqa: E731
        def config_of(name: str) -> LambdaContainerConfig:
            return lambda_container_config(self.images[name], function_name=name, environment=self.environment)

        configs = {name: config_of(name) for name in sorted(self.workflow.functions)}

        def start_one(name: str) -> Any:
            try:
                return start(configs[name])
            except ExitedEarlyError:  # its ports were free when picked, not reserved: once more, with others
                configs[name] = config_of(name)
                return start(configs[name])

        with ThreadPoolExecutor(4) as pool:
            futures = {name: pool.submit(start_one, name) for name in configs}
        errors = []
        for name, future in futures.items():
            try:
                self.containers[name] = future.result()
            except Exception as exc:  # report all; stop() cleans up the ones that started
                errors.append(f"{name}: {exc}")
        if errors:
            self.stop()
            raise InvokeError(f"starting the function containers failed: {'; '.join(errors)}")
        for name, config in configs.items():
            self.endpoint.register(name, config.ports.invoke_url)
        if self.scheduler_endpoint:
            from unum_entry.invokers.aws_lambda import build_client

            scheduler = build_client(endpoint=self.scheduler_endpoint, region="us-east-1", service="scheduler")
            scheduler.create_schedule_group(Name=self.schedule_group)
            self.timers = SchedulerFiringLoop(scheduler, build_client(endpoint=self.endpoint.endpoint, region="us-east-1"),
                                              group=self.schedule_group, interval=self.scheduler_interval).start()
        return self

    def stop(self) -> None:
        timers, self.timers = self.timers, None
        if timers is not None:
            timers.stop()
            try:  # its pending timers (watchdogs of finished workflows) go with it
                timers.scheduler.delete_schedule_group(Name=self.schedule_group)
            except Exception:  # moto already gone
                pass
        containers, self.containers = self.containers, {}
        with ThreadPoolExecutor(4) as pool:  # removal is slow on vfs: in parallel
            list(pool.map(_stop_quietly, containers.values()))

    def start_workflow(self, input_value: Any, workflow_id: str | None = None) -> str:
        """Invoke the entry function asynchronously, as a user would with boto3."""
        from unum_entry.invokers.aws_lambda import build_client

        env = new_workflow(input_value, workflow_id or f"wf-{uuid.uuid4().hex[:12]}")
        response = build_client(endpoint=self.endpoint.endpoint, region="us-east-1").invoke(
            FunctionName=self.workflow.entry, InvocationType="Event", Payload=json.dumps(env.to_wire()))
        if response.get("StatusCode") != 202:
            raise InvokeError(f"invoke of {self.workflow.entry}: expected 202, got {response.get('StatusCode')}")
        return env.workflow

    def run(self, input_value: Any, *, workflow_id: str | None = None, timeout: float = 120.0) -> RunResult:
        """Start a workflow and wait until the endpoint has nothing queued or running and either
        the workflow has ended or no timer is armed (a stalled workflow returns as it is)."""
        import time

        workflow_id = self.start_workflow(input_value, workflow_id)
        deadline = time.monotonic() + timeout
        while True:
            if not self.endpoint.wait_idle(max(0.0, deadline - time.monotonic())):
                raise InvokeError(f"workflow {workflow_id}: deliveries still in flight after {timeout:.0f} s "
                                  f"({dict(self.endpoint.stats)})")
            outcome = read_outcome(self.store, workflow_id)
            if outcome.status in (WorkflowStatus.SUCCEEDED, WorkflowStatus.FAILED, WorkflowStatus.TIMED_OUT) or self.timers is None:
                return outcome
            if self.timers.pending() == 0 and self.endpoint.wait_idle(0):
                return outcome
            if time.monotonic() > deadline:
                raise InvokeError(f"workflow {workflow_id}: still waiting for {self.timers.pending()} timer(s) "
                                  f"after {timeout:.0f} s")
            time.sleep(min(0.5, self.scheduler_interval * 2))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        self.store.close()


def _stop_quietly(handle: Any) -> None:
    try:
        handle.stop()
    except Exception:  # already gone
        pass
