"""The build a deployed Lambda workflow started on, recorded in its store, and an invoker that
continues each workflow on it (issue 44).

Inside a workflow every invoke and timer names `FUNCTION:<build>` (the `lambda://` invoker's
`qualifier`, unum_entry.invokers.aws_lambda). What continues a workflow from outside its
functions - the CLI's `task-success` / `callback-success` / `task-failure` …, the `--api`
function's SendTask* and RedriveExecution - has no build of its own: it reads the workflow's.

- **The record.** The entry function of a pinned deploy (an invoker with a qualifier) writes,
  when it runs a workflow's start (after the start router, on the build that runs it), one
  marker `build_key(workflow)` = `{"build": B}`, create-if-absent (a duplicate start or a retry
  finds it and writes nothing), with the workflow's retention like its start record
  (`record_build`). A workflow started before this record existed, or on an unpinned deploy,
  has none.
- **The invoker.** `RecordedBuilds(invoker, store)` is an Invoker: each `invoke` / `invoke_at`
  reads the payload envelope's `workflow`, looks its build up (`read_build`, cached per
  workflow) and goes to `FUNCTION:<that build>`; without a record it is `invoker` unchanged
  (its own qualifier, else `$LATEST`: today's behaviour). The recorded build wins over the
  invoker URL's qualifier: it is the build the workflow runs.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from unum_entry.codec import decode, encode
from unum_entry.packing import pack
from unum_entry.retention import Ledger, store_retention
from unum_entry.stores.base import Kind, Store

if TYPE_CHECKING:
    from unum_entry.invokers.aws_lambda import LambdaInvoker


def build_key(workflow: str) -> str:
    """The key of `workflow`'s build record (a marker, like the start record's `i-` keys)."""
    return "i-" + hashlib.blake2b(pack(["lambda-build", workflow]), digest_size=16).hexdigest()


def record_build(store: Store, workflow: str, build: str, *, deadline: int = 0) -> str:
    """Record that `workflow` runs build `build`, unless a build is recorded; return the recorded
    one (the first writer's). `deadline`: the workflow's (0: unknown, bounded by now + TTL).
    Raises StoreError from the store."""
    ledger = Ledger.bounded(workflow, deadline, store_retention(store))
    stored, _ = ledger.create(store, build_key(workflow), encode({"build": build}), Kind.MARKER)
    return _parse(stored) or build


def read_build(store: Store, workflow: str) -> str | None:
    """The build `workflow` started on, or None when none is recorded."""
    raw = store.get(build_key(workflow))
    return _parse(raw) if raw is not None else None


def _parse(raw: bytes) -> str | None:
    try:
        value = decode(raw)
    except Exception:  # noqa: BLE001 - not a build record: none
        return None
    build = value.get("build") if isinstance(value, Mapping) else None
    return build if isinstance(build, str) and build else None


class RecordedBuilds:
    """An Invoker sending each workflow's invokes and timers to its recorded build (module
    docstring); thread-safe."""

    def __init__(self, invoker: LambdaInvoker, store: Store) -> None:
        self.invoker = invoker
        self.store = store
        self._lock = threading.Lock()
        self._builds: dict[str, LambdaInvoker] = {}

    def for_workflow(self, workflow: Any) -> LambdaInvoker:
        """The invoker of `workflow`: qualified with its recorded build, else `self.invoker`."""
        if not isinstance(workflow, str):
            return self.invoker
        with self._lock:
            found = self._builds.get(workflow)
        if found is not None:
            return found
        build = read_build(self.store, workflow)
        chosen = self.invoker if build is None or build == self.invoker.qualifier else self.invoker.pinned(build)
        with self._lock:
            self._builds[workflow] = chosen
        return chosen

    def invoke(self, function: str, payload: Mapping[str, Any]) -> None:
        """`LambdaInvoker.invoke` on the payload's workflow's build. Raises InvokeError."""
        self.for_workflow(payload.get("workflow")).invoke(function, payload)

    def invoke_at(self, when: float, function: str, payload: Mapping[str, Any], *, name: str) -> None:
        """`LambdaInvoker.invoke_at` on the payload's workflow's build (the timer's qualified ARN)."""
        self.for_workflow(payload.get("workflow")).invoke_at(when, function, payload, name=name)


def recorded_builds(invoker: Any, store: Store | None) -> Any:
    """`invoker` continuing each workflow on its recorded build when it is a Lambda invoker and
    there is a store to read the records from; else `invoker` itself."""
    from unum_entry.invokers.aws_lambda import LambdaInvoker  # lazy: boto3 behind it

    if store is None or not isinstance(invoker, LambdaInvoker):
        return invoker
    return RecordedBuilds(invoker, store)


__all__ = ["RecordedBuilds", "build_key", "read_build", "record_build", "recorded_builds"]
