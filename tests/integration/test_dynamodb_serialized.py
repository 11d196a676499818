"""DynamoDBStore's set upsert racing the creation of its item, on a moto server that applies one
request at a time.

moto's own threaded server applies an UpdateItem that creates its item in two unlocked steps, so
concurrent creating upserts can lose each other's members there (the contract suite therefore
creates sets before racing on moto). DynamoDB applies each UpdateItem atomically; a moto server
whose requests are serialized behaves the same, and shows that one UpdateItem per add is all
the fan-in needs: every member lands, exactly one adder sees the set full.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pytest

from builder.localstack import LOOPBACK, free_port
from unum_entry.stores import open_store
from unum_entry.stores.dynamodb import DynamoDBStore

pytestmark = pytest.mark.integration

THREADS = 16

_SERIALIZED_MOTO = """
import sys, threading
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()

def serialized(environ, start_response):
    with lock:  # one request at a time, its whole response included
        result = app(environ, start_response)
        try:
            body = b"".join(result)
        finally:
            getattr(result, "close", lambda: None)()
    return [body]

run_simple(sys.argv[1], int(sys.argv[2]), serialized, threaded=True)
"""


@pytest.fixture(scope="module")
def serialized_endpoint() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", _SERIALIZED_MOTO, LOOPBACK, str(port)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    endpoint = f"http://{LOOPBACK}:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                opener.open(f"{endpoint}/moto-api/", timeout=1).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"serialized moto server did not start (exit code {process.poll()})") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def store(serialized_endpoint: str) -> Iterator[DynamoDBStore]:
    store = open_store(f"dynamodb://unum-test-{uuid.uuid4().hex[:12]}?endpoint={serialized_endpoint}&create=1")
    assert isinstance(store, DynamoDBStore)
    try:
        yield store
    finally:
        store.client.delete_table(TableName=store.table)
        store.close()


def test_concurrent_adds_that_race_to_create_the_set_all_land(store: DynamoDBStore, race) -> None:
    everyone = {i: f"m-{i}" for i in range(THREADS)}
    for round_ in range(5):
        key = f"s-race-{round_}"
        states = race(THREADS, lambda i, key=key: store.add_to_set(key, i, f"m-{i}", size=THREADS, workflow="wf"))

        # One atomic UpdateItem each: the adds are serialized, the k-th sees k members.
        assert sorted(len(state.members) for state in states) == list(range(1, THREADS + 1))
        assert sum(state.full for state in states) == 1
        assert all(state.members[i] == f"m-{i}" for i, state in enumerate(states))
        assert dict(store.read([key])[key].members) == everyone


def test_concurrent_adds_of_one_slot_that_race_to_create_the_set_agree(store: DynamoDBStore, race) -> None:
    states = race(8, lambda i: store.add_to_set("s-one", 0, f"m-{i}", size=1, workflow="wf"))

    assert len({state.members[0] for state in states}) == 1 and all(state.full for state in states)
