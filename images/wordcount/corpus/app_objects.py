"""The bucket the paper's data-heavy apps pass their data through (wordcount, ExCamera).

As in the paper, a handler writes bulk data (a mapper's counts, a chunk's packets) as an object
and returns its key, so function results — checkpoints and the envelopes that carry them — stay
small whatever the data size. Shared by images/wordcount and images/excamera (each function
folder links this file, so each image carries its own copy).

Where the objects go, first found wins:
  1. the workflow input's `objects` field (the entry function copies it to everything downstream);
  2. `$UNUM_OBJECTS`;
  3. a local folder, `<tmp>/unum-objects` — the embedded platform's stand-in for a bucket (every
     function runs on this machine). Lambda containers do not share a folder: give them S3.
URLs:
  file:///abs/folder  (or a plain path)   a local folder
  s3://BUCKET[?endpoint=http://127.0.0.1:5000&region=us-east-1&create=1]   S3 through boto3
                                          (moto on loopback in the tests; create=1 makes the bucket)

Keys are content-addressed (`PREFIX-<sha256 of the bytes>`): a duplicate execution that writes
again writes the same bytes under the same key, or — when it produced other bytes — its own key,
so the key a committed result names always holds exactly the data that result was made from.
Nothing is deleted (give the bucket a lifecycle rule, as one would on S3).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Protocol
from urllib.parse import parse_qs, urlsplit


class ObjectMissing(LookupError):
    """A key a result named is not in the bucket (usually: functions that do not share it)."""


class Objects(Protocol):
    url: str

    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...


def resolve(given: str | None) -> str:
    """The objects URL for a workflow input's `objects` field (None: $UNUM_OBJECTS or the default)."""
    url = given or os.environ.get("UNUM_OBJECTS") or str(Path(tempfile.gettempdir()) / "unum-objects")
    open_objects(url)  # fail at the entry function, in one line, when it is unusable
    return url


def put_content(url: str, prefix: str, data: bytes) -> str:
    """Store `data` under a content-addressed key starting with `prefix`; return the key."""
    key = f"{prefix}-{hashlib.sha256(data).hexdigest()[:32]}"
    open_objects(url).put(key, data)
    return key


def get(url: str, key: str) -> bytes:
    return open_objects(url).get(key)


@lru_cache(maxsize=8)
def open_objects(url: str) -> Objects:
    """One client per URL and process (a warm Lambda container keeps it)."""
    parts = urlsplit(url)
    if parts.scheme == "s3":
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        return S3Objects(url, parts.netloc, endpoint=query.get("endpoint"), region=query.get("region", "us-east-1"),
                         create=query.get("create") == "1")
    if parts.scheme in ("", "file"):
        return FolderObjects(url, Path(parts.path if parts.scheme == "file" else url))
    raise ValueError(f"objects URL {url!r}: expected s3://BUCKET[?endpoint=...] or a folder (file:///path)")


class FolderObjects:
    """A local folder: one file per key, written to a temporary name and renamed (atomic)."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url, self.folder = url, folder
        folder.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise ValueError(f"object key {key!r} leaves the folder")
        return self.folder / key

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".put-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise ObjectMissing(f"object {key!r} is not in {self.url} (functions in separate containers do not "
                                f"share a folder: pass \"objects\": \"s3://BUCKET?endpoint=...\" in the input)") from None


class S3Objects:
    """An S3 bucket through boto3 (path-style addressing, so a loopback endpoint works)."""

    def __init__(self, url: str, bucket: str, *, endpoint: str | None, region: str, create: bool) -> None:
        import boto3  # heavy (botocore's service models): only functions that use S3 pay for it
        from botocore.config import Config

        self.url, self.bucket = url, bucket
        options: dict = {"endpoint_url": endpoint, "region_name": region}
        config = {"s3": {"addressing_style": "path"}, "retries": {"mode": "standard"}, "max_pool_connections": 32}
        if endpoint:
            if urlsplit(endpoint).hostname in ("127.0.0.1", "localhost", "::1"):
                config["proxies"] = {}  # never route a local emulator through $HTTP_PROXY
            if not (os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")):
                # an emulator accepts any credentials (as unum's DynamoDB store does)
                options.update(aws_access_key_id="testing", aws_secret_access_key="testing")
        # a private session: boto3's default one is module-level state and not thread-safe
        self.client = boto3.session.Session().client("s3", config=Config(**config), **options)
        if create:
            try:
                self.client.create_bucket(Bucket=bucket)
            except self.client.exceptions.BucketAlreadyOwnedByYou:
                pass

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def get(self, key: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except self.client.exceptions.NoSuchKey:
            raise ObjectMissing(f"object {key!r} is not in {self.url}") from None
