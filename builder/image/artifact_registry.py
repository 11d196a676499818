"""Artifact Registry (and Container Registry) credentials for `push`: an OAuth access token from
google-auth as the password of the user `oauth2accesstoken`, as `gcloud auth
configure-docker` does. Credentials are Application Default Credentials unless passed in.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from unum_entry.errors import BuildError

USERNAME = "oauth2accesstoken"
SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
_GCR_HOSTS = {"gcr.io", "us.gcr.io", "eu.gcr.io", "asia.gcr.io", "marketplace.gcr.io"}


def registry_host(reference: str) -> str:
    """The registry host of an image reference or registry URL (`us-docker.pkg.dev/p/r/img:tag`)."""
    text = reference if "://" in reference else f"//{reference}"
    return (urlsplit(text).netloc or "").lower()


def is_artifact_registry(reference: str) -> bool:
    """True for `LOCATION-docker.pkg.dev/...` and `*gcr.io/...` references."""
    host = registry_host(reference).split(":")[0]
    return host.endswith("-docker.pkg.dev") or host in _GCR_HOSTS


def auth_config(reference: str, *, credentials: Any = None, request: Any = None) -> dict[str, str]:
    """Docker `auth_config` for pushing `reference` to Artifact Registry: a fresh access token.
    Raises BuildError naming the registry when no credentials can be found or refreshed."""
    host = registry_host(reference)
    try:
        import google.auth
        import google.auth.exceptions
        import google.auth.transport.requests
    except ImportError as exc:  # the gcp extra
        raise BuildError(f"push to {host}: google-auth is not installed (pip install 'unum[gcp]')") from exc
    try:
        if credentials is None:
            credentials, _ = google.auth.default(scopes=SCOPES)
        if not credentials.valid:
            credentials.refresh(request or google.auth.transport.requests.Request())
    except google.auth.exceptions.GoogleAuthError as exc:
        raise BuildError(f"push to {host}: no usable Google credentials ({exc}); run `gcloud auth "
                         "application-default login` or set GOOGLE_APPLICATION_CREDENTIALS") from exc
    if not credentials.token:
        raise BuildError(f"push to {host}: the Google credentials gave no access token")
    return {"username": USERNAME, "password": credentials.token}
