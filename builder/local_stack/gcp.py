"""The GCP half of the local stack: Google's official Firestore and Pub/Sub emulators on loopback.

    with FirestoreEmulator() as firestore, PubSubEmulator() as pubsub:
        env = {**firestore.env(), **pubsub.env()}     # FIRESTORE_EMULATOR_HOST, PUBSUB_EMULATOR_HOST
        pubsub.wire_push({"Hello": "http://127.0.0.1:8080"}, prefix="unum-chain-")

Each emulator is a `gcloud` wrapper process with a `java` child: it runs in a session of its
own and `stop()` ends the whole process group (killing only the wrapper leaves java running).
Everything is spoken over the emulators' REST endpoints with urllib, so these helpers need no
Google client library. Only loopback addresses are used.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from builder.local_stack.process import LOOPBACK, LocalStackError, free_port

DEFAULT_PROJECT = "demo-test"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class _GcloudEmulator:
    """One `gcloud ... emulators X start` process group on a loopback port; a context manager."""

    name = "emulator"
    env_var = ""

    def __init__(self, *, port: int | None = None, project: str = DEFAULT_PROJECT, start_timeout: float = 60.0,
                 stop_timeout: float = 10.0, log_path: str | os.PathLike[str] | None = None) -> None:
        self.port = port
        self.project = project
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._log_path = Path(log_path) if log_path is not None else None
        self._log_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def _command(self) -> list[str]:
        raise NotImplementedError

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> _GcloudEmulator:
        """Start the emulator and wait until `GET /` answers. Returns self."""
        if self._process is not None:
            return self
        if shutil.which("gcloud") is None:
            raise LocalStackError(f"the {self.name} emulator needs `gcloud` on PATH with its emulator component "
                                  "(see localstack/setup.d/30-gcp-emulators.sh)")
        if self._log_path is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix=f"unum-{self.name}-"))
            self._log_path = self._log_dir / "emulator.log"
        if self.port is None:
            self.port = free_port()
        with open(self._log_path, "ab") as log:  # the emulators log a lot under contention
            self._process = subprocess.Popen(self._command(), stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop(keep_log=True)
            raise
        return self

    def stop(self, *, keep_log: bool = False) -> None:
        """End the emulator's whole process group (wrapper and java). Idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            _kill_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                _kill_group(process, signal.SIGKILL)
                process.wait(timeout=self.stop_timeout)
        if process is not None:
            _kill_group(process, signal.SIGKILL)  # java may outlive the wrapper
        if self._log_dir is not None and not keep_log:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None
            self._log_path = None

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # ---- use -----------------------------------------------------------------------------

    @property
    def host(self) -> str:
        """`127.0.0.1:PORT`, the value of the emulator's environment variable."""
        if self._process is None:
            raise LocalStackError(f"the {self.name} emulator is not running: call start() first")
        return f"{LOOPBACK}:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}"

    def env(self) -> dict[str, str]:
        """Environment for clients (and function containers) to use this emulator."""
        return {self.env_var: self.host, "GOOGLE_CLOUD_PROJECT": self.project}

    def log_tail(self, lines: int = 30) -> str:
        if self._log_path is None or not self._log_path.exists():
            return "(no log)"
        return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:]) or "(log is empty)"

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None = None, *,
                 ok_missing: bool = False, ok_exists: bool = False) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.endpoint}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with _DIRECT.open(request, timeout=30) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            if (exc.code == 404 and ok_missing) or (exc.code == 409 and ok_exists):
                return {}
            detail = exc.read().decode(errors="replace")[:500]
            raise LocalStackError(f"{self.name} emulator: {method} {path} answered {exc.code}: {detail}") from exc
        return json.loads(text) if text.strip() else {}

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        delay = 0.1
        process = self._process
        while process is not None:
            code = process.poll()
            if code is not None:
                raise LocalStackError(f"the {self.name} emulator exited with code {code} before answering on "
                                      f"{LOOPBACK}:{self.port}; log {self._log_path}:\n{self.log_tail()}")
            try:
                with _DIRECT.open(f"http://{LOOPBACK}:{self.port}/", timeout=1) as response:
                    if response.read().strip() == b"Ok":
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() >= deadline:
                raise LocalStackError(f"the {self.name} emulator did not answer on {LOOPBACK}:{self.port} within "
                                      f"{self.start_timeout:.0f} s; log {self._log_path}:\n{self.log_tail()}")
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


class FirestoreEmulator(_GcloudEmulator):
    """`gcloud emulators firestore start`; `reset()` drops every document of the project."""

    name = "firestore"
    env_var = "FIRESTORE_EMULATOR_HOST"

    def _command(self) -> list[str]:
        return ["gcloud", "emulators", "firestore", "start", f"--host-port={LOOPBACK}:{self.port}"]

    def reset(self, database: str = "(default)") -> None:
        self._request("DELETE", f"/emulator/v1/projects/{self.project}/databases/{database}/documents")


class PubSubEmulator(_GcloudEmulator):
    """`gcloud beta emulators pubsub start`; topics, push subscriptions and publishing over REST."""

    name = "pubsub"
    env_var = "PUBSUB_EMULATOR_HOST"

    def _command(self) -> list[str]:
        return ["gcloud", "beta", "emulators", "pubsub", "start", f"--host-port={LOOPBACK}:{self.port}",
                f"--project={self.project}"]

    def create_topic(self, topic: str) -> None:
        self._request("PUT", f"/v1/projects/{self.project}/topics/{topic}", ok_exists=True)

    def create_push_subscription(self, subscription: str, topic: str, endpoint: str, *,
                                 ack_deadline: int = 60) -> None:
        """A push subscription of `topic` delivering to `endpoint` (non-2xx -> redelivery).
        An existing subscription of that name is replaced, so re-wiring moves endpoints."""
        self._request("DELETE", f"/v1/projects/{self.project}/subscriptions/{subscription}", ok_missing=True)
        self._request("PUT", f"/v1/projects/{self.project}/subscriptions/{subscription}", {
            "topic": f"projects/{self.project}/topics/{topic}",
            "pushConfig": {"pushEndpoint": endpoint},
            "ackDeadlineSeconds": ack_deadline,
        })

    def create_pull_subscription(self, subscription: str, topic: str) -> None:
        """A pull subscription of `topic` (e.g. a tap that sees every message published to it)."""
        self._request("PUT", f"/v1/projects/{self.project}/subscriptions/{subscription}", {
            "topic": f"projects/{self.project}/topics/{topic}", "ackDeadlineSeconds": 60})

    def pull(self, subscription: str, *, max_messages: int = 10) -> list[dict[str, Any]]:
        """Pull and ack what `subscription` holds now: `[{"data": bytes, "attributes": {…},
        "messageId": …}]` (empty when nothing is waiting)."""
        import base64

        answer = self._request("POST", f"/v1/projects/{self.project}/subscriptions/{subscription}:pull",
                               {"maxMessages": max_messages, "returnImmediately": True})
        received = answer.get("receivedMessages", [])
        if received:
            self._request("POST", f"/v1/projects/{self.project}/subscriptions/{subscription}:acknowledge",
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
        import base64

        message: dict[str, Any] = {"data": base64.b64encode(data).decode()}
        if attributes:
            message["attributes"] = dict(attributes)
        answer = self._request("POST", f"/v1/projects/{self.project}/topics/{topic}:publish", {"messages": [message]})
        return answer["messageIds"][0]

    def reset(self) -> None:
        """Delete every subscription and topic of the project."""
        for sub in self._request("GET", f"/v1/projects/{self.project}/subscriptions").get("subscriptions", []):
            self._request("DELETE", f"/v1/{sub['name']}", ok_missing=True)
        for topic in self._request("GET", f"/v1/projects/{self.project}/topics").get("topics", []):
            self._request("DELETE", f"/v1/{topic['name']}", ok_missing=True)


def _kill_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # start_new_session: the group id is the wrapper's pid
    except (ProcessLookupError, PermissionError):
        pass


# ---- functions on the local stack ------------------------------------------------------------

def function_env(*, function_dir: str, store_url: str, invoker_url: str, port: int, signature: str,
                 emulators: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of one function server (a host process or a `--network host` container):
    what Cloud Run and a deploy script would set, plus the emulators' variables."""
    return {
        "UNUM_FUNCTION_DIR": function_dir,
        "UNUM_STORE": store_url,
        "UNUM_INVOKER": invoker_url,
        "PORT": str(port),
        "HOST": LOOPBACK,
        "FUNCTION_SIGNATURE_TYPE": signature,
        **emulators,
        **(extra or {}),
    }


class HostFunctions:
    """Every function of a workflow served by `python -m unum_entry` (functions-framework) as a
    process on the host, each on its own loopback port: the Cloud Run adapter without containers.
    The entry function serves the `http` signature, the others `cloudevent`.

        with HostFunctions(workflow, store_url=..., invoker_url=..., emulators=env) as fns:
            pubsub.wire_push(fns.urls, prefix=PREFIX)
    """

    def __init__(self, workflow: Any, *, store_url: str, invoker_url: str, emulators: Mapping[str, str],
                 extra_env: Mapping[str, str] | None = None, start_timeout: float = 60.0) -> None:
        self.workflow = workflow
        self.store_url = store_url
        self.invoker_url = invoker_url
        self.emulators = dict(emulators)
        self.extra_env = dict(extra_env or {})
        self.start_timeout = start_timeout
        self.urls: dict[str, str] = {}
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._log_dir = Path(tempfile.mkdtemp(prefix="unum-functions-"))

    def start(self) -> HostFunctions:
        import sys

        for name, spec in self.workflow.functions.items():
            port = free_port()
            signature = "http" if name == self.workflow.entry else "cloudevent"
            env = {**os.environ, **function_env(function_dir=str(spec.folder), store_url=self.store_url,
                                                invoker_url=self.invoker_url, port=port, signature=signature,
                                                emulators=self.emulators, extra=self.extra_env)}
            with open(self._log_dir / f"{name}.log", "ab") as log:
                self._processes[name] = subprocess.Popen([sys.executable, "-m", "unum_entry"], env=env,
                                                         stdin=subprocess.DEVNULL, stdout=log,
                                                         stderr=subprocess.STDOUT, start_new_session=True)
            self.urls[name] = f"http://{LOOPBACK}:{port}"
        try:
            for name in self._processes:
                self._wait_until_serving(name)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        processes, self._processes = self._processes, {}
        for process in processes.values():
            _kill_group(process, signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _kill_group(process, signal.SIGKILL)
                process.wait(timeout=10)

    def log(self, name: str, lines: int = 40) -> str:
        path = self._log_dir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"

    def logs(self) -> str:
        return "\n".join(f"--- {name}:\n{self.log(name)}" for name in self.urls)

    def __enter__(self) -> HostFunctions:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self._log_dir, ignore_errors=True)

    def _wait_until_serving(self, name: str) -> None:
        wait_until_serving(self.urls[name], timeout=self.start_timeout,
                           alive=lambda: self._processes[name].poll() is None,
                           describe=lambda: f"function {name!r}: log:\n{self.log(name)}")


def wait_until_serving(url: str, *, timeout: float, alive: Any = lambda: True, describe: Any = lambda: "") -> None:
    """Poll until something answers HTTP on `url` (any status: the server is up)."""
    deadline = time.monotonic() + timeout
    while True:
        if not alive():
            raise LocalStackError(f"{url} exited before serving; {describe()}")
        try:
            with _DIRECT.open(url, timeout=2) as response:
                response.read()
            return
        except urllib.error.HTTPError:
            return  # it answered (cloudevent functions refuse GET with 405)
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        if time.monotonic() >= deadline:
            raise LocalStackError(f"nothing served {url} within {timeout:.0f} s; {describe()}")
        time.sleep(0.2)


def start_workflow(entry_url: str, input_value: Any, *, workflow_id: str | None = None, timeout: float = 60.0) -> dict[str, Any]:
    """POST a workflow input to the entry function's HTTP endpoint; returns its JSON answer."""
    from urllib.parse import quote

    url = entry_url.rstrip("/") + "/" + (f"?workflow_id={quote(workflow_id)}" if workflow_id else "")
    request = urllib.request.Request(url, data=json.dumps(input_value).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with _DIRECT.open(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise LocalStackError(f"starting a workflow at {url} answered {exc.code}: "
                              f"{exc.read().decode(errors='replace')[:500]}") from exc


def wait_for_outcome(store: Any, workflow_id: str, *, timeout: float = 120.0, settle: float = 1.0) -> Any:
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


class FaultyPushProxy:
    """A push endpoint that misbehaves the ways Pub/Sub and Cloud Run may, in front of a function.

    For each message (by `messageId`), its first `fail_first` deliveries answer 500 so Pub/Sub
    redelivers: odd-numbered ones after forwarding (the function did all its work, then the ack
    was lost), even-numbered ones without forwarding (the instance died first). With
    `duplicate`, the next delivery is forwarded twice at once (two instances racing on one
    message). Every later delivery is forwarded as is. `stats` counts what it did.

        with FaultyPushProxy(fns.urls["Shout"], fail_first=2) as proxy:
            pubsub.wire_push({"Shout": proxy.url}, prefix=PREFIX)
    """

    def __init__(self, target: str, *, fail_first: int = 2, duplicate: bool = True) -> None:
        import collections
        import threading

        self.target = target.rstrip("/")
        self.fail_first = fail_first
        self.duplicate = duplicate
        self.stats: collections.Counter[str] = collections.Counter()
        self._seen: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: Any = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def start(self) -> FaultyPushProxy:
        import http.server
        import threading

        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = proxy._deliver(self.path, body, dict(self.headers))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self._server = http.server.ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="faulty-push-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FaultyPushProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def deliveries(self, message_id: str) -> int:
        """How many times Pub/Sub has pushed message `message_id` to this proxy so far."""
        with self._lock:
            return self._seen[message_id]

    def _deliver(self, path: str, body: bytes, headers: Mapping[str, str]) -> int:
        import concurrent.futures

        try:
            message_id = str(json.loads(body)["message"]["messageId"])
        except (ValueError, KeyError, TypeError):
            message_id = "?"
        with self._lock:
            self._seen[message_id] += 1
            n = self._seen[message_id]
            self.stats["deliveries"] += 1
        if n <= self.fail_first:
            if n % 2:
                self._forward(path, body, headers)
                self.stats["ack_lost_after_work"] += 1
            else:
                self.stats["failed_before_work"] += 1
            return 500
        if self.duplicate and n == self.fail_first + 1:
            self.stats["duplicated"] += 1
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                statuses = list(pool.map(lambda _: self._forward(path, body, headers), range(2)))
            return statuses[0]
        return self._forward(path, body, headers)

    def _forward(self, path: str, body: bytes, headers: Mapping[str, str]) -> int:
        wanted = {k: v for k, v in headers.items() if k.lower() == "content-type" or k.lower().startswith("ce-")}
        request = urllib.request.Request(self.target + path, data=body, method="POST", headers=wanted)
        try:
            with _DIRECT.open(request, timeout=120) as response:
                response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            status = 502
        with self._lock:
            self.stats[f"forwarded_{status}"] += 1
        return status


class ContainerFunctions:
    """Every function of a workflow served by its image (`python -m builder build`) as a
    `--network host` container, each on its own loopback port: the images exactly as Cloud Run
    would run them, with the emulators' variables added. Same interface as `HostFunctions`.

    `images` maps function -> image tag; `client` is a docker SDK client.
    """

    def __init__(self, client: Any, workflow: Any, images: Mapping[str, str], *, store_url: str, invoker_url: str,
                 emulators: Mapping[str, str], extra_env: Mapping[str, str] | None = None,
                 start_timeout: float = 90.0) -> None:
        self.client = client
        self.workflow = workflow
        self.images = dict(images)
        self.store_url = store_url
        self.invoker_url = invoker_url
        self.emulators = dict(emulators)
        self.extra_env = dict(extra_env or {})
        self.start_timeout = start_timeout
        self.urls: dict[str, str] = {}
        self._containers: dict[str, Any] = {}

    def start(self) -> ContainerFunctions:
        import concurrent.futures

        ports: dict[str, int] = {}
        for name in self.workflow.functions:  # distinct ports, picked before any container binds one
            while (port := free_port()) in ports.values():
                pass
            ports[name] = port

        def run(name: str) -> None:
            port = ports[name]
            signature = "http" if name == self.workflow.entry else "cloudevent"
            env = function_env(function_dir="/var/task", store_url=self.store_url, invoker_url=self.invoker_url,
                               port=port, signature=signature, emulators=self.emulators, extra=self.extra_env)
            self._containers[name] = self.client.containers.run(
                self.images[name], detach=True, network_mode="host", environment=env,
                labels={"unum.localstack": "gcp"})
            self.urls[name] = f"http://{LOOPBACK}:{port}"

        try:
            # Concurrently: on the vfs storage driver each container start copies the whole image.
            with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
                for future in [pool.submit(run, name) for name in self.workflow.functions]:
                    future.result()
            for name in self._containers:
                wait_until_serving(self.urls[name], timeout=self.start_timeout,
                                   alive=lambda n=name: self._status(n) in ("created", "running"),
                                   describe=lambda n=name: f"function {n!r}: log:\n{self.log(n)}")
        except BaseException:
            self.stop()
            raise
        return self

    def _status(self, name: str) -> str:
        container = self._containers[name]
        container.reload()
        return container.status

    def stop(self) -> None:
        import concurrent.futures

        def remove(container: Any) -> None:
            try:
                container.remove(force=True)
            except Exception:  # already gone
                pass

        containers, self._containers = self._containers, {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(remove, containers.values()))

    def log(self, name: str, lines: int = 40) -> str:
        container = self._containers.get(name)
        if container is None:
            return "(no container)"
        return container.logs(tail=lines).decode(errors="replace")

    def logs(self) -> str:
        return "\n".join(f"--- {name}:\n{self.log(name)}" for name in self.urls)

    def __enter__(self) -> ContainerFunctions:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
