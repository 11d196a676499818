"""GCP end to end: each function's image runs as a container (host network) serving
functions-framework on its own port, triggered by push subscriptions of the Pub/Sub emulator,
coordinating through the Firestore emulator. Results must equal `expected.json` and only the
results may be left in Firestore."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from builder.localstack_gcp import ContainerFunctions, FaultyPushProxy, start_workflow, wait_for_outcome
from unum_entry.stores.firestore import FirestoreStore
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.e2e

IMAGES = Path(__file__).resolve().parents[3] / "images"


@pytest.fixture
def deployment(docker_client, firestore_emulator, pubsub_emulator):
    """Deploy a workflow folder's images on the local stack; yields (store, functions, workflow)."""
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
        endpoints = dict(functions.urls)
        for name, make_proxy in (proxies or {}).items():
            proxy = make_proxy(functions.urls[name]).start()
            opened.append((None, proxy))
            endpoints[name] = proxy.url
        pubsub_emulator.wire_push(endpoints, prefix=prefix)
        return store, functions, workflow

    yield deploy
    for store, thing in reversed(opened):
        thing.stop()
        if store is not None:
            store.close()


@pytest.mark.parametrize("example", ["chain", "parallel", "map-aggregate", "text-processing"])
def test_example_workflows_in_containers(example, built_images, deployment) -> None:
    folder = IMAGES / example
    store, functions, workflow = deployment(folder, built_images(folder))
    input_path = folder / "input.json"
    input_value = json.loads(input_path.read_text()) if input_path.exists() else {"name": "e2e"}
    started = start_workflow(functions.urls[workflow.entry], input_value)
    outcome = wait_for_outcome(store, started["workflow"], timeout=180)
    assert outcome.failure is None, functions.logs()
    expected_path = folder / "expected.json"
    if expected_path.exists():
        assert outcome.result == json.loads(expected_path.read_text())
    else:
        assert outcome.result["greeting"] == "HELLO, E2E!"
    left = {r.kind.value for r in store.records(started["workflow"])}
    assert left == {"result"}, f"intermediates left in Firestore: {left}"


def test_faulty_deliveries_and_a_duplicated_publish_in_containers(tmp_path, built_images, deployment) -> None:
    """B fails its first push deliveries with HTTP 500 (after and before doing its work), then
    gets a concurrent duplicate; its handler fails attempt 0; the start is published twice."""
    folder = write_workflow(tmp_path / "flaky", name="flaky", entry="A", functions={
        "A": FunctionSource("def handler(event, context):\n    return {'n': event['n'] + 1}\n",
                            [{"op": "invoke", "function": "B"}]),
        "B": FunctionSource("def handler(event, context):\n"
                            "    if context.attempt < 1:\n        raise RuntimeError('flaky')\n"
                            "    return {'n': event['n'] * 10, 'attempt': context.attempt}\n",
                            [{"op": "invoke", "function": "C"}]),
        "C": FunctionSource("def handler(event, context):\n    return {'n': event['n'] + 1, 'attempt': event['attempt']}\n"),
    }).folder
    proxies = {"B": lambda url: FaultyPushProxy(url, fail_first=2)}
    store, functions, _ = deployment(folder, built_images(folder), proxies)
    workflow_id = f"wf-e2e-{uuid.uuid4().hex[:8]}"
    first = start_workflow(functions.urls["A"], {"n": 1}, workflow_id=workflow_id)
    second = start_workflow(functions.urls["A"], {"n": 1}, workflow_id=workflow_id)
    outcome = wait_for_outcome(store, workflow_id, timeout=120, settle=3.0)
    assert first["committed"] is True and second["committed"] is False
    assert outcome.failure is None, functions.logs()
    assert outcome.results == [{"n": 21, "attempt": 1}]
    assert {r.kind.value for r in store.records(workflow_id)} == {"result"}
