"""GCP end to end: each function's image runs as a container (host network) serving
functions-framework on its own port, triggered by push subscriptions of the Pub/Sub emulator,
coordinating through the Firestore emulator. Results must equal `expected.json`, and all
else a workflow leaves in Firestore must expire within the store's TTL (tests/support/retained.py)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from builder.local_stack.gcp import ContainerFunctions, FaultyPushProxy, start_workflow, wait_for_outcome
from tests.support.retained import assert_only_ttl_bounded, outcome_kinds
from unum_entry.invokers.pubsub import topic_name
from unum_entry.stores.firestore import FirestoreStore
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.e2e

IMAGES = Path(__file__).resolve().parents[3] / "images"


@dataclass
class Deployed:
    """One workflow's images running on the local stack."""

    store: FirestoreStore
    functions: ContainerFunctions
    workflow: Any
    prefix: str
    proxies: dict[str, FaultyPushProxy] = field(default_factory=dict)


@pytest.fixture
def deployment(docker_client, firestore_emulator, pubsub_emulator):
    """Deploy a workflow folder's images on the local stack; yields a `Deployed`."""
    opened = []

    def deploy(folder: Path, images: dict[str, str], proxies: dict[str, FaultyPushProxy] | None = None):
        workflow = load_workflow(folder)
        collection, prefix = f"unum-{uuid.uuid4().hex[:10]}", f"e{uuid.uuid4().hex[:8]}-"
        store_url = f"firestore://{collection}?project={firestore_emulator.project}"
        store = FirestoreStore.from_url(store_url)
        functions = ContainerFunctions(docker_client, workflow, images, store_url=store_url,
                                       invoker_url=f"pubsub://{pubsub_emulator.project}?prefix={prefix}",
                                       emulators={**firestore_emulator.env(), **pubsub_emulator.env()},
                                       extra_env={"UNUM_RETRY_BASE_DELAY": "0.05"}).start()
        opened.append((store, functions))
        deployed = Deployed(store, functions, workflow, prefix)
        endpoints = dict(functions.urls)
        for name, make_proxy in (proxies or {}).items():
            proxy = make_proxy(functions.urls[name]).start()
            opened.append((None, proxy))
            deployed.proxies[name] = proxy
            endpoints[name] = proxy.url
        pubsub_emulator.wire_push(endpoints, prefix=prefix)
        return deployed

    yield deploy
    for store, thing in reversed(opened):
        thing.stop()
        if store is not None:
            store.close()


@pytest.mark.parametrize("example", ["chain", "parallel", "map-aggregate", "text-processing"])
def test_example_workflows_in_containers(example, built_images, deployment) -> None:
    folder = IMAGES / example
    deployed = deployment(folder, built_images(folder))
    store, functions, workflow = deployed.store, deployed.functions, deployed.workflow
    input_path = folder / "input.json"
    input_value = json.loads(input_path.read_text()) if input_path.exists() else {"name": "e2e"}
    started = start_workflow(functions.urls[workflow.entry], input_value)
    outcome = wait_for_outcome(store, started["workflow"], timeout=180)
    assert outcome.failure is None, functions.logs()
    expected_path = folder / "expected.json"
    if expected_path.exists():
        assert outcome.result == json.loads(expected_path.read_text())
    else:
        assert outcome.result["greeting"] == f"HELLO, {input_value['name'].upper()}!"  # chain: no expected.json
    assert outcome_kinds(assert_only_ttl_bounded(store, started["workflow"])) == ["result"]


def test_faulty_deliveries_and_a_duplicated_publish_in_containers(tmp_path, built_images, deployment,
                                                                pubsub_emulator) -> None:
    """B fails its first push deliveries with HTTP 500 (after and before doing its work), then
    gets a concurrent duplicate; its handler fails attempt 0; the start is POSTed twice; and the
    message A published to B is published again (a publisher retry after a lost answer: a new
    message with the same data), which goes through the same faults."""
    folder = write_workflow(tmp_path / "flaky", name="flaky", entry="A", functions={
        "A": FunctionSource("def handler(event, context):\n    return {'n': event['n'] + 1}\n",
                            [{"op": "invoke", "function": "B"}]),
        "B": FunctionSource("def handler(event, context):\n"
                            "    if context.attempt < 1:\n        raise RuntimeError('flaky')\n"
                            "    return {'n': event['n'] * 10, 'attempt': context.attempt}\n",
                            [{"op": "invoke", "function": "C"}]),
        "C": FunctionSource("def handler(event, context):\n    return {'n': event['n'] + 1, 'attempt': event['attempt']}\n"),
    }).folder
    fail_first = 2
    deployed = deployment(folder, built_images(folder), {"B": lambda url: FaultyPushProxy(url, fail_first=fail_first)})
    store, functions, proxy = deployed.store, deployed.functions, deployed.proxies["B"]
    b_topic, tap = topic_name(deployed.prefix, "B"), f"{deployed.prefix}B-tap"
    pubsub_emulator.create_pull_subscription(tap, b_topic)  # sees what A publishes to B

    workflow_id = f"wf-e2e-{uuid.uuid4().hex[:8]}"
    first = start_workflow(functions.urls["A"], {"n": 1}, workflow_id=workflow_id)
    second = start_workflow(functions.urls["A"], {"n": 1}, workflow_id=workflow_id)
    assert first["committed"] is True and second["committed"] is False
    published = _pull_one(pubsub_emulator, tap, timeout=30)  # A answered after publishing: it is there
    duplicate_id = pubsub_emulator.publish(b_topic, published["data"], published["attributes"])

    _wait_until(lambda: proxy.deliveries(duplicate_id) > fail_first, timeout=60,
                what=f"the duplicated publish to reach B past its faults: {dict(proxy.stats)}")
    outcome = wait_for_outcome(store, workflow_id, timeout=120, settle=3.0)
    assert outcome.failure is None, functions.logs()
    assert outcome.results == [{"n": 21, "attempt": 1}]
    assert outcome_kinds(assert_only_ttl_bounded(store, workflow_id)) == ["result"]
    assert proxy.stats["ack_lost_after_work"] >= 2 and proxy.stats["duplicated"] >= 2, dict(proxy.stats)


def _pull_one(pubsub, subscription: str, *, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        messages = pubsub.pull(subscription, max_messages=1)
        if messages:
            return messages[0]
        time.sleep(0.2)
    raise AssertionError(f"nothing was published to the topic of {subscription} within {timeout:.0f} s")


def _wait_until(condition, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)
