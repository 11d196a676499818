"""Which build a new workflow starts on while the workflow alias ramps one (issue 44).

The entry function's Lambda alias (`live`, builder.deploy.aws_versions) names in its Description
the stable build, the ramped build and its weight. Lambda's own RoutingConfig split is random per
invoke; unum's is a function of the workflow id (`unum_entry.ramp.pick_version`), so a duplicate
start of an id always lands on the same build. `StartRouter.elsewhere(workflow_id)` reads the
alias (cached for `ttl` seconds) and says which other build a start belongs to, or None when it
belongs to the build this process runs; the adapter then forwards the start envelope to
`ENTRY:<that build>` (the build's own alias) instead of running it.

Configured by `UNUM_WORKFLOW_ALIAS` (the alias name) in the entry function's environment, with
the invoker's `qualifier` naming this process' build. Reading the alias needs
`lambda:GetAlias` on the entry function (deploy's template grants it).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from unum_entry.errors import InvokeError
from unum_entry.ramp import pick_version

ENV_ALIAS = "UNUM_WORKFLOW_ALIAS"
STATE_VERSION = 1  # the "unum" key of the alias Description's JSON (builder.deploy.aws_versions writes it)


class StartRouter:
    """Deterministic start routing for one entry function (module docstring); thread-safe."""

    def __init__(self, client: Any, *, function: str, alias: str, build: str, ttl: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.function = function  # the entry's Lambda function name (prefix + entry)
        self.alias = alias
        self.build = build  # the build this process runs (its invoker's qualifier)
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, tuple[str, str | None, float] | None] | None = None

    def _state(self) -> tuple[str, str | None, float] | None:
        """(stable, ramped, weight) from the alias Description; None if it holds no unum state."""
        from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

        with self._lock:
            now = self._clock()
            if self._cached is not None and now - self._cached[0] < self.ttl:
                return self._cached[1]
            try:
                shape = self.client.get_alias(FunctionName=self.function, Name=self.alias)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                    raise InvokeError(f"reading alias {self.alias} of {self.function} failed: {exc}") from exc
                shape = {}  # not published yet (`deploy --publish` makes it): no ramp to follow
            except BotoCoreError as exc:
                raise InvokeError(f"reading alias {self.alias} of {self.function} failed: {exc}") from exc
            state = parse_state(str(shape.get("Description", "")))
            self._cached = (now, state)
            return state

    def elsewhere(self, workflow_id: str) -> str | None:
        """The build a new workflow `workflow_id` starts on when it is not this one, else None.
        Raises InvokeError when the alias cannot be read (Lambda retries the start)."""
        state = self._state()
        if state is None:
            return None
        stable, ramped, weight = state
        chosen = pick_version(workflow_id, stable, ramped, weight)
        return None if chosen == self.build else chosen

    def forward(self, build: str, body: bytes) -> None:
        """Queue the start event `body` on `ENTRY:build`. Raises InvokeError."""
        from botocore.exceptions import BotoCoreError, ClientError

        name = f"{self.function}:{build}"
        try:
            response = self.client.invoke(FunctionName=name, InvocationType="Event", Payload=body)
        except (ClientError, BotoCoreError) as exc:
            raise InvokeError(f"forwarding a start to {name} failed: {exc}") from exc
        if response.get("StatusCode") != 202:
            raise InvokeError(f"forwarding a start to {name}: expected status 202, got {response.get('StatusCode')}")


def parse_state(description: str) -> tuple[str, str | None, float] | None:
    """(stable, ramped, weight) from a workflow alias Description (builder.deploy.aws_versions),
    None when it holds no unum state; a malformed weight means no ramp."""
    try:
        raw = json.loads(description)
    except ValueError:
        return None
    if not isinstance(raw, Mapping) or raw.get("unum") != STATE_VERSION or not isinstance(raw.get("stable"), str):
        return None
    ramped = raw.get("ramped") if isinstance(raw.get("ramped"), str) and raw.get("ramped") else None
    weight = raw.get("weight")
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= float(weight) <= 1.0:
        return raw["stable"], None, 0.0
    return raw["stable"], ramped, float(weight)
