"""The handler of a compiled Step Functions function: `unum-asl.json` + the user's handler.

The compiler writes a two-line `unum_asl_main.py` into every function folder:

    from unum_entry.asl.function import make_handler
    handler = make_handler(__file__)

`UNUM_ASL_TIME_SCALE` (a number, default 1) scales every Wait and Retry delay: tests and local
runs of long-waiting machines set it below 1. `UNUM_ASL_DATA_LIMIT` (bytes, default 262144 as
Step Functions' payload quota) bounds every state's input and output (`States.DataLimitExceeded`);
`off` lifts it: unum carries large values by reference, so the quota is only there for parity.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from unum_entry.asl.runner import DATA_LIMIT, FRAGMENT_VERSION, Fragment, Handler, Services, run
from unum_entry.errors import ConfigurationError, HandlerLoadError
from unum_entry.steps import durable, is_durable
from unum_entry.ir import time_scale

FRAGMENT_FILE_NAME = "unum-asl.json"
MAIN_MODULE = "unum_asl_main"
DATA_LIMIT_ENV = "UNUM_ASL_DATA_LIMIT"


def make_handler(module_file: str | Path) -> Handler:
    """The unum handler of the function whose folder holds `module_file`."""
    folder = Path(module_file).resolve().parent
    path = folder / FRAGMENT_FILE_NAME
    try:
        doc = json.loads(path.read_text())
        if doc.get("unum_asl") != FRAGMENT_VERSION:
            raise ValueError(f"unum_asl: expected version {FRAGMENT_VERSION}, found {doc.get('unum_asl')!r}")
        fragment = Fragment.from_json(doc)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HandlerLoadError(f"{path}: not a valid state machine fragment: {exc}") from exc
    user: Callable[[Any, Any], Any] | None = None
    # A service integration Task (asl/integrations); a mocked Task calls nothing (asl/mocked.py).
    if fragment.task is not None and not doc.get("handler") and fragment.mock is None:
        from unum_entry.asl import detached
        task = fragment.states[fragment.task]
        from unum_entry.asl import activities
        if detached.MARK in task:  # fire-and-forget startExecution: the child starts as its own workflow
            user = detached.DetachedStart(task[detached.MARK])
        elif activities.is_activity(task.get("Resource")):  # its worker polls for the input instead
            user = activities.no_call
        else:
            from unum_entry.asl.integrations import handler_for
            user = handler_for(task["Resource"])
    if doc.get("handler"):
        from unum_entry.handlers import load_handler
        user = load_handler(folder, doc["handler"], function=fragment.function)

    def handler(event: Any, context: Any) -> Any:
        services = Services(sleep=time.sleep, time_scale=time_scale(), data_limit=data_limit())
        return run(fragment, user, event, context, services, note=True)

    if user is not None:
        # A `@durable` user handler makes this function durable; its compensations are found
        # in the user's module (steps resolve them through `__wrapped__`).
        handler.__wrapped__ = user  # type: ignore[attr-defined]
        if is_durable(user):
            durable(handler)
    if fragment.task is not None and fragment.mock is None and not is_durable(handler):
        from unum_entry.asl.callbacks import waits
        if waits(fragment.states[fragment.task]):
            # Its task token's nonce is a journaled step: every execution sends the same token.
            durable(handler)
    return handler


def data_limit() -> int | None:
    """`UNUM_ASL_DATA_LIMIT`: a byte count, or None for `off`/`none`; Step Functions' 256 KiB
    when unset. Raises ConfigurationError for anything else."""
    raw = os.environ.get(DATA_LIMIT_ENV, "").strip()
    if not raw:
        return DATA_LIMIT
    if raw.lower() in ("off", "none"):
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value <= 0:
        raise ConfigurationError(f"{DATA_LIMIT_ENV}={raw!r}: expected a positive number of bytes, or 'off'")
    return value
