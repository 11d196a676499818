"""Lambda versions and aliases of a workflow's builds (issue 44): publish, ramp, promote, rollback.

A **build** is the content hash of the workflow folder (`builder.versions.content_id`, `v` + 16
hex digits). Publishing build B (`publish_build`) makes, for every function of the workflow:
- a Lambda version of what the function runs now (`PublishVersion` of `$LATEST`, which deploy's
  template configured with `UNUM_WORKFLOW_VERSION=B` and an invoker qualified with B);
- an alias named B pointing at that version: every invoke and timer of a workflow that started
  on B names `FUNCTION:B` (`unum_entry.invokers.aws_lambda`, option `qualifier`), so the workflow
  finishes on B whatever is published later;
- on that alias, the asynchronous invoke configuration of `$LATEST` (retries, event age) with
  the on-failure destination `FUNCTION:B` (`pin_failure_destination`): Lambda keeps one per
  qualifier, and a delivery it gives up on must reach the build's own failure handling.

and points the workflow's alias (`live`, on the entry function: where new workflows start) at
it. The alias' state is its `FunctionVersion` (the stable build's Lambda version), its
`RoutingConfig` (the ramped build's version and its weight: Lambda's own split, for callers that
invoke `ENTRY:live`) and, in its Description, one JSON object naming the builds:
`{"unum": 1, "stable": B0, "ramped": B1, "weight": 0.1, "previous": B-1}`. The entry function
reads it to choose a new workflow's build deterministically from the workflow id
(`unum_entry.ramp.pick_version`).

- `publish_build(..., ramp=None)`: B becomes stable, the old stable `previous`, any ramp ends.
- `publish_build(..., ramp=N)`: B is ramped with N % of new workflows (0-100), stable unchanged.
- `promote`: the ramped build becomes the only one (the old stable is `previous`).
- `rollback`: a ramp is dropped (stable alone again); without one, `previous` becomes stable.

Every operation checks everything first and raises `AliasError` (one line, nothing changed) for a
weight outside 0-100, an unknown build, no ramp to promote, nothing to roll back, or a Lambda
error; the alias is updated last, with its RevisionId (a concurrent change is refused).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from unum_entry.errors import BuildError
from unum_entry.platforms.lambda_routing import STATE_VERSION, parse_state

WORKFLOW_ALIAS = "live"


class AliasError(BuildError):
    """A publish, ramp, promote or rollback refused; nothing was changed."""


@dataclass(frozen=True)
class AliasState:
    """Which builds the workflow alias serves (module docstring)."""

    stable: str
    ramped: str | None = None
    weight: float = 0.0  # the ramped build's share of new workflows, 0.0-1.0
    previous: str | None = None

    def description(self) -> str:
        """The alias Description carrying this state (at most 256 characters, as Lambda allows)."""
        return json.dumps({"unum": STATE_VERSION, "stable": self.stable, "ramped": self.ramped,
                           "weight": self.weight, "previous": self.previous}, separators=(",", ":"))

    @classmethod
    def parse(cls, description: str) -> AliasState | None:
        """The state in an alias Description, or None when it holds none (not unum's); the
        builds and weight read as the entry function reads them (lambda_routing.parse_state)."""
        builds = parse_state(description)
        if builds is None:
            return None
        previous = json.loads(description).get("previous")
        return cls(stable=builds[0], ramped=builds[1], weight=builds[2],
                   previous=previous if isinstance(previous, str) and previous else None)


def ramp_weight(percent: float) -> float:
    """`--ramp N` as a weight 0.0-1.0. Raises AliasError outside 0-100."""
    if isinstance(percent, bool) or not isinstance(percent, (int, float)) or not 0 <= percent <= 100:
        raise AliasError(f"--ramp {percent!r}: expected a percentage of new workflows, 0 to 100")
    return float(percent) / 100.0


def _call(what: str, call: Any, **kwargs: Any) -> Any:
    from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

    try:
        return call(**kwargs)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise AliasError(f"{what}: {error.get('Code', 'error')}: {error.get('Message', exc)}") from exc
    except BotoCoreError as exc:
        raise AliasError(f"{what}: {exc}") from exc


def _not_found(exc: AliasError) -> bool:
    return "ResourceNotFoundException" in str(exc)


def pin_failure_destination(client: Any, function: str, build: str) -> dict[str, Any] | None:
    """Give build `build`'s alias on `function` the asynchronous invoke configuration the
    template gave the function (`$LATEST`: Lambda's retries, maximum event age, the on-failure
    destination), with the destination qualified with the build: `FUNCTION:build` when it is the
    function itself. Lambda applies an event invoke configuration per qualifier, so without this
    an invoke of `FUNCTION:build` (every invoke of a pinned workflow) gets Lambda's defaults and
    no destination: a delivery Lambda gives up on is dropped and the workflow never records its
    failure. The record then reaches the build's own code, whose adapter records the failure
    (unum_entry.platforms.aws_lambda) under the workflow's IR of that build.
    Returns what was put, None when `$LATEST` has no configuration (or the endpoint has no such
    API, as the local stack's Invoke endpoint). Raises AliasError."""
    try:
        found = _call(f"event invoke configuration of {function}", client.get_function_event_invoke_config,
                      FunctionName=function)
    except AliasError as exc:
        if _not_found(exc) or "UnknownOperationException" in str(exc):
            return None
        raise
    config: dict[str, Any] = {key: found[key] for key in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds")
                              if key in found}
    destinations = dict(found.get("DestinationConfig") or {})
    failure = dict(destinations.get("OnFailure") or {})
    target = failure.get("Destination")
    if isinstance(target, str) and target.split(":")[-1] == function and ":function:" in target:
        failure["Destination"] = f"{target}:{build}"  # the function itself -> its build alias
        destinations["OnFailure"] = failure
    if destinations:
        config["DestinationConfig"] = destinations
    _call(f"event invoke configuration of {function}:{build}", client.put_function_event_invoke_config,
          FunctionName=function, Qualifier=build, **config)
    return config


def build_version(client: Any, function: str, build: str) -> str | None:
    """The Lambda version number build `build`'s alias on `function` points at, None if none."""
    try:
        return str(_call(f"alias {build} of {function}", client.get_alias, FunctionName=function,
                         Name=build)["FunctionVersion"])
    except AliasError as exc:
        if _not_found(exc):
            return None
        raise


def read_state(client: Any, entry: str, alias: str = WORKFLOW_ALIAS) -> tuple[AliasState | None, str | None]:
    """(the workflow alias' state, its RevisionId); (None, None) when the alias does not exist."""
    try:
        shape = _call(f"alias {alias} of {entry}", client.get_alias, FunctionName=entry, Name=alias)
    except AliasError as exc:
        if _not_found(exc):
            return None, None
        raise
    state = AliasState.parse(str(shape.get("Description", "")))
    if state is None:
        raise AliasError(f"alias {alias} of {entry} was not made by unum (its description names no builds); "
                         "delete it or choose another alias")
    return state, str(shape.get("RevisionId", "")) or None


def _write_state(client: Any, entry: str, alias: str, state: AliasState, revision: str | None) -> None:
    """Point the alias at `state` (its builds' versions looked up first: unknown ones refused)."""
    stable = build_version(client, entry, state.stable)
    if stable is None:
        raise AliasError(f"build {state.stable} is not published on {entry} (no alias {state.stable})")
    weights: dict[str, float] = {}
    if state.ramped is not None:
        ramped = build_version(client, entry, state.ramped)
        if ramped is None:
            raise AliasError(f"build {state.ramped} is not published on {entry} (no alias {state.ramped})")
        if ramped != stable and state.weight > 0:
            weights[ramped] = state.weight
    routing = {"AdditionalVersionWeights": weights}
    if revision is None:
        _call(f"creating alias {alias} of {entry}", client.create_alias, FunctionName=entry, Name=alias,
              FunctionVersion=stable, Description=state.description(), RoutingConfig=routing)
    else:
        _call(f"updating alias {alias} of {entry}", client.update_alias, FunctionName=entry, Name=alias,
              FunctionVersion=stable, Description=state.description(), RoutingConfig=routing, RevisionId=revision)


@dataclass(frozen=True)
class Published:
    """What `publish_build` did: each function's Lambda version, and the alias' new state."""

    versions: dict[str, str]
    state: AliasState


def publish_build(client: Any, *, functions: Sequence[str], entry: str, build: str, prefix: str = "",
                  ramp: float | None = None, alias: str = WORKFLOW_ALIAS) -> Published:
    """Publish build `build` of every function (`prefix + name`) and move the workflow alias on
    `prefix + entry` (module docstring). `ramp`: percent of new workflows for this build (0-100),
    None: all of them. Raises AliasError."""
    weight = ramp_weight(ramp) if ramp is not None else None
    entry_name = prefix + entry
    current, revision = read_state(client, entry_name, alias)
    if weight is not None and current is None:
        raise AliasError(f"--ramp: {entry_name} has no alias {alias} yet (nothing to ramp from); "
                         "deploy the first build without --ramp")
    versions: dict[str, str] = {}
    for function in functions:
        name = prefix + function
        number = str(_call(f"publishing {name}", client.publish_version, FunctionName=name,
                           Description=f"unum build {build}")["Version"])
        existing = build_version(client, name, build)
        if existing is None:
            _call(f"alias {build} of {name}", client.create_alias, FunctionName=name, Name=build,
                  FunctionVersion=number, Description=f"unum build {build}")
        elif existing != number:
            _call(f"alias {build} of {name}", client.update_alias, FunctionName=name, Name=build,
                  FunctionVersion=number)
        versions[function] = number
        pin_failure_destination(client, name, build)
    if current is None:
        state = AliasState(stable=build)
    elif weight is None:
        previous = current.stable if current.stable != build else current.previous
        state = AliasState(stable=build, previous=previous)
    elif build == current.stable:
        state = replace(current, ramped=None, weight=0.0)  # ramping the stable build: nothing to ramp
    else:
        state = replace(current, ramped=build, weight=weight)
    _write_state(client, entry_name, alias, state, revision)
    return Published(versions, state)


def promote(client: Any, *, entry: str, prefix: str = "", alias: str = WORKFLOW_ALIAS) -> AliasState:
    """The ramped build becomes the alias' only one. Raises AliasError (no alias, no ramp)."""
    name = prefix + entry
    current, revision = read_state(client, name, alias)
    if current is None:
        raise AliasError(f"promote: {name} has no alias {alias} (nothing deployed)")
    if current.ramped is None:
        raise AliasError(f"promote: alias {alias} of {name} ramps no build (it serves {current.stable} only)")
    state = AliasState(stable=current.ramped, previous=current.stable)
    _write_state(client, name, alias, state, revision)
    return state


def rollback(client: Any, *, entry: str, prefix: str = "", alias: str = WORKFLOW_ALIAS) -> AliasState:
    """Back to the previous: a ramp is dropped, else the previous build becomes stable. Raises
    AliasError when there is nothing to roll back to."""
    name = prefix + entry
    current, revision = read_state(client, name, alias)
    if current is None:
        raise AliasError(f"rollback: {name} has no alias {alias} (nothing deployed)")
    if current.ramped is not None:
        state = replace(current, ramped=None, weight=0.0)
    elif current.previous is not None:
        state = AliasState(stable=current.previous)
    else:
        raise AliasError(f"rollback: nothing to roll back: alias {alias} of {name} serves {current.stable} "
                         "and records no previous build")
    _write_state(client, name, alias, state, revision)
    return state
