"""Pub/Sub invoker: one topic per function; an invoke publishes the envelope as message data.

URL: `pubsub://PROJECT?prefix=unum-chain-&limit=BYTES&timeout=SECONDS`
- `PROJECT`: the Google Cloud project (default `$GOOGLE_CLOUD_PROJECT`; the emulator's
  `demo-test` when only `$PUBSUB_EMULATOR_HOST` is set). The client honours `PUBSUB_EMULATOR_HOST`.
- `prefix`: function `F`'s topic is `topic_name(prefix, F)` = prefix + F; its push subscription
  is `subscription_name(prefix, F)`. Deploy scripts and the local stack use the same two functions.
- `limit`: message size above which the envelope goes by reference (default 10 MB - 64 KB;
  Pub/Sub's limit is 10 MB). The envelope is stored under a content-derived `e-…` key and the
  message carries `{"unum_envelope_ref": key, "workflow": …}`; the receiver deletes it when done.
- `timeout`: seconds to wait for Pub/Sub to accept one publish (default 60).
- `functions` (`A,B,C`): the workflow's functions, as deployed (the deploy script writes it):
  `has_function` answers from it, so a durable function's `context.invoke` of any other name
  fails at once, as Lambda's Invoke refuses an unknown function. Without it, a publish to a topic
  that does not exist (NotFound) is the refusal.
- `tasks_queue` (`projects/P/locations/L/queues/Q`) and `tasks_sa` (a service account email):
  durable timers (`invoke_at`) as Cloud Tasks tasks that publish to the function's topic when
  due (`unum_entry.invokers.cloud_tasks`). Without `tasks_queue`, `invoke_at` is a ConfigurationError.

Message data is the msgpack of the envelope's wire form (values may be bytes). Ordering is not
assumed and nothing relies on it; duplicate and redelivered messages are absorbed by the
checkpoints. The publisher client (a gRPC channel) is created on first use, so a process that
forks after loading (gunicorn) never shares a channel across the fork.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any

from unum_entry.codec import encode
from unum_entry.errors import ConfigurationError, EnvelopeError, InvokeError, TimersUnavailable
from unum_entry.invokers.cloud_tasks import TASK_MESSAGE_LIMIT, CloudTasksTimers
from unum_entry.invokers.lambda_event import BY_REF
from unum_entry.retention import Ledger, store_retention
from unum_entry.stores.base import Kind, Store
from unum_entry.urls import parse_resource_url

PUBSUB_MESSAGE_LIMIT = 10 * 1000 * 1000
DEFAULT_MESSAGE_LIMIT = PUBSUB_MESSAGE_LIMIT - 64 * 1024  # headroom for attributes and framing
DEFAULT_PUBLISH_TIMEOUT = 60.0
ATTRIBUTE_FUNCTION = "unum_function"
ATTRIBUTE_WORKFLOW = "unum_workflow"
_OPTIONS = ("prefix", "limit", "timeout", "tasks_queue", "tasks_sa", "functions")
# Pub/Sub resource names: start with a letter, 3-255 of these, not starting with "goog".
_RESOURCE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9._~+%-]{2,254}$")


def topic_name(prefix: str, function: str) -> str:
    """The topic that triggers `function`. Raises ConfigurationError when not a valid name."""
    return _resource(prefix + function, "topic", function)


def subscription_name(prefix: str, function: str) -> str:
    """The push subscription of `function`'s topic that delivers to its service."""
    return _resource(prefix + function + "-push", "subscription", function)


def _resource(name: str, what: str, function: str) -> str:
    if not _RESOURCE_NAME.match(name) or name.lower().startswith("goog"):
        raise ConfigurationError(f"function {function!r}: Pub/Sub {what} name {name!r} is invalid (3-255 of "
                                 "A-Z a-z 0-9 - _ . ~ + %, starting with a letter, not with 'goog'); "
                                 "choose another prefix")
    return name


class PubSubInvoker:
    """Publishes envelopes to `projects/PROJECT/topics/PREFIX+FUNCTION`. Thread-safe."""

    def __init__(self, project: str, *, prefix: str = "", store: Store | None = None,
                 limit: int = DEFAULT_MESSAGE_LIMIT, timeout: float = DEFAULT_PUBLISH_TIMEOUT,
                 publisher: Any = None, tasks_queue: str = "", tasks_sa: str = "", tasks_client: Any = None,
                 functions: frozenset[str] = frozenset()) -> None:
        if not project:
            raise ConfigurationError("Pub/Sub invoker: no project (use pubsub://PROJECT?prefix=… "
                                     "or set GOOGLE_CLOUD_PROJECT)")
        self.project = project
        self.prefix = prefix
        self.store = store
        self.limit = limit
        self.timeout = timeout
        self.functions = functions  # empty: not known here
        self._publisher = publisher
        self._lock = threading.Lock()
        self.timers: CloudTasksTimers | None = None
        if tasks_queue:
            self.timers = CloudTasksTimers(
                queue=tasks_queue, project=project, service_account=tasks_sa, client=tasks_client,
                topic=lambda function: topic_name(self.prefix, function), publish_now=self.invoke,
                message=lambda payload, workflow: self._message_data(payload, workflow, limit=TASK_MESSAGE_LIMIT))

    @classmethod
    def from_url(cls, url: str, *, store: Store | None = None, publisher: Any = None,
                 tasks_client: Any = None) -> PubSubInvoker:
        project, options = parse_invoker_url(url)
        return cls(project, prefix=options.get("prefix", ""), store=store, publisher=publisher,
                   tasks_queue=options.get("tasks_queue", ""), tasks_sa=options.get("tasks_sa", ""),
                   tasks_client=tasks_client,
                   functions=frozenset(f for f in options.get("functions", "").split(",") if f),
                   limit=int(options.get("limit", DEFAULT_MESSAGE_LIMIT)),
                   timeout=float(options.get("timeout", DEFAULT_PUBLISH_TIMEOUT)))

    def has_function(self, function: str) -> bool:
        """False only when the deployed functions are known (`functions=`) and `function` is not
        one of them; True otherwise (a publish to a missing topic then says so: NotFound)."""
        return not self.functions or function in self.functions

    def topic_path(self, function: str) -> str:
        return f"projects/{self.project}/topics/{topic_name(self.prefix, function)}"

    def invoke(self, function: str, payload: Mapping[str, Any]) -> None:
        """Publish one invocation; returns once Pub/Sub accepted it. Raises InvokeError."""
        workflow = str(payload.get("workflow", ""))
        data = self._message_data(payload, workflow)
        topic = self.topic_path(function)
        try:
            future = self.publisher().publish(topic, data, **{ATTRIBUTE_FUNCTION: function,
                                                               ATTRIBUTE_WORKFLOW: workflow})
            future.result(timeout=self.timeout)
        except Exception as exc:  # google.api_core errors, timeouts, a closed client
            raise InvokeError(f"publish to Pub/Sub topic {topic!r} (function {function!r}, workflow "
                              f"{workflow}) failed: {type(exc).__name__}: {exc}") from exc

    def invoke_at(self, when: float, function: str, payload: Mapping[str, Any], *, name: str) -> None:
        """A durable timer: a Cloud Tasks task named `name` that publishes `payload` to the
        function's topic at `when` (`unum_entry.invokers.cloud_tasks`). Raises InvokeError."""
        if self.timers is None:
            raise TimersUnavailable(f"timer {name} for {function!r}: this Pub/Sub invoker has no Cloud Tasks queue "
                                     "(add tasks_queue=projects/P/locations/L/queues/Q&tasks_sa=EMAIL to "
                                     "UNUM_INVOKER; the deploy script sets them)")
        self.timers.arm(when, function, payload, name=name)

    def publisher(self) -> Any:
        """The PublisherClient, created on first use."""
        with self._lock:
            if self._publisher is None:
                from google.cloud import pubsub_v1  # type: ignore[attr-defined]  # lazy: grpc and protobuf are heavy

                self._publisher = pubsub_v1.PublisherClient()
            return self._publisher

    def close(self) -> None:
        with self._lock:
            publisher, self._publisher = self._publisher, None
        if publisher is not None and hasattr(publisher, "stop"):
            publisher.stop()

    def _message_data(self, payload: Mapping[str, Any], workflow: str, *, limit: int | None = None) -> bytes:
        limit = self.limit if limit is None else min(limit, self.limit)
        packed = encode(dict(payload), what="envelope")
        if len(packed) <= limit:
            return packed
        if self.store is None:
            raise EnvelopeError(f"envelope for workflow {workflow!r} is {len(packed)} bytes, over the "
                                f"{limit}-byte message limit, and no store is configured to send it by reference")
        ledger = Ledger.bounded(workflow, payload.get("deadline") or 0, store_retention(self.store))
        key = ledger.envelope(packed)
        ledger.create(self.store, key, packed, Kind.CHECKPOINT)
        return encode({BY_REF: key, "workflow": workflow})


def parse_invoker_url(url: str) -> tuple[str, dict[str, str]]:
    """(project, options) of a `pubsub://` URL. Raises ConfigurationError naming the bad part."""
    netloc, options = parse_resource_url(url, scheme="pubsub", allowed=_OPTIONS, name=None,
                                         usage="pubsub://PROJECT?prefix=…",
                                         error=lambda message: ConfigurationError(f"invoker {message}"))
    if "limit" in options and not options["limit"].isdigit():
        raise ConfigurationError(f"invoker URL {url!r}: limit: expected a number of bytes, found {options['limit']!r}")
    if "timeout" in options:
        try:
            if float(options["timeout"]) <= 0:
                raise ValueError
        except ValueError:
            raise ConfigurationError(f"invoker URL {url!r}: timeout: expected seconds > 0, "
                                     f"found {options['timeout']!r}") from None
    project = netloc or os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GCLOUD_PROJECT") or ""
    if not project and os.environ.get("PUBSUB_EMULATOR_HOST"):
        project = "demo-test"
    if not project:
        raise ConfigurationError(f"invoker URL {url!r}: no project (pubsub://PROJECT?… or GOOGLE_CLOUD_PROJECT)")
    return project, options
