"""Lambda invoker: `Invoke(FunctionName=prefix + function, InvocationType="Event")`.

URL: `lambda://?prefix=STACK-&region=us-east-1&endpoint=http://127.0.0.1:PORT&limit=BYTES`
- `prefix`: prepended to unum function names to get Lambda function names (deploy templates
  name functions `${AWS::StackName}-<function>` and set `prefix=${AWS::StackName}-`).
- `endpoint`: another Invoke endpoint (the local stack's); dummy credentials when none are set.
- `limit`: event size above which envelopes go by reference (default 255 KB).
- `schedule_role`: the IAM role ARN EventBridge Scheduler invokes timers' targets with; without
  it `invoke_at` is a ConfigurationError (the SAM template sets it). `schedule_group`: the
  schedule group (default `default`; deploy uses one per stack). `scheduler_endpoint`: another
  Scheduler endpoint (the local stack's moto). See `unum_entry.invokers.eventbridge_scheduler`.
- `qualifier`: the version every invoke and timer of this function's workflows targets
  (`FunctionName=prefix + function + ":" + qualifier`, and the timers' qualified ARNs): deploy
  sets it to the build's version id (builder.versions.content_id), which names an alias on every
  function pointing at the Lambda version published for that build (builder.deploy.aws_versions).
  A workflow that started on a build therefore stays on it: each function of the build invokes
  its successors, and arms its timers, on the same build, whatever is published later. Absent:
  unqualified invokes (`$LATEST`), as before versions. What continues a workflow from outside
  its functions (a callback, a redrive) uses `pinned(<the workflow's recorded build>)`
  (unum_entry.invokers.lambda_builds).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from typing import Any

from unum_entry.errors import ConfigurationError, InvokeError, TimersUnavailable
from unum_entry.invokers.eventbridge_scheduler import DEFAULT_GROUP, EventBridgeTimers
from unum_entry.invokers.lambda_event import DEFAULT_EVENT_LIMIT, to_event
from unum_entry.stores.base import Store
from unum_entry.urls import parse_resource_url

_OPTIONS = ("prefix", "region", "endpoint", "limit", "schedule_role", "schedule_group", "scheduler_endpoint",
            "qualifier")
# Lambda's qualifier: a version number, $LATEST, or an alias name (1-128 of A-Z a-z 0-9 - _).
_QUALIFIER = re.compile(r"^(\$LATEST|[A-Za-z0-9_-]{1,128})$")


def qualified(name: str, qualifier: str | None) -> str:
    """`name:qualifier`, or `name` when there is no qualifier."""
    return f"{name}:{qualifier}" if qualifier else name


class QualifiedTimers(EventBridgeTimers):
    """EventBridge timers whose targets are the qualified function ARNs (`ARN:qualifier`; the
    plain ARN when `qualifier` is None)."""

    def __init__(self, *, qualifier: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.qualifier = qualifier

    def function_arn(self, function: str) -> str:
        return qualified(super().function_arn(function), self.qualifier)


class LambdaInvoker:
    """Asynchronous Lambda invokes through one boto3 Lambda client (thread-safe)."""

    def __init__(self, client: Any, *, prefix: str = "", store: Store | None = None,
                 limit: int = DEFAULT_EVENT_LIMIT, timers: EventBridgeTimers | None = None,
                 qualifier: str | None = None) -> None:
        if qualifier is not None and not _QUALIFIER.match(qualifier):
            raise ConfigurationError(f"invoker qualifier: expected a Lambda version, $LATEST or an alias name "
                                     f"(1-128 of A-Z a-z 0-9 - _), found {qualifier!r}")
        self.client = client
        self.qualifier = qualifier or None
        self.prefix = prefix
        self.store = store
        self.limit = limit
        self.timers = timers

    @classmethod
    def from_url(cls, url: str, *, store: Store | None = None, client: Any = None,
                 scheduler_client: Any = None) -> LambdaInvoker:
        options = parse_invoker_url(url)
        if client is None:
            client = build_client(endpoint=options.get("endpoint"), region=options.get("region"))
        limit = int(options["limit"]) if "limit" in options else DEFAULT_EVENT_LIMIT
        invoker = cls(client, prefix=options.get("prefix", ""), store=store, limit=limit,
                      qualifier=options.get("qualifier"))
        if "schedule_role" in options:
            region = client.meta.region_name
            endpoint = options.get("scheduler_endpoint")
            invoker.timers = QualifiedTimers(
                qualifier=invoker.qualifier, role_arn=options["schedule_role"], prefix=invoker.prefix, region=region,
                group=options.get("schedule_group", DEFAULT_GROUP), store=store, limit=limit,
                invoke_now=invoker.invoke, client=scheduler_client,
                client_factory=lambda: build_client(endpoint=endpoint, region=region, service="scheduler"))
        return invoker

    def pinned(self, qualifier: str) -> LambdaInvoker:
        """This invoker (its client, prefix, store, limit, scheduler) with every invoke and timer
        on `qualifier` instead (unum_entry.invokers.lambda_builds: a workflow's recorded build).
        Raises ConfigurationError for a malformed qualifier."""
        other = LambdaInvoker(self.client, prefix=self.prefix, store=self.store, limit=self.limit,
                              qualifier=qualifier)
        if self.timers is not None:
            timers = copy.copy(self.timers)
            if isinstance(timers, QualifiedTimers):
                timers.qualifier = other.qualifier
            timers._invoke_now = other.invoke  # a timer due now is an invoke on the same build
            other.timers = timers
        return other

    def function_name(self, function: str) -> str:
        """The FunctionName an invoke of unum function `function` names (qualified when pinned)."""
        return qualified(self.prefix + function, self.qualifier)

    def invoke(self, function: str, payload: Mapping[str, Any]) -> None:
        """Queue one invocation; returns once Lambda accepted it (202). Raises InvokeError."""
        from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

        body = to_event(payload, store=self.store, limit=self.limit)
        name = self.function_name(function)
        try:
            response = self.client.invoke(FunctionName=name, InvocationType="Event", Payload=body)
        except (ClientError, BotoCoreError) as exc:
            raise InvokeError(f"invoke of Lambda function {name!r} failed: {exc}") from exc
        status = response.get("StatusCode")
        if status != 202:
            raise InvokeError(f"invoke of Lambda function {name!r}: expected status 202 (queued), got {status}")

    def invoke_at(self, when: float, function: str, payload: Mapping[str, Any], *, name: str) -> None:
        """A durable timer: an EventBridge Scheduler one-time schedule named `name` that invokes
        the function with `payload` at `when` (`unum_entry.invokers.eventbridge_scheduler`)."""
        if self.timers is None:
            raise TimersUnavailable(f"timer {name} for {function!r}: this Lambda invoker has no scheduler role "
                                     "(add schedule_role=arn:aws:iam::ACCOUNT:role/NAME to UNUM_INVOKER; "
                                     "python -m builder deploy --target aws sets it)")
        self.timers.arm(when, function, payload, name=name)


def parse_invoker_url(url: str) -> dict[str, str]:
    """Options of a `lambda://` URL. Raises ConfigurationError naming the bad part."""
    _, options = parse_resource_url(url, scheme="lambda", allowed=_OPTIONS, name=False,
                                    usage="lambda://?prefix=…&region=…&endpoint=… (options go in the query)",
                                    error=lambda message: ConfigurationError(f"invoker {message}"))
    if "limit" in options and not options["limit"].isdigit():
        raise ConfigurationError(f"invoker URL {url!r}: limit: expected a number of bytes, found {options['limit']!r}")
    return options


def build_client(*, endpoint: str | None, region: str | None, service: str = "lambda") -> Any:
    """A boto3 client of `service` (Lambda by default); against a local endpoint without
    credentials, dummy ones.
    The read timeout covers slow emulators; retries stay botocore's standard mode."""
    import boto3  # type: ignore[import-untyped]  # heavy (~200 ms): only where a client is built
    from botocore.config import Config  # type: ignore[import-untyped]

    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    kwargs: dict[str, Any] = {"region_name": region,
                              "config": Config(retries={"mode": "standard", "max_attempts": 5},
                                               connect_timeout=5, read_timeout=30)}
    if endpoint:
        kwargs["endpoint_url"] = endpoint
        if not (os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")):
            kwargs.update(aws_access_key_id="testing", aws_secret_access_key="testing")
    return boto3.client(service, **kwargs)
