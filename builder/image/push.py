"""Push function images to a registry: Amazon ECR (auth from `GetAuthorizationToken`), Google
Artifact Registry / Container Registry (`oauth2accesstoken` + a google-auth access token, chosen
by host: `LOCATION-docker.pkg.dev`, `*gcr.io`) or any registry given by host (`127.0.0.1:5000`,
`ghcr.io/org`, ...). Reports each pushed digest.

    registry = ecr_registry(ecr_client)              # or Registry("127.0.0.1:5000")
    pushed = push_images(docker, ["unum/chain-hello:latest"], registry)
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from unum_entry.errors import BuildError

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Registry:
    """Where to push: `host[:port][/namespace]`, with optional credentials."""

    location: str
    username: str | None = None
    password: str | None = None
    ecr_client: Any = field(default=None, compare=False, repr=False)  # set: repositories are created on ECR
    google_credentials: Any = field(default=None, compare=False, repr=False)  # Artifact Registry; None: ADC

    @property
    def auth_config(self) -> dict[str, str] | None:
        if self.username is None:
            return None
        return {"username": self.username, "password": self.password or ""}


@dataclass(frozen=True)
class PushedImage:
    source: str
    remote: str
    digest: str

    @property
    def reference(self) -> str:
        """`remote-repository@sha256:…`: what a deploy should pin."""
        return f"{self.remote.rsplit(':', 1)[0]}@{self.digest}"


def registry_location(url: str) -> str:
    """`https://host:port/ns` or `host:port/ns` → `host:port/ns` (image names have no scheme)."""
    if "://" in url:
        parts = urlsplit(url)
        return (parts.netloc + parts.path).rstrip("/")
    return url.rstrip("/")


def ecr_registry(client: Any, *, location: str | None = None) -> Registry:
    """Credentials from ECR's `GetAuthorizationToken` (a base64 `AWS:password` pair). The registry
    is the token's proxy endpoint unless `location` overrides it (e.g. a local mirror)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        data = client.get_authorization_token()["authorizationData"][0]
    except (ClientError, BotoCoreError, KeyError, IndexError) as exc:
        raise BuildError(f"ECR GetAuthorizationToken failed: {exc}") from exc
    try:
        username, password = base64.b64decode(data["authorizationToken"]).decode().split(":", 1)
    except (ValueError, KeyError) as exc:
        raise BuildError(f"ECR returned an authorization token that is not base64 'user:password': {exc}") from exc
    return Registry(location or registry_location(data["proxyEndpoint"]), username, password, ecr_client=client)


def login_for(registry: Registry) -> dict[str, str] | None:
    """The docker `auth_config` for pushing to `registry`: its own credentials when given; for an
    Artifact Registry or Container Registry host, `oauth2accesstoken` with a fresh access token
    (`registry.google_credentials`, else Application Default Credentials); else None (the
    engine's own `docker login` applies). Raises BuildError when Google credentials are unusable."""
    from builder.image.artifact_registry import auth_config, is_artifact_registry

    if registry.auth_config is not None:
        return registry.auth_config
    if is_artifact_registry(registry.location):
        return auth_config(registry.location, credentials=registry.google_credentials)
    return None


def ensure_ecr_repository(client: Any, name: str) -> None:
    """Create the ECR repository unless it exists (ECR does not create on push)."""
    from botocore.exceptions import ClientError

    try:
        client.create_repository(repositoryName=name, imageScanningConfiguration={"scanOnPush": True})
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "RepositoryAlreadyExistsException":
            raise BuildError(f"ECR CreateRepository {name!r} failed: {exc}") from exc


def push_images(docker: Any, images: Iterable[str], registry: Registry, *,
                progress: Progress = lambda _: None) -> list[PushedImage]:
    """Tag each local `repository:tag` under the registry, push it (per-layer progress on
    `progress`) and drop the remote-named tag again unless it was there before (pushing leaves
    no new local tags); returns the digests."""
    import docker as docker_sdk

    pushed = []
    login = login_for(registry)  # once: an access token outlives a push
    for source in images:
        repository, _, tag = source.rpartition(":") if ":" in source.rsplit("/", 1)[-1] else (source, "", "latest")
        remote_repository = f"{registry.location}/{repository}"
        remote = f"{remote_repository}:{tag}"
        if registry.ecr_client is not None:
            ensure_ecr_repository(registry.ecr_client, remote_repository.split("/", 1)[1])
        try:
            image = docker.images.get(source)
        except docker_sdk.errors.ImageNotFound:
            raise BuildError(f"push: no local image {source!r}: run `python -m builder build` first") from None
        tagged_before = remote in image.tags
        image.tag(remote_repository, tag)
        progress(f"pushing {remote}")
        try:
            digest = _push(docker, remote_repository, tag, login, LayerProgress(remote, progress))
        finally:
            if not tagged_before:
                _untag(docker, remote)
        pushed.append(PushedImage(source, remote, digest))
        progress(f"  {remote} {digest}")
    return pushed


def _push(docker: Any, repository: str, tag: str, login: dict[str, str] | None, layers: LayerProgress) -> str:
    """One `docker push`, its stream fed to `layers`; returns the digest the registry reported."""
    import docker as docker_sdk

    digest = None
    try:
        for chunk in docker.api.push(repository, tag=tag, auth_config=login, stream=True, decode=True):
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                raise BuildError(f"push of {repository}:{tag} failed: {detail}")
            layers.update(chunk)
            aux = chunk.get("aux") or {}
            if "Digest" in aux:
                digest = aux["Digest"]
    except docker_sdk.errors.APIError as exc:
        raise BuildError(f"push of {repository}:{tag} failed: {exc.explanation or exc}") from exc
    if digest is None:
        raise BuildError(f"push of {repository}:{tag}: the registry reported no digest")
    return str(digest)


def _untag(docker: Any, name: str) -> None:
    import docker as docker_sdk

    try:
        docker.images.remove(name, noprune=True)  # the name only: the image keeps its own tag
    except docker_sdk.errors.APIError:
        pass


class LayerProgress:
    """Turns docker's push stream into lines: each layer's state when it changes (Preparing,
    Waiting, Pushed, Layer already exists), and while a layer uploads its bytes at most every
    `every` seconds."""

    def __init__(self, image: str, progress: Progress, *, every: float = 2.0) -> None:
        self.image = image
        self.progress = progress
        self.every = every
        self._state: dict[str, str] = {}
        self._last = 0.0

    def update(self, chunk: dict[str, Any]) -> None:
        layer, status = chunk.get("id"), chunk.get("status")
        if not layer or not status or len(layer) != 12:  # layer ids are 12 hex digits; tags are not
            return
        if status == "Pushing":
            now = time.monotonic()
            detail = chunk.get("progressDetail") or {}
            if now - self._last >= self.every and detail.get("total"):
                self._last = now
                self.progress(f"  {self.image}: layer {layer} {_mb(detail.get('current', 0))}"
                              f"/{_mb(detail['total'])} MB")
        if self._state.get(layer) != status:
            self._state[layer] = status
            if status != "Pushing":
                self.progress(f"  {self.image}: layer {layer} {status.lower()}")


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f}"
