"""Durable timers on Google Cloud: Cloud Tasks HTTP tasks with `schedule_time` (`PubSubInvoker.invoke_at`).

A timer is a task in the workflow's queue (`tasks_queue=projects/P/locations/L/queues/Q` in the
invoker URL) whose HTTP request, at `schedule_time`, *publishes the envelope to the function's
Pub/Sub topic* (`POST https://pubsub.googleapis.com/v1/projects/P/topics/T:publish`, with an
OAuth token of `tasks_sa`, the service account the deploy script lets Cloud Tasks act as). So a
timer reaches the function exactly as any invoke does - the same push subscription, the same
message form (`PubSubInvoker`'s msgpack data and attributes, plus `unum_timer` = the timer's
name), the same redelivery and dead-lettering - and the queue needs no Cloud Run URL.

- task id = the timer's name (`unum_entry.naming.timer_name`); `AlreadyExists` means another
  execution armed it: success. (Real Cloud Tasks also refuses a name for about an hour after
  its task ran; the emulator does not de-duplicate: the receiving runtime absorbs duplicates.)
- Cloud Tasks schedules at most `MAX_SCHEDULE_AHEAD` (30 days) ahead. A later timer is chained:
  the task fires at the furthest point it can, carrying the same envelope; the delivery is an
  early timer, which the receiving runtime re-arms (`invoke_at` with the same `when` and
  name). Hop k before the end is task `NAME-k`, so re-arming never collides with the spent
  task id; hop ids depend only on `when` and the clock at arming, so executions that arm the
  same hop together arm the same task.
- a timer already due (`when` at most `DUE_MARGIN` ahead) is a plain publish.
- a task is at most 100 KB: envelopes above `TASK_MESSAGE_LIMIT` bytes of msgpack go by
  reference, as `PubSubInvoker` sends oversized ones.

Against the local stack, `CLOUD_TASKS_EMULATOR_HOST` (`127.0.0.1:PORT`, gcloud-tasks-emulator)
selects an insecure gRPC channel, and `PUBSUB_EMULATOR_HOST` makes the task publish to the
Pub/Sub emulator's REST endpoint without a token.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from unum_entry.errors import ConfigurationError, InvokeError

EMULATOR_ENV = "CLOUD_TASKS_EMULATOR_HOST"
MAX_SCHEDULE_AHEAD = 30 * 86400.0
CHAIN_MARGIN = 3600.0  # a chained hop fires this long before Cloud Tasks' limit (clock differences)
DUE_MARGIN = 1.0
TASK_MESSAGE_LIMIT = 64 * 1024  # msgpack bytes: base64 and JSON around it stay under the 100 KB task limit
ATTRIBUTE_TIMER = "unum_timer"
PUBSUB_SCOPE = "https://www.googleapis.com/auth/pubsub"
_QUEUE = re.compile(r"^projects/[^/]+/locations/[^/]+/queues/[A-Za-z0-9-]{1,100}$")


def parse_queue(queue: str) -> str:
    """A queue's full name; raises ConfigurationError naming the expected form."""
    if not _QUEUE.match(queue):
        raise ConfigurationError(f"invoker URL: tasks_queue: expected projects/PROJECT/locations/LOCATION/queues/QUEUE, "
                                 f"found {queue!r}")
    return queue


def hop(when: float, now: float, *, ahead: float = MAX_SCHEDULE_AHEAD - CHAIN_MARGIN) -> tuple[float, int]:
    """(schedule time, hops still to go after it) of a timer due at `when`, armed at `now`."""
    if when - now <= ahead:
        return when, 0
    remaining = math.ceil((when - now - ahead) / ahead)  # hops after this one
    return when - remaining * ahead, remaining


def publish_url(project: str, topic: str) -> str:
    """The Pub/Sub REST publish URL of a topic (the emulator's when PUBSUB_EMULATOR_HOST is set)."""
    host = os.environ.get("PUBSUB_EMULATOR_HOST")
    base = f"http://{host}" if host else "https://pubsub.googleapis.com"
    return f"{base}/v1/projects/{project}/topics/{topic}:publish"


class CloudTasksTimers:
    """`invoke_at` through one CloudTasksClient (created on first use; thread-safe)."""

    def __init__(self, *, queue: str, project: str, topic: Callable[[str], str],
                 message: Callable[[Mapping[str, Any], str], bytes],
                 publish_now: Callable[[str, Mapping[str, Any]], None], service_account: str = "",
                 client: Any = None, clock: Callable[[], float] = time.time) -> None:
        self.queue = parse_queue(queue)
        self.project = project
        self.service_account = service_account
        self._topic = topic
        self._message = message
        self._publish_now = publish_now
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        if not service_account and not os.environ.get("PUBSUB_EMULATOR_HOST"):
            raise ConfigurationError("invoker URL: tasks_queue needs tasks_sa=SERVICE_ACCOUNT_EMAIL (the identity "
                                     "Cloud Tasks publishes timers with; the deploy script sets it)")

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = build_tasks_client()
            return self._client

    def task(self, when: float, function: str, payload: Mapping[str, Any], *, name: str) -> Any:
        """The task that arms this timer now (see the module docstring)."""
        from google.cloud import tasks_v2  # lazy: grpc and protobuf are heavy

        at, remaining = hop(when, self._clock())
        workflow = str(payload.get("workflow", ""))
        message = {"data": base64.b64encode(self._message(payload, workflow)).decode(),
                   "attributes": {"unum_function": function, "unum_workflow": workflow, ATTRIBUTE_TIMER: name}}
        request = tasks_v2.HttpRequest(
            url=publish_url(self.project, self._topic(function)), http_method=tasks_v2.HttpMethod.POST,
            headers={"Content-Type": "application/json"},
            body=json.dumps({"messages": [message]}, separators=(",", ":")).encode())
        if self.service_account:
            request.oauth_token = tasks_v2.OAuthToken(service_account_email=self.service_account, scope=PUBSUB_SCOPE)
        schedule = datetime.fromtimestamp(math.ceil(at * 1e6) / 1e6, tz=timezone.utc)  # never early
        task_id = name if remaining == 0 else f"{name}-{remaining}"
        return tasks_v2.Task(name=f"{self.queue}/tasks/{task_id}", schedule_time=schedule, http_request=request)

    def arm(self, when: float, function: str, payload: Mapping[str, Any], *, name: str) -> None:
        """Create the task; an existing task of that name is success. Raises InvokeError."""
        if when - self._clock() <= DUE_MARGIN:
            self._publish_now(function, payload)
            return
        from google.api_core import exceptions

        task = self.task(when, function, payload, name=name)
        try:
            self.client().create_task(parent=self.queue, task=task, timeout=30)
        except exceptions.AlreadyExists:
            return
        except Exception as exc:  # google.api_core errors, a closed channel
            raise InvokeError(f"Cloud Tasks: creating timer {task.name} for {function!r} failed: "
                              f"{type(exc).__name__}: {exc}") from exc


def build_tasks_client() -> Any:
    """A CloudTasksClient: Google's endpoint, or the emulator at $CLOUD_TASKS_EMULATOR_HOST."""
    from google.cloud import tasks_v2  # lazy: grpc and protobuf are heavy

    host = os.environ.get(EMULATOR_ENV)
    if not host:
        return tasks_v2.CloudTasksClient()
    import grpc  # type: ignore[import-untyped]
    from google.cloud.tasks_v2.services.cloud_tasks.transports import CloudTasksGrpcTransport

    return tasks_v2.CloudTasksClient(transport=CloudTasksGrpcTransport(channel=grpc.insecure_channel(host)))
