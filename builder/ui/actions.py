"""What the web UI may change: actions are POSTs that a page from another origin cannot forge
through the user's browser.

Two checks, both required (`check`): the request's `Origin` is the UI's own
(`http://127.0.0.1:PORT`; a browser always sends it with a POST, and a page elsewhere cannot
set it), and its form carries this server's session token, a random value made when the server
starts and written only into its own pages (another origin cannot read them). The actions:
`stop` (builder.runs.stop.stop, as `python -m builder stop`: the store decides whether the
workflow had ended), and `redrive`, `task-success`, `task-failure`: the command line's own
commands, run by `run_action` as child processes.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
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


def run_action(store: Store, action: str, form: Mapping[str, list[str]], *, store_url: str | None = None) -> str:
    """Perform `action` on the workflow the form names; returns the workflow id. Raises UnumError
    with one line for what cannot be done (an unknown action, a workflow that already ended).

    `stop` acts here (one store decision, builder.runs.stop). `redrive`, `task-success` and
    `task-failure` are the command line's own commands, run as a child process over `store_url`
    (`CommandAction`): so the console's redrive is journaled on run's durable queue, drives the
    workflow under the driver lease, re-arms its timers and runs its pinned version, exactly as
    `python -m builder redrive` does, and a console that is closed or killed leaves it running
    (or, killed too, `interrupted` with the command that continues it)."""
    from builder.runs.stop import stop

    workflow = (form.get("w") or [""])[0]
    if not workflow:
        raise UnumError("no workflow named (w=)")
    if action == "stop":
        stop(store, workflow, error=(form.get("error") or [""])[0] or None,
             cause=(form.get("cause") or [""])[0] or None)
        return workflow
    if action not in ("redrive", "task-success", "task-failure"):
        raise UnumError(f"unknown action {action!r} (this page can: stop, redrive, task-success, task-failure)")
    if not store_url:
        raise UnumError(f"{action}: this console was started without a store URL; use the command line")
    CommandAction.of(store, workflow, action, form, store_url).start()
    return workflow


@dataclass(frozen=True, slots=True)
class CommandAction:
    """One console action run as `python -m builder ARGV` in a child process of its own session.

    `start` returns once the command has acted: it printed a line starting with `accepted` (the
    redrive's "redrive N of workflow ..." once what it sends is on disk), or it is still running
    after `grace` seconds, or it exited 0. A command that exits non-zero before that raises
    UnumError with its last line (its one-line refusal). The child's stderr is kept in `log`."""

    argv: tuple[str, ...]
    accepted: str | None
    grace: float = 5.0

    @classmethod
    def of(cls, store: Store, workflow: str, action: str, form: Mapping[str, list[str]],
           store_url: str) -> CommandAction:
        def one(key: str) -> str:
            return (form.get(key) or [""])[0]

        if action == "redrive":
            return cls(("redrive", workflow, "--store", store_url), accepted="redrive ")
        from builder.runs import start_record

        recorded = start_record.read(store, workflow)
        if recorded is None or not recorded.folder:
            raise UnumError(f"the store has no record of where {workflow} was run from: use the command line "
                            "with --workflow FOLDER")
        token = one("task_token")
        if not token:
            raise UnumError(f"{action}: no task token (task_token=)")
        if action == "task-success":
            detail: tuple[str, ...] = ("--output", one("output") or "null")
        else:
            detail = tuple(x for flag, value in (("--error", one("error")), ("--cause", one("cause"))) if value
                           for x in (flag, value))
        return cls((action, token, *detail, "--workflow", recorded.folder, "--store", store_url), accepted=None)

    def start(self) -> None:
        import subprocess
        import sys
        import tempfile
        import threading
        import time

        log = tempfile.NamedTemporaryFile(prefix=f"unum-ui-{self.argv[0]}-", suffix=".log", delete=False)
        with log:
            child = subprocess.Popen([sys.executable, "-m", "builder", *self.argv], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        threading.Thread(target=child.wait, name="unum-ui-action", daemon=True).start()  # reaped when it ends
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline:
            code = child.poll()
            lines = _lines(log.name)
            if code is not None:
                if code == 0:
                    return
                said = next((line for line in reversed(lines) if line.strip()), f"exit status {code}")
                raise UnumError(said.removeprefix("error: ").strip())
            if self.accepted is not None and any(line.startswith(self.accepted) for line in lines):
                return
            time.sleep(0.05)


def _lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []
