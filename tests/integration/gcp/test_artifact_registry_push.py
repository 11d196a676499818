"""`push` to Artifact Registry: the docker login handed to the engine is `oauth2accesstoken` with
an access token that google-auth obtained over HTTP from a token endpoint (here a local one,
standing in for oauth2.googleapis.com). Artifact Registry itself is not reachable from here, so
the engine is a recorder of what `push_images` asks it to do; pushes to a real registry are
covered by tests/e2e/aws/test_push.py, which shares `push_images`."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from builder.image.artifact_registry import USERNAME
from builder.image.push import Registry, login_for, push_images
from unum_entry.errors import BuildError

pytestmark = pytest.mark.integration


class TokenEndpoint:
    """An OAuth 2.0 token endpoint on loopback: answers refresh-token grants with `token`
    (or 400 `invalid_grant` when `token` is None) and counts the requests."""

    def __init__(self, token: str | None) -> None:
        self.token = token
        self.grants: list[dict[str, list[str]]] = []
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                endpoint.grants.append(urllib.parse.parse_qs(body))
                if endpoint.token is None:
                    status, answer = 400, {"error": "invalid_grant", "error_description": "Token has been revoked."}
                else:
                    status, answer = 200, {"access_token": endpoint.token, "expires_in": 3599, "token_type": "Bearer"}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return None

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> TokenEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/token"

    def credentials(self) -> Any:
        """User credentials (as `gcloud auth application-default login` writes) with no token yet."""
        from google.oauth2.credentials import Credentials

        return Credentials(token=None, refresh_token="1//refresh", client_id="client.apps.googleusercontent.com",
                           client_secret="secret", token_uri=self.url)


@pytest.fixture
def token_endpoint() -> Iterator[TokenEndpoint]:
    with TokenEndpoint("ya29.local-access-token") as endpoint:
        yield endpoint


class RecordingEngine:
    """The docker SDK calls `push_images` makes (get/tag, push, remove of the remote-named tag),
    recorded; pushes report a digest."""

    def __init__(self) -> None:
        self.tags: list[tuple[str, str, str]] = []
        self.pushes: list[dict[str, Any]] = []
        self.removed: list[str] = []
        self.images = self
        self.api = self

    def get(self, source: str) -> Any:
        engine = self

        class Image:
            tags: list[str] = []

            def tag(self, repository: str, tag: str) -> None:
                engine.tags.append((source, repository, tag))

        return Image()

    def remove(self, name: str, noprune: bool = False) -> None:
        self.removed.append(name)

    def push(self, repository: str, *, tag: str, auth_config: Any, stream: bool, decode: bool) -> Iterator[dict]:
        self.pushes.append({"repository": repository, "tag": tag, "auth_config": auth_config})
        yield {"status": "Pushed"}
        yield {"aux": {"Tag": tag, "Digest": "sha256:" + f"{len(self.pushes):064x}", "Size": 1}}


def test_push_to_artifact_registry_logs_in_with_a_fresh_access_token(token_endpoint: TokenEndpoint) -> None:
    engine = RecordingEngine()
    registry = Registry("europe-west1-docker.pkg.dev/my-project/unum", google_credentials=token_endpoint.credentials())
    pushed = push_images(engine, ["unum/chain-hello:latest", "unum/chain-shout:latest"], registry)

    assert len(token_endpoint.grants) == 1  # one token for the whole push
    assert token_endpoint.grants[0]["grant_type"] == ["refresh_token"]
    login = {"username": USERNAME, "password": "ya29.local-access-token"}
    assert [p["auth_config"] for p in engine.pushes] == [login, login]
    assert [p["repository"] for p in engine.pushes] == ["europe-west1-docker.pkg.dev/my-project/unum/unum/chain-hello",
                                                        "europe-west1-docker.pkg.dev/my-project/unum/unum/chain-shout"]
    assert [p.reference for p in pushed] == [
        f"europe-west1-docker.pkg.dev/my-project/unum/unum/chain-{name}@sha256:{n:064x}"
        for n, name in ((1, "hello"), (2, "shout"))]
    # the remote-named tags a push creates are dropped again (no new local tags)
    assert engine.removed == [f"europe-west1-docker.pkg.dev/my-project/unum/unum/chain-{name}:latest" for name in ("hello", "shout")]


def test_given_credentials_and_other_registries_keep_their_own_login(token_endpoint: TokenEndpoint) -> None:
    # a service-account key as password (`_json_key`) wins over the token source
    keyed = Registry("us-docker.pkg.dev/p/r", "_json_key", '{"type": "service_account"}',
                     google_credentials=token_endpoint.credentials())
    assert login_for(keyed) == {"username": "_json_key", "password": '{"type": "service_account"}'}
    assert login_for(Registry("127.0.0.1:5000/unum", google_credentials=token_endpoint.credentials())) is None
    assert login_for(Registry("ghcr.io/org", "me", "pat")) == {"username": "me", "password": "pat"}
    assert token_endpoint.grants == []
    assert login_for(Registry("gcr.io/p", google_credentials=token_endpoint.credentials()))["username"] == USERNAME


def test_revoked_credentials_stop_the_push_before_anything_is_sent(token_endpoint: TokenEndpoint) -> None:
    token_endpoint.token = None
    engine = RecordingEngine()
    registry = Registry("us-docker.pkg.dev/p/r", google_credentials=token_endpoint.credentials())
    with pytest.raises(BuildError, match=r"us-docker\.pkg\.dev.*no usable Google credentials"):
        push_images(engine, ["unum/chain-hello:latest"], registry)
    assert engine.pushes == [] and engine.tags == []
