"""One `serve`: the store, the registry, the engine, the APIs and the HTTP server, wired
together and taken down in order (`Serving`, a context manager).

`start` first resumes every execution the registry holds as unended (builder.serve.engine:
what a previous server left journaled is re-driven, a start cut short is started from its
entry's checkpoint), then serves. `close` stops answering, then lets the engine stop taking
deliveries (what is pending stays journaled), then closes the registry and the store: a
Ctrl-C or SIGTERM loses nothing, and the next `serve` (or `run --resume`) continues it.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from builder.serve.arns import DEFAULT_ACCOUNT, DEFAULT_REGION, Arns

log = logging.getLogger("unum.serve")


@dataclass(frozen=True)
class Settings:
    """What `python -m builder serve` was given."""

    store: str = ".unum/unum.db"
    state_dir: str = ".unum/serve"
    functions: str | None = None
    port: int = 8083
    region: str = DEFAULT_REGION
    account: str = DEFAULT_ACCOUNT
    workers: int = 8
    mock_config: str | None = None  # Step Functions Local's mock configuration file (builder.serve.mocks)


class Serving:
    """A running server (module docstring); `url` once started."""

    def __init__(self, settings: Settings) -> None:
        from unum_entry.stores import open_store

        from builder.serve.engine import Engine
        from builder.serve.http import ApiServer
        from builder.serve.registry import Registry
        from builder.serve.states_api import StatesApi

        self.settings = settings
        state = Path(settings.state_dir)
        mocks = None
        if settings.mock_config is not None:  # a bad file stops `serve` before it opens or listens on anything
            from builder.serve.mocks import load
            mocks = load(settings.mock_config)
        self.store = open_store(settings.store)
        try:
            self.registry = Registry(state / "registry.db")
            self.engine = Engine(self.store, state, functions=settings.functions, workers=settings.workers)
            self.arns = Arns(settings.region, settings.account)
            self.states = StatesApi(self.registry, self.engine, self.store, self.arns, mocks=mocks)
            self.server = ApiServer(self.states, port=settings.port)
            from builder.serve.lambda_api import LambdaApi  # the Lambda durable-execution API's routes
            self.lambda_api = LambdaApi(self.store, self.engine, self.registry, settings).install(self.server)
        except BaseException:
            self.store.close()
            raise
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.server.url

    def resume(self) -> int:
        """Continue every execution a previous server left unended; returns how many."""
        resumed = 0
        for execution in self.registry.executions(unended=True):
            if self.states.status(execution)[0] != "RUNNING":
                continue
            try:
                self.engine.resume(execution.folder, execution.workflow, json.loads(execution.input))
                resumed += 1
            except Exception as exc:  # noqa: BLE001 - one broken execution must not keep the server down
                log.warning("serve: could not resume %s: %s", execution.workflow, exc)
        return resumed

    def start(self) -> Serving:
        from builder.serve.http import serve_in_thread

        self.resume()
        self._thread = serve_in_thread(self.server)
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.engine.close()
        self.registry.close()
        self.store.close()

    def __enter__(self) -> Serving:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
