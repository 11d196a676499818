"""builder.local_stack.process.http_answers, the readiness probe of every local emulator: a port
held by something that does not speak HTTP/1 is "not ready", never an exception (an emulator's
`start` then retries on another port)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from builder.local_stack.process import LOOPBACK, http_answers

pytestmark = pytest.mark.unit

#: What an HTTP/2-only (gRPC) server writes back to an HTTP/1 request: an HTTP/2 SETTINGS and
#: GOAWAY frame with Netty's complaint (what the Pub/Sub emulator's probe met once in CI).
GRPC_REPLY = (b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x05\x00\x00\x40\x00"
              b"\x00\x00\x2b\x07\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"
              b"Unexpected HTTP/1.x request: GET / ")


def _server(reply: bytes) -> Iterator[int]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((LOOPBACK, 0))
    listener.listen()
    listener.settimeout(0.05)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        thread.join(timeout=5)
        listener.close()


@pytest.fixture
def grpc_port() -> Iterator[int]:
    yield from _server(GRPC_REPLY)


@pytest.fixture
def http_port() -> Iterator[int]:
    yield from _server(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nOk")


def test_a_port_held_by_a_grpc_server_is_not_ready(grpc_port: int) -> None:
    assert http_answers(f"http://{LOOPBACK}:{grpc_port}/", body=b"Ok") is False
    assert http_answers(f"http://{LOOPBACK}:{grpc_port}/") is False


def test_an_http_server_that_answers_is_ready(http_port: int) -> None:
    assert http_answers(f"http://{LOOPBACK}:{http_port}/", body=b"Ok") is True
