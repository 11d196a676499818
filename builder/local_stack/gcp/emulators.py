"""Google's official Firestore and Pub/Sub emulators as managed processes on loopback.

    with FirestoreEmulator() as firestore, PubSubEmulator() as pubsub:
        env = {**firestore.env(), **pubsub.env()}     # FIRESTORE_EMULATOR_HOST, PUBSUB_EMULATOR_HOST

Each emulator is a `gcloud` wrapper process with a `java` child; `stop()` ends the whole process
group (killing only the wrapper leaves java running). Everything is spoken over the emulators'
REST endpoints with urllib, so these helpers need no Google client library.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from builder.local_stack.process import DIRECT_HTTP, LOOPBACK, LocalStackError, ManagedProcess, http_answers

DEFAULT_PROJECT = "demo-test"


class GcloudEmulator(ManagedProcess):
    """One `gcloud ... emulators X start` process group on a loopback port; ready once `GET /`
    answers `Ok`. `env()` is what clients need to use it."""

    env_var = ""

    def __init__(self, *, port: int | None = None, project: str = DEFAULT_PROJECT, start_timeout: float = 60.0,
                 stop_timeout: float = 10.0, log_path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(port=port, start_timeout=start_timeout, stop_timeout=stop_timeout, log_path=log_path)
        self.project = project

    def check_installed(self) -> None:
        if shutil.which("gcloud") is None:
            raise LocalStackError(f"the {self.name} emulator needs `gcloud` on PATH with its emulator component "
                                  "(see localstack/setup.d/30-gcp-emulators.sh)")

    def ready(self) -> bool:
        return http_answers(f"http://{LOOPBACK}:{self.port}/", body=b"Ok")

    def env(self) -> dict[str, str]:
        """Environment for clients (and function containers) to use this emulator."""
        return {self.env_var: self.host, "GOOGLE_CLOUD_PROJECT": self.project}

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None, *,
                ok_missing: bool = False, ok_exists: bool = False) -> dict[str, Any]:
        """One REST call; a 404 (`ok_missing`) or 409 (`ok_exists`) answers {}; any other error
        status raises LocalStackError with the emulator's answer."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.endpoint}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with DIRECT_HTTP.open(request, timeout=30) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            if (exc.code == 404 and ok_missing) or (exc.code == 409 and ok_exists):
                return {}
            detail = exc.read().decode(errors="replace")[:500]
            raise LocalStackError(f"{self.name} emulator: {method} {path} answered {exc.code}: {detail}") from exc
        answer: dict[str, Any] = json.loads(text) if text.strip() else {}
        return answer


class FirestoreEmulator(GcloudEmulator):
    """`gcloud emulators firestore start`; `reset()` drops every document of the project."""

    name = "firestore"
    env_var = "FIRESTORE_EMULATOR_HOST"

    def command(self) -> list[str]:
        return ["gcloud", "emulators", "firestore", "start", f"--host-port={LOOPBACK}:{self.port}"]

    def reset(self, database: str = "(default)") -> None:
        self.request("DELETE", f"/emulator/v1/projects/{self.project}/databases/{database}/documents")


class PubSubEmulator(GcloudEmulator):
    """`gcloud beta emulators pubsub start`; topics, push subscriptions and publishing over REST."""

    name = "pubsub"
    env_var = "PUBSUB_EMULATOR_HOST"

    def command(self) -> list[str]:
        return ["gcloud", "beta", "emulators", "pubsub", "start", f"--host-port={LOOPBACK}:{self.port}",
                f"--project={self.project}"]

    def create_topic(self, topic: str) -> None:
        self.request("PUT", f"/v1/projects/{self.project}/topics/{topic}", ok_exists=True)

    def create_push_subscription(self, subscription: str, topic: str, endpoint: str, *,
                                 ack_deadline: int = 60) -> None:
        """A push subscription of `topic` delivering to `endpoint` (non-2xx -> redelivery).
        An existing subscription of that name is replaced, so re-wiring moves endpoints."""
        self.request("DELETE", f"/v1/projects/{self.project}/subscriptions/{subscription}", ok_missing=True)
        self.request("PUT", f"/v1/projects/{self.project}/subscriptions/{subscription}", {
            "topic": f"projects/{self.project}/topics/{topic}",
            "pushConfig": {"pushEndpoint": endpoint},
            "ackDeadlineSeconds": ack_deadline,
        })

    def create_pull_subscription(self, subscription: str, topic: str) -> None:
        """A pull subscription of `topic` (e.g. a tap that sees every message published to it)."""
        self.request("PUT", f"/v1/projects/{self.project}/subscriptions/{subscription}", {
            "topic": f"projects/{self.project}/topics/{topic}", "ackDeadlineSeconds": 60})

    def pull(self, subscription: str, *, max_messages: int = 10) -> list[dict[str, Any]]:
        """Pull and ack what `subscription` holds now: `[{"data": bytes, "attributes": {…},
        "messageId": …}]` (empty when nothing is waiting)."""
        answer = self.request("POST", f"/v1/projects/{self.project}/subscriptions/{subscription}:pull",
                              {"maxMessages": max_messages, "returnImmediately": True})
        received = answer.get("receivedMessages", [])
        if received:
            self.request("POST", f"/v1/projects/{self.project}/subscriptions/{subscription}:acknowledge",
                         {"ackIds": [r["ackId"] for r in received]})
        return [{"data": base64.b64decode(r["message"].get("data", "")),
                 "attributes": r["message"].get("attributes", {}),
                 "messageId": r["message"]["messageId"]} for r in received]

    def wire_push(self, endpoints: Mapping[str, str], *, prefix: str, path: str = "/pubsub") -> dict[str, str]:
        """For each function -> base URL: its topic (`topic_name(prefix, function)`) and a push
        subscription delivering to `URL + path`. Returns function -> topic."""
        from unum_entry.invokers.pubsub import subscription_name, topic_name

        topics = {}
        for function, url in endpoints.items():
            topic = topic_name(prefix, function)
            self.create_topic(topic)
            self.create_push_subscription(subscription_name(prefix, function), topic, url.rstrip("/") + path)
            topics[function] = topic
        return topics

    def publish(self, topic: str, data: bytes, attributes: Mapping[str, str] | None = None) -> str:
        """Publish one message (as a client outside the workflow would); returns its id."""
        message: dict[str, Any] = {"data": base64.b64encode(data).decode()}
        if attributes:
            message["attributes"] = dict(attributes)
        answer = self.request("POST", f"/v1/projects/{self.project}/topics/{topic}:publish", {"messages": [message]})
        return str(answer["messageIds"][0])

    def reset(self) -> None:
        """Delete every subscription and topic of the project."""
        for sub in self.request("GET", f"/v1/projects/{self.project}/subscriptions").get("subscriptions", []):
            self.request("DELETE", f"/v1/{sub['name']}", ok_missing=True)
        for topic in self.request("GET", f"/v1/projects/{self.project}/topics").get("topics", []):
            self.request("DELETE", f"/v1/{topic['name']}", ok_missing=True)
