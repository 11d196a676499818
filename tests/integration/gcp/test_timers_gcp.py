"""Durable timers on Google Cloud, over the wire: `PubSubInvoker.invoke_at` creates a Cloud Tasks
task (gcloud-tasks-emulator, gRPC) named by the timer that, when due, publishes the envelope to
the function's topic on the Pub/Sub emulator; a push subscription delivers it to a local HTTP
server exactly as any invoke is delivered (msgpack data, function/workflow attributes, plus the
timer's name). Nothing arrives before `when`."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler

import pytest

from builder.local_stack.http_server import BackgroundHttpServer
from unum_entry.codec import decode
from unum_entry.errors import ConfigurationError
from unum_entry.invokers import open_invoker
from unum_entry.invokers.pubsub import subscription_name, topic_name
from unum_entry.naming import timer_name

pytestmark = pytest.mark.integration


class PushRecorder:
    """A push endpoint that records (arrival time, Pub/Sub message) and acks."""

    def __init__(self) -> None:
        self.messages: list[tuple[float, dict]] = []
        self.arrived = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.messages.append((time.time(), body["message"]))
                owner.arrived.set()
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = BackgroundHttpServer(Handler, name="push-recorder").start()

    def close(self) -> None:
        self.server.stop()


@pytest.fixture
def wired(pubsub_emulator, cloud_tasks_emulator):
    """(invoker, recorder, queue, prefix): function `Later`'s topic pushes to the recorder."""
    prefix = f"unum-t{uuid.uuid4().hex[:8]}-"
    queue = f"projects/{pubsub_emulator.project}/locations/local/queues/{prefix}timers"
    cloud_tasks_emulator.create_queue(queue)
    recorder = PushRecorder()
    topic = topic_name(prefix, "Later")
    pubsub_emulator.create_topic(topic)
    pubsub_emulator.create_push_subscription(subscription_name(prefix, "Later"), topic, recorder.server.url + "/pubsub")
    invoker = open_invoker(f"pubsub://{pubsub_emulator.project}?prefix={prefix}&tasks_queue={queue}")
    try:
        yield invoker, recorder, queue, prefix
    finally:
        recorder.close()


def _payload(workflow: str) -> dict:
    return {"unum": 1, "workflow": workflow, "function": "Later", "value": b"\x00bytes survive"}


def _wait_for(recorder: PushRecorder, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(recorder.messages) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_timer_is_a_named_task_that_delivers_through_the_topic_once(wired, cloud_tasks_emulator) -> None:
    invoker, recorder, queue, _ = wired
    name = timer_name("wf-gcp", "wait", "Later")
    when = time.time() + 3
    invoker.invoke_at(when, "Later", _payload("wf-gcp"), name=name)

    (task,) = cloud_tasks_emulator.tasks(queue)
    assert task.name == f"{queue}/tasks/{name}"
    assert abs(task.schedule_time.timestamp() - when) < 1e-3
    assert task.http_request.url.endswith(f"/v1/projects/{invoker.project}/topics/{invoker.topic_path('Later').rsplit('/', 1)[1]}:publish")

    _wait_for(recorder, 1, timeout=30)
    time.sleep(1.5)  # a second delivery would have come by now
    assert len(recorder.messages) == 1
    arrived, message = recorder.messages[0]
    assert arrived >= when
    assert decode(base64.b64decode(message["data"])) == _payload("wf-gcp")
    assert message["attributes"] == {"unum_function": "Later", "unum_workflow": "wf-gcp", "unum_timer": name}
    assert cloud_tasks_emulator.tasks(queue) == []


def test_a_due_timer_is_a_plain_publish(wired, cloud_tasks_emulator) -> None:
    invoker, recorder, queue, _ = wired
    invoker.invoke_at(time.time() - 1, "Later", _payload("wf-due"), name=timer_name("wf-due", "retry"))
    assert cloud_tasks_emulator.tasks(queue) == []
    _wait_for(recorder, 1, timeout=30)
    assert [decode(base64.b64decode(m["data"]))["workflow"] for _, m in recorder.messages] == ["wf-due"]
    assert "unum_timer" not in recorder.messages[0][1].get("attributes", {})


def test_timer_configuration_errors_are_one_line(pubsub_emulator) -> None:
    plain = open_invoker(f"pubsub://{pubsub_emulator.project}?prefix=x-")
    with pytest.raises(ConfigurationError, match="no Cloud Tasks queue .*tasks_queue="):
        plain.invoke_at(time.time() + 60, "F", _payload("wf"), name=timer_name("wf", "wait"))
    with pytest.raises(ConfigurationError, match="tasks_queue: expected projects/PROJECT/locations/LOCATION/queues/QUEUE"):
        open_invoker(f"pubsub://{pubsub_emulator.project}?tasks_queue=my-queue")
