"""The Cloud Run adapter on the real path without containers: every function of a workflow runs
as `python -m unum_entry` (functions-framework on its own loopback port), triggered by push
subscriptions of the Pub/Sub emulator, coordinating through the Firestore emulator.

The same functions run as containers in tests/e2e/gcp/.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from builder.local_stack.gcp import FaultyPushProxy, HostFunctions, start_workflow, wait_for_outcome
from tests.support.retained import assert_only_ttl_bounded, outcome_kinds
from unum_entry.stores.firestore import FirestoreStore
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration

IMAGES = Path(__file__).resolve().parents[3] / "images"


@pytest.fixture
def stack(firestore_emulator, pubsub_emulator):
    """(store, store URL, invoker URL, prefix, emulator env) for one workflow deployment."""
    collection, prefix = f"unum-{uuid.uuid4().hex[:10]}", f"t{uuid.uuid4().hex[:8]}-"
    store_url = f"firestore://{collection}?project={firestore_emulator.project}"
    store = FirestoreStore.from_url(store_url)
    env = {**firestore_emulator.env(), **pubsub_emulator.env()}
    try:
        yield store, store_url, f"pubsub://{pubsub_emulator.project}?prefix={prefix}", prefix, env
    finally:
        store.close()


def _serve(workflow, stack, **kwargs) -> HostFunctions:
    _, store_url, invoker_url, _, env = stack
    return HostFunctions(workflow, store_url=store_url, invoker_url=invoker_url, emulators=env,
                         extra_env={"UNUM_RETRY_BASE_DELAY": "0.05"}, **kwargs)


def test_chain_through_pubsub_push_and_firestore(stack, pubsub_emulator) -> None:
    store, _, _, prefix, _ = stack
    workflow = load_workflow(IMAGES / "chain")
    with _serve(workflow, stack) as functions:
        pubsub_emulator.wire_push(functions.urls, prefix=prefix)
        started = start_workflow(functions.urls[workflow.entry], {"name": "cloud run"})
        outcome = wait_for_outcome(store, started["workflow"], timeout=60)
    assert started["committed"] is True and started["invoked"] == 1
    assert outcome.failure is None
    assert outcome.result == {"greeting": "HELLO, CLOUD RUN!", "signed_by": "Sign", "workflow": started["workflow"]}
    # the result, and intermediates only until their expiry (within the store's TTL)
    assert outcome_kinds(assert_only_ttl_bounded(store, started["workflow"])) == ["result"]


def test_a_client_starts_a_workflow_by_publishing_to_the_entry_topic(stack, pubsub_emulator) -> None:
    """Raw JSON published to the entry's topic is a workflow input; its id derives from the
    message id, so redeliveries of that message start the same workflow."""
    store, _, _, prefix, _ = stack
    workflow = load_workflow(IMAGES / "chain")
    with _serve(workflow, stack) as functions:
        topics = pubsub_emulator.wire_push(functions.urls, prefix=prefix)
        message_id = pubsub_emulator.publish(topics[workflow.entry], json.dumps({"name": "topic"}).encode())
        outcome = wait_for_outcome(store, f"wf-{message_id}", timeout=60)
    assert outcome.result["greeting"] == "HELLO, TOPIC!"


def _flaky_chain(tmp_path: Path, *, fail_attempts: int, max_attempts: int):
    """A -> B -> C where B's handler raises on its first `fail_attempts` attempts and records
    every execution in the value it returns."""
    return write_workflow(tmp_path / "flaky", name="flaky", entry="A", functions={
        "A": FunctionSource("def handler(event, context):\n    return {'n': event['n'] + 1}\n",
                            [{"op": "invoke", "function": "B"}]),
        "B": FunctionSource(
            "def handler(event, context):\n"
            f"    if context.attempt < {fail_attempts}:\n"
            "        raise RuntimeError(f'flaky attempt {context.attempt}')\n"
            "    return {'n': event['n'] * 10, 'attempt': context.attempt}\n",
            [{"op": "invoke", "function": "C"}], {"max_attempts": max_attempts}),
        "C": FunctionSource("def handler(event, context):\n    return {'n': event['n'] + 1, 'attempt': event['attempt']}\n"),
    })


def test_faulty_deliveries_and_a_duplicated_publish_give_one_consistent_result(stack, pubsub_emulator, tmp_path) -> None:
    """B's push deliveries fail with HTTP 500 (once after doing all the work, once before) and
    are then delivered twice at once; B's handler also fails its first attempt (re-published
    with attempt 1); the workflow start is published twice with the same id."""
    store, _, _, prefix, _ = stack
    workflow = _flaky_chain(tmp_path, fail_attempts=1, max_attempts=3)
    with _serve(workflow, stack) as functions, FaultyPushProxy(functions.urls["B"], fail_first=2) as proxy:
        pubsub_emulator.wire_push({**functions.urls, "B": proxy.url}, prefix=prefix)
        workflow_id = f"wf-dup-{uuid.uuid4().hex[:8]}"
        first = start_workflow(functions.urls["A"], {"n": 1}, workflow_id=workflow_id)
        second = start_workflow(functions.urls["A"], {"n": 1}, workflow_id=workflow_id)
        outcome = wait_for_outcome(store, workflow_id, timeout=90, settle=3.0)
        logs = functions.logs()
    assert first["committed"] is True and second["committed"] is False  # the duplicate replayed A's checkpoint
    assert outcome.failure is None, logs
    assert outcome.results == [{"n": 21, "attempt": 1}]
    assert proxy.stats["ack_lost_after_work"] >= 1 and proxy.stats["failed_before_work"] >= 1
    assert proxy.stats["duplicated"] >= 1
    assert "attempt 1 failed" in logs  # the handler failure went round through Pub/Sub
    assert outcome_kinds(assert_only_ttl_bounded(store, workflow_id)) == ["result"]


def test_a_handler_that_keeps_failing_records_the_failure_after_max_attempts(stack, pubsub_emulator, tmp_path) -> None:
    store, _, _, prefix, _ = stack
    workflow = _flaky_chain(tmp_path, fail_attempts=99, max_attempts=2)
    with _serve(workflow, stack) as functions:
        pubsub_emulator.wire_push(functions.urls, prefix=prefix)
        started = start_workflow(functions.urls["A"], {"n": 1})
        outcome = wait_for_outcome(store, started["workflow"], timeout=60)
    assert outcome.results == []
    assert outcome.failure["Function"] == "B" and outcome.failure["Attempts"] == 2
    assert outcome.failure["Error"] == "RuntimeError" and "flaky attempt 1" in outcome.failure["Cause"]
    assert outcome_kinds(assert_only_ttl_bounded(store, started["workflow"])) == ["failure"]


def test_a_malformed_message_is_dropped_not_redelivered_forever(stack, pubsub_emulator, tmp_path) -> None:
    store, _, _, prefix, _ = stack
    workflow = load_workflow(IMAGES / "chain")
    with _serve(workflow, stack) as functions:
        topics = pubsub_emulator.wire_push(functions.urls, prefix=prefix)
        pubsub_emulator.publish(topics["Shout"], b"\xc1 not msgpack, not json")
        # A well-formed workflow behind it still runs: the bad message did not wedge Shout.
        started = start_workflow(functions.urls[workflow.entry], {"name": "after"})
        outcome = wait_for_outcome(store, started["workflow"], timeout=60)
        shout_log = functions.log("Shout")
    assert outcome.result["greeting"] == "HELLO, AFTER!"
    assert shout_log.count("dropped malformed Pub/Sub message") == 1
