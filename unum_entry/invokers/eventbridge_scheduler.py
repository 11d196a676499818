"""Durable timers on AWS: EventBridge Scheduler one-time schedules that invoke a Lambda function.

`EventBridgeTimers.arm(when, function, payload, name=...)` is `LambdaInvoker.invoke_at`:

- a schedule named `name` (`unum_entry.naming.timer_name`) in `group`, expression
  `at(YYYY-MM-DDTHH:MM:SS)` (UTC, rounded *up* to the second: a timer is never armed early),
  `FlexibleTimeWindow` OFF, `ActionAfterCompletion` DELETE (the schedule deletes itself once it
  has invoked its target), Target = the function's ARN, `RoleArn` = the scheduler role (allowed
  `lambda:InvokeFunction` on the workflow's functions only), Input = the envelope as the same
  Lambda event `invoke` sends (`lambda_event.to_event`: oversized envelopes by reference);
- `ConflictException` means a schedule of that name exists: the timer is already armed (another
  execution armed it); that is success;
- a timer already due (`when` at most `DUE_MARGIN` seconds ahead) is a plain asynchronous invoke:
  one request instead of a schedule, and no second-granularity delay.

The function ARN is `arn:PARTITION:lambda:REGION:ACCOUNT:function:PREFIX+FUNCTION`: partition and
account come from the role ARN, the region from the scheduler client. Scheduler delivers at least
once (its own retries, up to 24 h by default); the receiving runtime absorbs duplicates.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from unum_entry.errors import ConfigurationError, InvokeError
from unum_entry.invokers.lambda_event import DEFAULT_EVENT_LIMIT, to_event
from unum_entry.stores.base import Store

DUE_MARGIN = 1.0  # seconds: a timer due this soon is invoked at once, not scheduled
DEFAULT_GROUP = "default"
_ROLE_ARN = re.compile(r"^arn:(aws(?:-[a-z]+)*):iam::(\d{12}):role/[\w+=,.@/-]+$")
_GROUP = re.compile(r"^[0-9a-zA-Z_.-]{1,64}$")


def at_expression(when: float) -> str:
    """`at(YYYY-MM-DDTHH:MM:SS)` in UTC for epoch seconds `when`, rounded up to the second."""
    moment = datetime.fromtimestamp(math.ceil(when), tz=timezone.utc)
    return f"at({moment.strftime('%Y-%m-%dT%H:%M:%S')})"


def parse_at_expression(expression: str) -> float | None:
    """Epoch seconds of an `at(...)` expression (UTC); None for `rate(...)` / `cron(...)`."""
    match = re.fullmatch(r"at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)", expression.strip())
    if match is None:
        return None
    return datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()


def role_account(role_arn: str) -> tuple[str, str]:
    """(partition, account) of an IAM role ARN. Raises ConfigurationError when it is not one."""
    match = _ROLE_ARN.match(role_arn)
    if match is None:
        raise ConfigurationError(f"invoker URL: schedule_role: expected an IAM role ARN "
                                 f"(arn:aws:iam::123456789012:role/NAME), found {role_arn!r}")
    return match.group(1), match.group(2)


class EventBridgeTimers:
    """`invoke_at` through one boto3 `scheduler` client (created on first use; thread-safe)."""

    def __init__(self, *, role_arn: str, prefix: str, region: str, group: str = DEFAULT_GROUP,
                 client: Any = None, client_factory: Callable[[], Any] | None = None,
                 invoke_now: Callable[[str, Mapping[str, Any]], None], store: Store | None = None,
                 limit: int = DEFAULT_EVENT_LIMIT, clock: Callable[[], float] = time.time) -> None:
        if not _GROUP.match(group):
            raise ConfigurationError(f"invoker URL: schedule_group: expected 1-64 of 0-9 a-z A-Z - _ ., found {group!r}")
        self.role_arn = role_arn
        self.partition, self.account = role_account(role_arn)
        self.prefix = prefix
        self.region = region
        self.group = group
        self.store = store
        self.limit = limit
        self._client = client
        self._client_factory = client_factory
        self._invoke_now = invoke_now
        self._clock = clock
        self._lock = threading.Lock()

    def function_arn(self, function: str) -> str:
        return f"arn:{self.partition}:lambda:{self.region}:{self.account}:function:{self.prefix}{function}"

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                if self._client_factory is None:
                    raise ConfigurationError("EventBridge timers: no scheduler client")
                self._client = self._client_factory()
            return self._client

    def arm(self, when: float, function: str, payload: Mapping[str, Any], *, name: str) -> None:
        """Create the one-time schedule (see the module docstring). Raises InvokeError."""
        if when - self._clock() <= DUE_MARGIN:
            self._invoke_now(function, payload)
            return
        from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

        body = to_event(payload, store=self.store, limit=self.limit).decode()
        target = self.function_arn(function)
        try:
            self.client().create_schedule(
                Name=name, GroupName=self.group, ScheduleExpression=at_expression(when),
                ScheduleExpressionTimezone="UTC", FlexibleTimeWindow={"Mode": "OFF"},
                ActionAfterCompletion="DELETE", State="ENABLED",
                Target={"Arn": target, "RoleArn": self.role_arn, "Input": body},
                Description=f"unum timer for {function} (workflow {payload.get('workflow', '?')})"[:512])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConflictException":
                return  # already armed under this name
            raise InvokeError(f"EventBridge Scheduler: creating timer {name} for {target} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise InvokeError(f"EventBridge Scheduler: creating timer {name} for {target} failed: {exc}") from exc


def schedule_input(schedule: Mapping[str, Any]) -> bytes:
    """The Input of a `get_schedule` answer as event bytes (`{}` when none, as Scheduler sends)."""
    raw = schedule.get("Target", {}).get("Input")
    return raw.encode() if isinstance(raw, str) else json.dumps({}).encode()
