"""Lambda's version and alias API for the local Invoke endpoint (builder.local_stack.lambda_endpoint).

`VersionTable` keeps, per function, its published versions (each with the container URLs and
image digest it had when published: a later `register` changes `$LATEST` only) and its aliases
(a version plus `RoutingConfig.AdditionalVersionWeights`). Shapes and error codes follow
botocore's Lambda model: PublishVersion, ListVersionsByFunction, Create/Update/Get/Delete/
ListAliases. Every method raises `VersionApiError(status, code, message)` on bad input and
changes nothing then. Not thread-safe on its own: the endpoint calls it under its lock.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any

ACCOUNT_ARN = "arn:aws:lambda:us-east-1:000000000000:function"


class VersionApiError(Exception):
    """A Lambda API error: HTTP status, error type (x-amzn-ErrorType) and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class PublishedVersion:
    """One immutable version: its number, the URLs and image digest it was published with."""

    number: str
    urls: tuple[str, ...]
    image: str
    description: str


@dataclass
class Alias:
    """A named pointer to a version, with extra versions taking a share of invokes."""

    name: str
    version: str
    weights: dict[str, float]
    description: str
    revision: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class _Entry:
    versions: dict[str, PublishedVersion] = field(default_factory=dict)
    aliases: dict[str, Alias] = field(default_factory=dict)


class VersionTable:
    """Versions and aliases of every function; see the module docstring."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def _entry(self, function: str) -> _Entry:
        return self._entries.setdefault(function, _Entry())

    # ---- versions ------------------------------------------------------------------------

    def publish(self, function: str, urls: tuple[str, ...], image: str, description: str = "") -> dict[str, Any]:
        """PublishVersion: a new version of `$LATEST` as registered now, unless the newest
        version already has the same image digest and URLs (Lambda returns that one then)."""
        entry = self._entry(function)
        if entry.versions:
            newest = entry.versions[max(entry.versions, key=int)]
            if newest.urls == urls and newest.image == image:
                return self.configuration(function, newest)
        number = str(max((int(n) for n in entry.versions), default=0) + 1)
        version = PublishedVersion(number, urls, image, description)
        entry.versions[number] = version
        return self.configuration(function, version)

    def version(self, function: str, number: str) -> PublishedVersion:
        found = self._entry(function).versions.get(number)
        if found is None:
            raise VersionApiError(404, "ResourceNotFoundException",
                                  f"Function not found: {ACCOUNT_ARN}:{function}:{number}")
        return found

    def list_versions(self, function: str, latest_urls: tuple[str, ...], latest_image: str) -> dict[str, Any]:
        """ListVersionsByFunction: `$LATEST` first, then published versions in order."""
        latest = PublishedVersion("$LATEST", latest_urls, latest_image, "")
        entries = self._entry(function).versions
        return {"Versions": [self.configuration(function, latest)]
                + [self.configuration(function, entries[n]) for n in sorted(entries, key=int)]}

    @staticmethod
    def configuration(function: str, version: PublishedVersion) -> dict[str, Any]:
        """FunctionConfiguration (the fields a caller of versions reads)."""
        digest = hashlib.sha256(("\n".join(version.urls) + "\n" + version.image).encode()).digest()
        return {"FunctionName": function, "FunctionArn": f"{ACCOUNT_ARN}:{function}:{version.number}",
                "Version": version.number, "Description": version.description, "PackageType": "Image",
                "CodeSha256": base64.b64encode(digest).decode(), "State": "Active",
                "ImageConfigResponse": {}, "Environment": {"Variables": {"UNUM_IMAGE": version.image}}}

    # ---- aliases -------------------------------------------------------------------------

    def _check(self, function: str, name: str, version: str, weights: dict[str, float]) -> None:
        if not name or name.isdigit() or name == "$LATEST":
            raise VersionApiError(400, "InvalidParameterValueException", f"invalid alias name {name!r}")
        if version != "$LATEST":
            self.version(function, version)
        if len(weights) > 1:
            raise VersionApiError(400, "InvalidParameterValueException",
                                  "RoutingConfig supports at most one additional version")
        for extra, weight in weights.items():
            self.version(function, extra)
            if not isinstance(weight, (int, float)) or not 0.0 <= float(weight) <= 1.0:
                raise VersionApiError(400, "InvalidParameterValueException",
                                      f"weight {weight!r} of version {extra} is outside 0.0-1.0")
            if extra == version:
                raise VersionApiError(400, "InvalidParameterValueException",
                                      f"additional version {extra} is the alias's own version")

    def create_alias(self, function: str, body: dict[str, Any]) -> dict[str, Any]:
        name, version = str(body.get("Name", "")), str(body.get("FunctionVersion", ""))
        weights = dict((body.get("RoutingConfig") or {}).get("AdditionalVersionWeights") or {})
        self._check(function, name, version, weights)
        entry = self._entry(function)
        if name in entry.aliases:
            raise VersionApiError(409, "ResourceConflictException",
                                  f"Alias already exists: {ACCOUNT_ARN}:{function}:{name}")
        entry.aliases[name] = Alias(name, version, weights, str(body.get("Description", "")))
        return self.alias_shape(function, entry.aliases[name])

    def alias(self, function: str, name: str) -> Alias:
        found = self._entry(function).aliases.get(name)
        if found is None:
            raise VersionApiError(404, "ResourceNotFoundException",
                                  f"Alias not found: {ACCOUNT_ARN}:{function}:{name}")
        return found

    def update_alias(self, function: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        current = self.alias(function, name)
        if body.get("RevisionId") not in (None, current.revision):
            raise VersionApiError(412, "PreconditionFailedException", "The RevisionId provided does not match")
        version = str(body.get("FunctionVersion") or current.version)
        routing = body.get("RoutingConfig")
        weights = dict(routing.get("AdditionalVersionWeights") or {}) if routing is not None else current.weights
        self._check(function, name, version, weights)
        updated = Alias(name, version, weights, str(body.get("Description", current.description)))
        self._entry(function).aliases[name] = updated
        return self.alias_shape(function, updated)

    def delete_alias(self, function: str, name: str) -> None:
        self._entry(function).aliases.pop(name, None)  # Lambda: deleting a missing alias succeeds

    def list_aliases(self, function: str) -> dict[str, Any]:
        entry = self._entry(function)
        return {"Aliases": [self.alias_shape(function, entry.aliases[n]) for n in sorted(entry.aliases)]}

    @staticmethod
    def alias_shape(function: str, alias: Alias) -> dict[str, Any]:
        """AliasConfiguration."""
        shape: dict[str, Any] = {"AliasArn": f"{ACCOUNT_ARN}:{function}:{alias.name}", "Name": alias.name,
                                 "FunctionVersion": alias.version, "Description": alias.description,
                                 "RevisionId": alias.revision}
        if alias.weights:
            shape["RoutingConfig"] = {"AdditionalVersionWeights": dict(alias.weights)}
        return shape

    # ---- invoke routing ------------------------------------------------------------------

    def resolve(self, function: str, qualifier: str | None, draw: float) -> str:
        """The version an invoke of `function:qualifier` runs (`$LATEST`, a number), choosing an
        alias's additional version when `draw` (uniform in [0, 1)) falls under its weight."""
        if qualifier in (None, "", "$LATEST"):
            return "$LATEST"
        if qualifier.isdigit():
            return self.version(function, qualifier).number
        alias = self.alias(function, qualifier)
        for extra, weight in alias.weights.items():
            if draw < float(weight):
                return extra
        return alias.version
