"""Durable timers on the GCP local stack, end to end: function images as containers (host
network) arm Cloud Tasks tasks on gcloud-tasks-emulator, and a due task publishes its envelope to
the function's topic on the Pub/Sub emulator, whose push subscription delivers it back into the
container - the path a deployed timer takes, with the deploy script's invoker URL form.

- Starting a workflow arms its deadline watchdog: a task named `timer_name(wf, "watchdog")`
  whose HTTP request publishes to the entry function's topic.
- A timer delivered early is absorbed: the same request scheduled *now* reaches the entry
  container, which finds it early and re-arms (a new task under the next name); the finished
  workflow's outcome is unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from builder.local_stack.gcp import ContainerFunctions, start_workflow, wait_for_outcome
from builder.local_stack.process import wait_until
from unum_entry.naming import timer_name
from unum_entry.outcome import read_outcome
from unum_entry.stores.firestore import FirestoreStore
from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.e2e

IMAGES = Path(__file__).resolve().parents[3] / "images"


def _task_ids(tasks, queue: str) -> dict[str, object]:
    return {task.name.rsplit("/", 1)[1]: task for task in tasks.tasks(queue)}


@dataclass
class Deployed:
    """A workflow's images as containers with durable timers on the Cloud Tasks emulator."""

    workflow: Any
    store: FirestoreStore
    functions: ContainerFunctions
    queue: str
    topics: dict[str, str]


@pytest.fixture
def deploy(built_images, docker_client, firestore_emulator, pubsub_emulator, cloud_tasks_emulator):
    """`deploy(folder, **extra_env)` -> Deployed: containers with the deploy script's invoker URL
    form (`tasks_queue=` a queue of their own), push subscriptions wired; stopped afterwards."""
    opened: list[Deployed] = []

    def start(folder: Path, **extra_env: str) -> Deployed:
        workflow = load_workflow(folder)
        collection, prefix = f"unum-{uuid.uuid4().hex[:10]}", f"e{uuid.uuid4().hex[:8]}-"
        queue = f"projects/{pubsub_emulator.project}/locations/local/queues/{prefix}timers"
        cloud_tasks_emulator.create_queue(queue)
        store_url = f"firestore://{collection}?project={firestore_emulator.project}"
        store = FirestoreStore.from_url(store_url)
        functions = ContainerFunctions(
            docker_client, workflow, built_images(folder), store_url=store_url,
            invoker_url=f"pubsub://{pubsub_emulator.project}?prefix={prefix}&tasks_queue={queue}",
            emulators={**firestore_emulator.env(), **pubsub_emulator.env(), **cloud_tasks_emulator.env()},
            extra_env={"UNUM_RETRY_BASE_DELAY": "0.05", **extra_env}).start()
        deployed = Deployed(workflow, store, functions, queue, {})
        opened.append(deployed)
        deployed.topics = pubsub_emulator.wire_push(functions.urls, prefix=prefix)
        return deployed

    yield start
    for deployed in opened:
        deployed.functions.stop()
        deployed.store.close()


def test_a_workflow_arms_its_watchdog_task_and_an_early_delivery_rearms_it(deploy, cloud_tasks_emulator) -> None:
    from google.cloud import tasks_v2

    tasks = cloud_tasks_emulator
    deployed = deploy(IMAGES / "chain")
    queue, functions, entry = deployed.queue, deployed.functions, deployed.workflow.entry
    started = start_workflow(functions.urls[entry], {"name": "timers"})
    workflow_id = started["workflow"]
    outcome = wait_for_outcome(deployed.store, workflow_id, timeout=180)
    assert outcome.failure is None, functions.logs()

    first = timer_name(workflow_id, "watchdog")
    wait_until(lambda: first in _task_ids(tasks, queue), timeout=10, what="the watchdog task",
               describe=lambda: f"{sorted(_task_ids(tasks, queue))}\n{functions.logs()}")
    watchdog = _task_ids(tasks, queue)[first]
    assert watchdog.http_request.url.endswith(f"/topics/{deployed.topics[entry]}:publish")
    assert watchdog.schedule_time.timestamp() > time.time()  # at deadline - margin
    (message,) = json.loads(watchdog.http_request.body)["messages"]
    assert message["attributes"]["unum_timer"] == first and message["attributes"]["unum_workflow"] == workflow_id

    # Deliver the same timer early (a scheduler may): its request, due now, under another id.
    early = timer_name(workflow_id, "test-early")
    tasks.client().create_task(parent=queue, task=tasks_v2.Task(name=f"{queue}/tasks/{early}",
                                                                http_request=watchdog.http_request), timeout=30)
    rearmed = timer_name(workflow_id, "watchdog", 1)
    wait_until(lambda: rearmed in _task_ids(tasks, queue), timeout=60, what="the watchdog re-armed",
               describe=lambda: f"{sorted(_task_ids(tasks, queue))}\n{functions.logs()}")
    assert early not in _task_ids(tasks, queue)  # delivered (2xx), gone
    again = read_outcome(deployed.store, workflow_id)
    assert again.failure is None and again.result == outcome.result


def test_a_two_hour_wait_and_a_task_timeout_run_on_cloud_tasks(tmp_path, deploy, pubsub_emulator,
                                                                cloud_tasks_emulator) -> None:
    """images/asl-wait compiled with the real CLI, as containers at UNUM_ASL_TIME_SCALE=0.001: the
    2-hour Wait and the review Task's 1-hour timeout are Cloud Tasks tasks on the emulator that
    publish to the functions' topics when due; the result is expected.json's."""
    folder = tmp_path / "asl-wait"
    compiled = subprocess.run([sys.executable, "-m", "builder", "compile", str(IMAGES / "asl-wait" / "statemachine.json"),
                               "--out", str(folder)], cwd=IMAGES.parent, capture_output=True, text=True, timeout=60)
    assert compiled.returncode == 0, compiled.stderr
    deployed = deploy(folder, UNUM_ASL_TIME_SCALE="0.001")
    functions = deployed.functions
    for topic in deployed.topics.values():  # taps: see every message published to the functions
        pubsub_emulator.create_pull_subscription(f"{topic}-tap", topic)
    started_at = time.monotonic()
    started = start_workflow(functions.urls[deployed.workflow.entry],
                             json.loads((IMAGES / "asl-wait" / "input.json").read_text()))
    outcome = wait_for_outcome(deployed.store, started["workflow"], timeout=180)
    took = time.monotonic() - started_at
    assert outcome.failure is None, functions.logs()
    assert outcome.result == json.loads((IMAGES / "asl-wait" / "expected.json").read_text())
    assert took >= 7.2 + 3.6, took  # the scaled Wait and timeout, each a task that came due
    timers = [m for topic in deployed.topics.values() for m in pubsub_emulator.pull(f"{topic}-tap", max_messages=100)
              if "unum_timer" in m["attributes"]]
    assert len(timers) >= 2, timers  # published by Cloud Tasks tasks, not by a function
    # What is left in the queue is the watchdog (and nothing that fires before it).
    left = _task_ids(cloud_tasks_emulator, deployed.queue)
    assert set(left) <= {timer_name(started["workflow"], "watchdog")}, sorted(left)
