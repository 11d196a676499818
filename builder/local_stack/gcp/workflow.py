"""Starting a workflow at a Cloud Run entry function and waiting for its outcome in the store."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote

from builder.local_stack.process import DIRECT_HTTP, LocalStackError
from unum_entry.outcome import RunResult


def start_workflow(entry_url: str, input_value: Any, *, workflow_id: str | None = None,
                   timeout: float = 60.0) -> dict[str, Any]:
    """POST a workflow input to the entry function's HTTP endpoint; returns its JSON answer."""
    url = entry_url.rstrip("/") + "/" + (f"?workflow_id={quote(workflow_id)}" if workflow_id else "")
    request = urllib.request.Request(url, data=json.dumps(input_value).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with DIRECT_HTTP.open(request, timeout=timeout) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer
    except urllib.error.HTTPError as exc:
        raise LocalStackError(f"starting a workflow at {url} answered {exc.code}: "
                              f"{exc.read().decode(errors='replace')[:500]}") from exc


def wait_for_outcome(store: Any, workflow_id: str, *, timeout: float = 120.0, settle: float = 1.0) -> RunResult:
    """Poll the store until the workflow has finished (results or a failure, and nothing else in
    flight but its start marker) and stayed so for `settle` seconds; returns its RunResult.
    Raises LocalStackError with what it saw last on timeout."""
    from unum_entry.outcome import read_outcome

    deadline = time.monotonic() + timeout
    finished_since: float | None = None
    while True:
        outcome = read_outcome(store, workflow_id)
        finished = outcome.failure is not None or outcome.status == "succeeded"
        now = time.monotonic()
        if finished:
            finished_since = finished_since or now
            if now - finished_since >= settle:
                return outcome
        else:
            finished_since = None
        if now >= deadline:
            raise LocalStackError(f"workflow {workflow_id} did not finish within {timeout:.0f} s: status "
                                  f"{outcome.status}, results {outcome.results!r}, pending {outcome.pending}")
        time.sleep(0.25)
