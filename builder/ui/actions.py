"""What the web UI may change: actions are POSTs that a page from another origin cannot forge
through the user's browser.

Two checks, both required (`check`): the request's `Origin` is the UI's own
(`http://127.0.0.1:PORT`; a browser always sends it with a POST, and a page elsewhere cannot
set it), and its form carries this server's session token, a random value made when the server
starts and written only into its own pages (another origin cannot read them). The actions:
`stop` (builder.runs.stop.stop, as `python -m builder stop`: the store decides whether the
workflow had ended) and `redrive`
(unum_entry.redrive on the embedded engine, as `python -m builder redrive`).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from unum_entry.errors import UnumError
from unum_entry.stores.base import Store

TOKEN_FIELD = "token"


class Forbidden(UnumError):
    """A POST that is not from the UI's own page (403)."""


def new_token() -> str:
    return secrets.token_urlsafe(24)


def check(headers: Mapping[str, str], form: Mapping[str, list[str]], *, origin: str, token: str) -> None:
    """Raise Forbidden unless the request came from this UI's page: its Origin and its token."""
    sent = headers.get("Origin")
    if sent != origin:
        raise Forbidden(f"origin {sent!r} is not this page's ({origin})")
    given = (form.get(TOKEN_FIELD) or [""])[0]
    if not given or not hmac.compare_digest(given, token):
        raise Forbidden("missing or wrong session token (reload the page)")


def run_action(store: Store, action: str, form: Mapping[str, list[str]]) -> str:
    """Perform `action` on the workflow the form names; returns the workflow id. Raises UnumError
    with one line for what cannot be done (an unknown action, a workflow that already ended)."""
    from builder.runs.stop import stop

    workflow = (form.get("w") or [""])[0]
    if not workflow:
        raise UnumError("no workflow named (w=)")
    if action == "redrive":
        redrive_here(store, workflow)
        return workflow
    if action in ("task-success", "task-failure"):
        complete_here(store, workflow, action, form)
        return workflow
    if action != "stop":
        raise UnumError(f"unknown action {action!r} (this page can: stop, redrive, task-success, task-failure)")
    stop(store, workflow, error=(form.get("error") or [""])[0] or None, cause=(form.get("cause") or [""])[0] or None)
    return workflow


def complete_here(store: Store, workflow: str, action: str, form: Mapping[str, list[str]]) -> None:
    """SendTaskSuccess / SendTaskFailure for the form's `task_token` (unum_entry.asl.callbacks),
    continuing the workflow on the embedded engine in this process (as `redrive_here`)."""
    import json

    from unum_entry.asl import callbacks

    def one(key: str) -> str:
        return (form.get(key) or [""])[0]

    if action == "task-success":
        try:
            outcome: dict[str, object] = {"output": json.loads(one("output") or "null")}
        except ValueError as exc:
            raise UnumError(f"output: not valid JSON ({exc})") from None
    else:
        outcome = {"error": one("error") or None, "cause": one("cause") or None}
    _in_background(store, workflow, lambda invoker: callbacks.complete(one("task_token"), outcome, store=store,
                                                                       invoker=invoker))


def redrive_here(store: Store, workflow: str, *, timeout: float = 600.0) -> None:
    """Redrive `workflow` (unum_entry.redrive) on the embedded engine in this process, from the
    folder its run recorded; the re-run goes on in a background thread (the page shows it live).
    Raises UnumError with one line when it cannot be redriven."""
    from unum_entry.redrive import redrive

    _in_background(store, workflow, lambda invoker: redrive(store, workflow, invoker), timeout=timeout)


def _in_background(store: Store, workflow: str, send: Callable[[Any], object], *, timeout: float = 600.0) -> None:
    """`send(invoker)` with the embedded engine's invoker for `workflow` (its recorded folder), then
    let the engine run what it sent in a background thread until idle."""
    import threading

    from unum_entry import load_workflow
    from unum_entry.local.platform import LocalPlatform

    from builder.runs import start_record
    from builder.runs.folders import runnable_workflow

    recorded = start_record.read(store, workflow)
    if recorded is None or not recorded.folder:
        raise UnumError(f"the store has no record of where {workflow} was run from: use the command line "
                        "with --workflow FOLDER")
    platform = LocalPlatform(load_workflow(runnable_workflow(recorded.folder)), store, workers=4)
    try:
        send(platform.invoker)
    except BaseException:
        platform.close()
        raise

    def finish() -> None:
        try:
            platform.wait_idle(timeout)
        except UnumError:
            pass  # still running after `timeout`: abandoned as a crash; the page shows what it left
        finally:
            platform.close()

    threading.Thread(target=finish, name=f"unum-redrive-{workflow}", daemon=True).start()
