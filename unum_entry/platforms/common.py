"""Load one function once per process from its image: IR, handler, store, invoker, Runtime.

Configuration comes from the environment (the function image sets the first; deploy templates
and the local stack set the others):

- `UNUM_FUNCTION_DIR` (default `/var/task`): the user code and its `unum-ir.json`.
- `UNUM_STORE`: a store URL for `open_store` (e.g. `dynamodb://TABLE?region=us-east-1`).
- `UNUM_INVOKER`: an invoker URL for `open_invoker` (e.g. `lambda://?prefix=my-stack-`).
- `UNUM_INLINE_LIMIT` (bytes, optional): values larger than this travel by reference.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unum_entry.egress import Invoker
from unum_entry.envelope import Envelope
from unum_entry.errors import ConfigurationError, HandlerFailed
from unum_entry.ir import IR_FILE_NAME, FunctionIR, load_ir
from unum_entry.runtime import Runtime, RuntimeConfig, load_handler
from unum_entry.stores.base import Store

DEFAULT_FUNCTION_DIR = "/var/task"

log = logging.getLogger("unum.platform")


@dataclass(frozen=True)
class FunctionSettings:
    """What `load_function` needs, read from the environment by `from_env`."""

    function_dir: Path
    store_url: str
    invoker_url: str
    config: RuntimeConfig

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> FunctionSettings:
        """Raises ConfigurationError naming the missing or malformed variable."""
        missing = [name for name in ("UNUM_STORE", "UNUM_INVOKER") if not environ.get(name)]
        if missing:
            raise ConfigurationError(f"environment variable {missing[0]} is not set "
                                     f"(UNUM_STORE: a store URL, UNUM_INVOKER: an invoker URL)")
        config = RuntimeConfig()
        raw_limit = environ.get("UNUM_INLINE_LIMIT")
        if raw_limit:
            try:
                config = RuntimeConfig(inline_limit=int(raw_limit))
            except ValueError:
                raise ConfigurationError(f"UNUM_INLINE_LIMIT: expected a number of bytes, found {raw_limit!r}") from None
        return cls(function_dir=Path(environ.get("UNUM_FUNCTION_DIR") or DEFAULT_FUNCTION_DIR),
                   store_url=environ["UNUM_STORE"], invoker_url=environ["UNUM_INVOKER"], config=config)


@dataclass(frozen=True)
class LoadedFunction:
    """One function ready to handle deliveries; built once per process (the init phase)."""

    ir: FunctionIR
    runtime: Runtime
    store: Store
    invoker: Invoker


def load_function(settings: FunctionSettings) -> LoadedFunction:
    """IR, then handler, then store and invoker clients, then the Runtime. Raises an UnumError
    subclass (IRError, HandlerLoadError, ConfigurationError, StoreError) naming what is wrong."""
    from unum_entry.invokers import open_invoker
    from unum_entry.stores import open_store

    ir_path = settings.function_dir / IR_FILE_NAME
    if not ir_path.is_file():
        raise ConfigurationError(f"{ir_path}: missing (UNUM_FUNCTION_DIR={settings.function_dir} "
                                 f"must hold the function's code and {IR_FILE_NAME})")
    ir = load_ir(ir_path)
    handler = load_handler(settings.function_dir, ir.handler, function=ir.function)
    store = open_store(settings.store_url)
    invoker = open_invoker(settings.invoker_url, store=store)
    runtime = Runtime(ir, handler, store, invoker, config=settings.config)
    return LoadedFunction(ir=ir, runtime=runtime, store=store, invoker=invoker)


@dataclass(frozen=True)
class RetryPolicy:
    """Delay before an adapter re-invokes a failed handler: `base * 2**attempt`, at most `cap`
    seconds (Step Functions' IntervalSeconds=1, BackoffRate=2 by default)."""

    base: float = 1.0
    cap: float = 30.0

    def delay(self, attempt: int) -> float:
        return min(self.cap, self.base * (2 ** attempt))

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> RetryPolicy:
        raw = environ.get("UNUM_RETRY_BASE_DELAY")
        if not raw:
            return cls()
        try:
            return cls(base=float(raw))
        except ValueError:
            raise ConfigurationError(f"UNUM_RETRY_BASE_DELAY: expected seconds, found {raw!r}") from None


def retry_or_fail(loaded: LoadedFunction, env: Envelope, exc: HandlerFailed, *, retry: RetryPolicy,
                  sleep: Callable[[float], None]) -> dict[str, Any]:
    """A handler failed: re-invoke this function with `attempt + 1` after the policy's delay
    while the IR's `max_attempts` allows, else record the workflow's failure (`Runtime.fail`).
    Both adapters retry handler errors themselves so the attempt count is exact whatever the
    platform's own redelivery settings. Returns a summary for the platform's answer."""
    ir = loaded.ir
    if env.attempt + 1 < ir.max_attempts:
        sleep(retry.delay(env.attempt))
        log.warning("%s: attempt %d failed (%s); retrying", ir.function, env.attempt + 1, exc)
        loaded.invoker.invoke(ir.function, env.next_attempt().to_wire())
        return {"retrying": env.attempt + 1, "error": str(exc)}
    log.error("%s: workflow %s failed after %d attempt(s): %s", ir.function, env.workflow, env.attempt + 1, exc)
    loaded.runtime.fail(env, exc)
    return {"failed": str(exc)}


def run_delivery(loaded: LoadedFunction, envelope: Envelope, stored_key: str | None, *, retry: RetryPolicy,
                 sleep: Callable[[float], None]) -> dict[str, Any]:
    """Handle one decoded delivery the way both platforms need it; returns a summary.

    Handler errors retry or fail the workflow (`retry_or_fail`); a request that does not fit the
    IR fails it (no retry can help); store and invoke errors are raised, so the platform redelivers
    (Lambda's async retries, a Pub/Sub 500). A stored (by-reference) envelope is deleted once
    handled."""
    from unum_entry.errors import InvokeError, StoreError, UnumError

    runtime, function = loaded.runtime, loaded.ir.function
    summary: dict[str, Any] = {"function": function, "workflow": envelope.workflow, "attempt": envelope.attempt}
    try:
        report = runtime.handle(envelope)
    except HandlerFailed as exc:
        summary.update(retry_or_fail(loaded, envelope, exc, retry=retry, sleep=sleep))
    except (StoreError, InvokeError):
        raise  # transient platform trouble: the platform redelivers
    except UnumError as exc:  # the request does not fit the IR: retrying cannot help
        log.error("%s: workflow %s failed: %s", function, envelope.workflow, exc)
        runtime.fail(envelope, exc)
        summary["failed"] = str(exc)
    else:
        if report is None:
            summary["stale"] = True
        else:
            summary.update(committed=report.created, invoked=report.invoked, terminal=report.terminal)
    if stored_key is not None:
        loaded.store.delete([stored_key])
    return summary
