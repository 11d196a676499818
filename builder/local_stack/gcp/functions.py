"""A workflow's functions served the way Cloud Run serves them, on loopback: every function by
`python -m unum_entry` (functions-framework) with its own port, as host processes
(`HostFunctions`) or as its image in `--network host` containers (`ContainerFunctions`). The
entry function serves the `http` signature, the others `cloudevent`; Pub/Sub push subscriptions
(`PubSubEmulator.wire_push(functions.urls, ...)`) make them a real at-least-once trigger.
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
from collections.abc import Mapping
from typing import Any, Self

from builder.local_stack.process import LOOPBACK, ManagedProcess, Service, free_port, http_answers, wait_until
from unum_entry.workflow import Workflow


def function_env(*, function_dir: str, store_url: str, invoker_url: str, port: int, signature: str,
                 emulators: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of one function server (a host process or a `--network host` container):
    what Cloud Run and a deploy script would set, plus the emulators' variables."""
    return {
        "UNUM_FUNCTION_DIR": function_dir,
        "UNUM_STORE": store_url,
        "UNUM_INVOKER": invoker_url,
        "PORT": str(port),
        "HOST": LOOPBACK,
        "FUNCTION_SIGNATURE_TYPE": signature,
        **emulators,
        **(extra or {}),
    }


def signature_of(workflow: Workflow, function: str) -> str:
    """The entry takes the workflow's input over HTTP; the others are CloudEvent (Pub/Sub) triggers."""
    return "http" if function == workflow.entry else "cloudevent"


class FunctionServer(ManagedProcess):
    """`python -m unum_entry` serving one function folder on a loopback port (Cloud Run's adapter,
    without a container); ready once anything answers HTTP."""

    def __init__(self, name: str, env: Mapping[str, str], *, port: int, start_timeout: float = 60.0) -> None:
        super().__init__(port=port, start_timeout=start_timeout, stop_timeout=10.0)
        self.name = f"function-{name}"
        self._env = dict(env)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "unum_entry"]

    def environment(self) -> Mapping[str, str]:
        return {**os.environ, **self._env}

    def ready(self) -> bool:
        return http_answers(f"http://{LOOPBACK}:{self.port}/", timeout=2)


class WorkflowFunctions(Service):
    """Every function of a workflow served on its own loopback port; `urls` maps function ->
    base URL once started, `logs()` is every function's log tail (for failure messages)."""

    def __init__(self, workflow: Workflow, *, store_url: str, invoker_url: str, emulators: Mapping[str, str],
                 extra_env: Mapping[str, str] | None = None, start_timeout: float = 60.0) -> None:
        self.workflow = workflow
        self.store_url = store_url
        self.invoker_url = invoker_url
        self.emulators = dict(emulators)
        self.extra_env = dict(extra_env or {})
        self.start_timeout = start_timeout
        self.urls: dict[str, str] = {}

    def env(self, function: str, *, function_dir: str, port: int) -> dict[str, str]:
        """The environment `function` is served with."""
        return function_env(function_dir=function_dir, store_url=self.store_url, invoker_url=self.invoker_url,
                            port=port, signature=signature_of(self.workflow, function), emulators=self.emulators,
                            extra=self.extra_env)

    def log(self, name: str, lines: int = 40) -> str:
        raise NotImplementedError

    def logs(self) -> str:
        return "\n".join(f"--- {name}:\n{self.log(name)}" for name in self.urls)


class HostFunctions(WorkflowFunctions):
    """Every function of a workflow as a `FunctionServer` on the host.

        with HostFunctions(workflow, store_url=..., invoker_url=..., emulators=env) as fns:
            pubsub.wire_push(fns.urls, prefix=PREFIX)
    """

    def __init__(self, workflow: Workflow, *, store_url: str, invoker_url: str, emulators: Mapping[str, str],
                 extra_env: Mapping[str, str] | None = None, start_timeout: float = 60.0) -> None:
        super().__init__(workflow, store_url=store_url, invoker_url=invoker_url, emulators=emulators,
                         extra_env=extra_env, start_timeout=start_timeout)
        self._servers: dict[str, FunctionServer] = {}

    def start(self) -> Self:
        for name, spec in self.workflow.functions.items():
            port = free_port()
            env = self.env(name, function_dir=str(spec.folder), port=port)
            server = self._servers[name] = FunctionServer(name, env, port=port, start_timeout=self.start_timeout)
            server.launch()  # all at once; then wait for each
            self.urls[name] = server.endpoint
        try:
            for server in self._servers.values():
                server.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        servers, self._servers = self._servers, {}
        for server in servers.values():
            server.stop()

    def log(self, name: str, lines: int = 40) -> str:
        server = self._servers.get(name)
        return server.log_tail(lines) if server is not None else "(no log)"


class ContainerFunctions(WorkflowFunctions):
    """Every function of a workflow served by its image (`python -m builder build`) as a
    `--network host` container, each on its own loopback port: the images exactly as Cloud Run
    would run them, with the emulators' variables added. Same interface as `HostFunctions`.

    `images` maps function -> image tag; `client` is a docker SDK client.
    """

    def __init__(self, client: Any, workflow: Workflow, images: Mapping[str, str], *, store_url: str,
                 invoker_url: str, emulators: Mapping[str, str], extra_env: Mapping[str, str] | None = None,
                 start_timeout: float = 90.0) -> None:
        super().__init__(workflow, store_url=store_url, invoker_url=invoker_url, emulators=emulators,
                         extra_env=extra_env, start_timeout=start_timeout)
        self.client = client
        self.images = dict(images)
        self._containers: dict[str, Any] = {}

    def start(self) -> Self:
        ports: dict[str, int] = {}
        for name in self.workflow.functions:  # distinct ports, picked before any container binds one
            while (port := free_port()) in ports.values():
                pass
            ports[name] = port

        def run(name: str) -> None:
            env = self.env(name, function_dir="/var/task", port=ports[name])
            self._containers[name] = self.client.containers.run(
                self.images[name], detach=True, network_mode="host", environment=env,
                labels={"unum.localstack": "gcp"})
            self.urls[name] = f"http://{LOOPBACK}:{ports[name]}"

        try:
            # Concurrently: on the vfs storage driver each container start copies the whole image.
            with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
                for future in [pool.submit(run, name) for name in self.workflow.functions]:
                    future.result()
            for name in self._containers:
                self._wait_serving(name)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_serving(self, name: str) -> None:
        wait_until(lambda: http_answers(self.urls[name], timeout=2), timeout=self.start_timeout,
                   what=f"function {name!r} at {self.urls[name]}", gone=lambda: self._gone(name),
                   describe=lambda: f"log:\n{self.log(name)}")

    def _gone(self, name: str) -> str | None:
        container = self._containers[name]
        container.reload()
        return None if container.status in ("created", "running") else f"container {container.status}"

    def stop(self) -> None:
        def remove(container: Any) -> None:
            try:
                container.remove(force=True)
            except Exception:  # already gone
                pass

        containers, self._containers = self._containers, {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(remove, containers.values()))

    def log(self, name: str, lines: int = 40) -> str:
        container = self._containers.get(name)
        if container is None:
            return "(no container)"
        text: str = container.logs(tail=lines).decode(errors="replace")
        return text
