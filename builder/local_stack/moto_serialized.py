"""`python -m builder.local_stack.moto_serialized HOST PORT`: moto's server applying one request at a time.

moto's own threaded server applies some requests in unlocked steps: an UpdateItem that creates
its item (the fan-in's set upsert) can lose a concurrent one's member or expose a half-made
item, and a failing TransactWriteItems rolls back by restoring table snapshots under requests
running meanwhile. Real DynamoDB applies every request atomically. Here each request, its whole
response included, runs under one lock; concurrency stays on the clients (and in their number
of connections), so what reaches the server is what DynamoDB would see.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any


def serialized_app() -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
    """moto's WSGI application behind one lock."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialized(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with lock:  # one request at a time, its whole response included
            result = app(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                getattr(result, "close", lambda: None)()
        return [body]

    return serialized


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m builder.local_stack.moto_serialized HOST PORT", file=sys.stderr)
        return 2
    from werkzeug.serving import run_simple

    run_simple(argv[0], int(argv[1]), serialized_app(), threaded=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
