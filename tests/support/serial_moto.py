"""A moto server that applies one request at a time: DynamoDB's per-request atomicity.

moto's threaded server applies some requests in unlocked steps: an UpdateItem that creates its
item (the fan-in's set upsert) can lose a concurrent one's member, and a failing
TransactWriteItems rolls back by restoring table snapshots under requests running meanwhile.
Real DynamoDB applies every request atomically (transactions are serializable). The fault suites
race many executions on one item on purpose, so they run against this server, where each
request — its whole response included — runs under one lock; concurrency stays on the client.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

from builder.local_stack.process import LOOPBACK, free_port

_SERVER = """
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


@contextlib.contextmanager
def serialized_moto() -> Iterator[str]:
    """Start the server on a free loopback port; yields its endpoint URL; stops it after."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", _SERVER, LOOPBACK, str(port)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    endpoint = f"http://{LOOPBACK}:{port}"
    try:
        deadline = time.monotonic() + 30
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while True:
            try:
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
