"""The Cloud Run functions adapter: functions-framework serving `Runtime.handle` on `$PORT`.

Two signatures (functions-framework's own `FUNCTION_SIGNATURE_TYPE`, default `cloudevent`):

- `cloudevent`: the function is triggered by its Pub/Sub topic, through an Eventarc trigger
  (binary CloudEvent) or a plain push subscription (functions-framework converts the legacy push
  body). Any path, POST.
- `http`: the workflow's entry function. `POST /pubsub` takes push deliveries exactly as above (a
  loop can re-invoke the entry); `POST` to any other path starts a workflow with the JSON body as
  its input (`?workflow_id=ID` makes the start idempotent: a retried POST with the same id starts
  nothing new) and answers once the entry has committed and dispatched; `GET` says which function
  this is.

Acknowledgement is the HTTP status: 2xx acks, anything else makes Pub/Sub redeliver. The adapter
acks only what it finished (committed and dispatched), what it recorded as failed (`Runtime.fail`)
or re-published for a retry, stale duplicates, and messages no retry could ever process
(malformed; logged). Store or publish trouble and crashes answer 500, so Pub/Sub redelivers and
the checkpoints absorb the repeat.

Handler errors are retried by the adapter (as on Lambda): it re-publishes the envelope with
`attempt + 1` to its own topic after a backoff, so the IR's `max_attempts` holds whatever the
subscription's settings; the last failure calls `Runtime.fail`. (Pub/Sub's `deliveryAttempt` is
only present with a dead-letter policy and counts crashes too; it is not relied on.)
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from unum_entry.codec import decode
from unum_entry.errors import ConfigurationError, EnvelopeError, StaleInvocation, UnumError
from unum_entry.frozen import ReadOnly
from unum_entry.invokers.lambda_event import Delivery, from_event
from unum_entry.platforms.common import FunctionSettings, LoadedFunction, RetryPolicy, load_function, run_delivery
from unum_entry.runtime import new_workflow

log = logging.getLogger("unum.cloud_run")

ADAPTER_KEY = "unum.adapter"  # where the app keeps its adapter (flask config), instead of a global
PUSH_PATH = "/pubsub"
TARGETS_SOURCE = Path(__file__).with_name("cloud_run_targets.py")


class Signature(str, enum.Enum):
    """functions-framework signature types the adapter serves."""

    CLOUDEVENT = "cloudevent"
    HTTP = "http"


class ServeSettings(ReadOnly):
    """Where and how to serve: `HOST` (default 0.0.0.0), `PORT` (Cloud Run sets it; default
    8080) and `FUNCTION_SIGNATURE_TYPE` (default cloudevent), named as functions-framework's."""

    __slots__ = ("host", "port", "signature")

    host: Final[str]
    port: Final[int]
    signature: Final[Signature]

    def __init__(self, host: str = "0.0.0.0", port: int = 8080, signature: Signature = Signature.CLOUDEVENT) -> None:
        self.host = host
        self.port = port
        self.signature = signature

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ServeSettings:
        raw_port = environ.get("PORT") or "8080"
        if not raw_port.isdigit() or not 0 < int(raw_port) < 65536:
            raise ConfigurationError(f"PORT: expected a TCP port number, found {raw_port!r}")
        raw_signature = environ.get("FUNCTION_SIGNATURE_TYPE") or Signature.CLOUDEVENT.value
        try:
            signature = Signature(raw_signature)
        except ValueError:
            raise ConfigurationError(f"FUNCTION_SIGNATURE_TYPE: expected one of "
                                     f"{', '.join(s.value for s in Signature)}, found {raw_signature!r}") from None
        return cls(host=environ.get("HOST") or "0.0.0.0", port=int(raw_port), signature=signature)


class CloudRunAdapter:
    """Turns Pub/Sub messages and start requests into `Runtime.handle` / `Runtime.fail` calls.

    Every public method returns a small JSON-able summary when the delivery may be acked and
    raises when it must be redelivered.
    """

    def __init__(self, loaded: LoadedFunction, *, retry: RetryPolicy | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.loaded = loaded
        self.retry = retry or RetryPolicy()
        self._sleep = sleep

    @property
    def function(self) -> str:
        return self.loaded.ir.function

    def on_message(self, message: Any) -> dict[str, Any]:
        """One Pub/Sub message (`{"data": base64, "messageId": …, "attributes": …}`)."""
        try:
            delivery = self._decode(message)
        except StaleInvocation as exc:
            log.info("%s: dropped: %s", self.function, exc)
            return {"function": self.function, "stale": True}
        except UnumError as exc:  # malformed: no redelivery can help, and there is no envelope to fail
            log.error("%s: dropped malformed Pub/Sub message %s: %s", self.function, _message_id(message), exc)
            return {"function": self.function, "dropped": str(exc)}
        message_id = _message_id(message)
        return self._run(delivery, request_id=None if message_id == "?" else message_id)

    def start(self, input_value: Any, workflow_id: str | None = None) -> dict[str, Any]:
        """Start a workflow at this function (it must be the entry) with `input_value`."""
        return self._run(Delivery(new_workflow(input_value, workflow_id)))

    def _run(self, delivery: Delivery, *, request_id: str | None = None) -> dict[str, Any]:
        return run_delivery(self.loaded, delivery.envelope, delivery.stored_key, retry=self.retry, sleep=self._sleep,
                            request_id=request_id)

    def _decode(self, message: Any) -> Delivery:
        if not isinstance(message, Mapping) or not isinstance(message.get("data"), str):
            raise EnvelopeError(f"Pub/Sub message: expected an object with base64 'data', found "
                                f"{type(message).__name__} with keys {sorted(message) if isinstance(message, Mapping) else '-'}")
        try:
            data = base64.b64decode(message["data"], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise EnvelopeError(f"Pub/Sub message {_message_id(message)}: data is not base64: {exc}") from exc
        event = _decode_data(data)
        delivery = from_event(event, store=self.loaded.store)
        if delivery is not None:
            return delivery
        # Not an envelope: the input of a new workflow published by a client. Its id derives
        # from the message id, so every redelivery of that message starts the same workflow.
        message_id = message.get("messageId") or message.get("message_id")
        return Delivery(new_workflow(event, f"wf-{message_id}" if message_id else None))


def _decode_data(data: bytes) -> Any:
    """Message data: msgpack (what the invoker publishes) or JSON (what a person publishes)."""
    try:
        return decode(data)
    except Exception:  # msgpack raises several unrelated types; JSON is the fallback
        pass
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise EnvelopeError(f"Pub/Sub message data is neither msgpack nor JSON ({len(data)} bytes): {exc}") from exc


def _message_id(message: Any) -> str:
    if isinstance(message, Mapping):
        return str(message.get("messageId") or message.get("message_id") or "?")
    return "?"


def create_app(adapter: CloudRunAdapter, signature: Signature) -> Any:
    """The functions-framework (Flask) app serving `adapter` with `signature`."""
    import functions_framework  # lazy: Flask, werkzeug, cloudevents

    app = functions_framework.create_app(target=f"unum_{signature.value}", source=str(TARGETS_SOURCE),
                                         signature_type=signature.value)
    app.config[ADAPTER_KEY] = adapter
    return app


def main() -> int:
    """Init (IR, handler, clients), then serve on `$PORT` until stopped."""
    logging.basicConfig(level=os.environ.get("UNUM_LOG_LEVEL", "INFO"))
    try:
        serve = ServeSettings.from_env(os.environ)
        loaded = load_function(FunctionSettings.from_env(os.environ))
    except UnumError as exc:
        print(f"unum_entry: cannot start: {exc}", file=sys.stderr)
        return 2
    adapter = CloudRunAdapter(loaded, retry=RetryPolicy.from_env(os.environ))
    app = create_app(adapter, serve.signature)
    log.info("%s: serving %s on %s:%d", loaded.ir.function, serve.signature.value, serve.host, serve.port)
    from functions_framework._http import create_server  # what the functions-framework CLI runs (gunicorn)

    create_server(app, debug=False).run(serve.host, serve.port)
    return 0
