"""The embedded engine behind `serve`: one LocalPlatform per compiled state machine.

A definition is compiled once per content (`compiled`): the folder
`STATE/machines/<digest>/workflow` is named by the digest of the definition, the Lambda code it
copies (the content id of `--functions`: builder.versions.content_id) and the mock test case, so an execution
names the folder it started on and finishes on that code even when the machine or its code
changes later (a changed definition or function makes another folder beside it).

Each folder gets its own platform (loaded on first use) with its own durable queue
(`STATE/queues/<digest>.db`: unum_entry.local.queue.SQLiteQueue), so a server killed at any
instant loses nothing: `resume` re-drives what each unended execution left journaled, or starts
it from its entry's checkpoint when nothing was journaled (a start cut short before its first
delivery was queued). The store decides every outcome; the engine only runs deliveries.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unum_entry.errors import UnumError

if TYPE_CHECKING:
    from unum_entry.local.platform import LocalPlatform
    from unum_entry.local.queue import SQLiteQueue
    from unum_entry.stores.base import Store

log = logging.getLogger("unum.serve")
DEFINITION_FILE = "statemachine.json"


class Engine:
    """Platforms over `store`, their folders and queues under `state_dir` (module docstring)."""

    def __init__(self, store: Store, state_dir: Path, *, functions: str | None = None, workers: int = 8) -> None:
        self.store = store
        self.state_dir = state_dir
        self.functions = Path(functions).resolve() if functions else None
        self.workers = workers
        self._platforms: dict[str, tuple[LocalPlatform, SQLiteQueue]] = {}
        self._lock = threading.Lock()
        self._compile_lock = threading.Lock()
        self._closed = False

    def _code_digest(self) -> bytes:
        """The content id of the functions folder (the code a compile copies), by the one mechanism
        that pins runs to a build: builder.versions (its files by path and bytes, and the runtime's
        version, so an upgrade of unum compiles a new folder too)."""
        from builder.versions import content_id

        if self.functions is None or not self.functions.is_dir():
            return b""
        return content_id(self.functions).encode()

    def compiled(self, name: str, definition: str, mocks: Mapping[str, Mapping[str, Any]] | None = None) -> str:
        """The workflow folder of `definition` (compiled now unless it exists): see the module
        docstring. `mocks`: a mock test case's mocked states (builder.serve.mocks; their Tasks
        need no code). Raises AslDefinitionError for a definition that does not compile."""
        import json

        from builder.compiler import compile_state_machine

        hasher = hashlib.sha256(definition.encode())
        hasher.update(self._code_digest())
        if mocks is not None:  # absent without a test case: the folders of plain runs keep their digest
            hasher.update(b"\0mocks\0" + json.dumps(mocks, sort_keys=True, separators=(",", ":")).encode())
        digest = hasher.hexdigest()[:24]
        home = self.state_dir / "machines" / digest
        out = home / "workflow"
        with self._compile_lock:
            if (out / "unum-workflow.json").is_file():
                return str(out)
            staging = home / "staging"
            if staging.exists():
                import shutil

                shutil.rmtree(staging)
            staging.mkdir(parents=True)
            source = staging / DEFINITION_FILE
            source.write_text(definition)
            compile_state_machine(source, staging / "workflow", functions=self._functions_for(staging), name=name,
                                  mocks=mocks)
            (staging / "workflow").rename(out)  # complete or absent: a crash mid-compile leaves only staging
        return str(out)

    def _functions_for(self, staging: Path) -> Path:
        return self.functions if self.functions is not None else staging / "functions"

    def platform(self, folder: str) -> LocalPlatform:
        """The platform running `folder` (started on first use)."""
        from unum_entry.local.platform import LocalPlatform
        from unum_entry.local.queue import SQLiteQueue
        from unum_entry.workflow import load_workflow

        with self._lock:
            if self._closed:
                raise UnumError("the server is stopping")
            found = self._platforms.get(folder)
            if found is not None:
                return found[0]
            digest = hashlib.sha256(folder.encode()).hexdigest()[:24]
            queues = self.state_dir / "queues"
            queues.mkdir(parents=True, exist_ok=True)
            queue = SQLiteQueue(queues / f"{digest}.db")
            try:
                platform = LocalPlatform(load_workflow(folder), self.store, workers=self.workers, queue=queue)
            except BaseException:
                queue.close()
                raise
            self._platforms[folder] = (platform, queue)
            return platform

    def start(self, folder: str, workflow_id: str, input_value: Any) -> None:
        """Start `workflow_id` on `folder` with `input_value` (its start recorded first, as `run` does)."""
        from builder.runs import start_record

        platform = self.platform(folder)
        start_record.claim(self.store, workflow_id, input_value, folder=folder, resume=False)
        platform.start(input_value, workflow_id)

    def resume(self, folder: str, workflow_id: str, input_value: Any) -> int:
        """Re-drive what a previous server left of `workflow_id`; start it from its entry's
        checkpoint when nothing was left (module docstring). Returns the deliveries re-driven."""
        platform = self.platform(folder)
        recovered = platform.recover(workflow_id)
        if not recovered:
            platform.start(input_value, workflow_id)
        return recovered

    def close(self) -> None:
        """Stop taking deliveries; what is pending stays journaled for the next server."""
        with self._lock:
            self._closed = True
            platforms = list(self._platforms.values())
            self._platforms.clear()
        for platform, _queue in platforms:
            try:
                platform.close()
            except Exception:  # noqa: BLE001 - one platform's failure must not keep the others running
                log.exception("closing a platform")
