"""Activity Tasks (`Resource: arn:aws:states:REGION:ACCOUNT:activity:NAME`): a worker outside the
workflow polls for the Task's input and answers with the task token.

On unum an activity Task is a callback Task with nothing to call: its function commits the wait
decision (unum_entry.asl.callbacks, with `HeartbeatSeconds` / `TimeoutSeconds` timers as for
`.waitForTaskToken`), and the decision also names the activity and holds the Task's input
(`activity` in the wait: `{"arn", "input"}`). A poller — `serve`'s GetActivityTask — finds the
waiting decisions of that activity and hands each to one worker: the hand-out is a
create-if-absent record per token (`claim`), so two workers polling at once never get the same
task. The worker completes it with SendTaskSuccess / SendTaskFailure / SendTaskHeartbeat, the
callbacks every task token takes (first completion wins).
"""

from __future__ import annotations

import re
from typing import Any

_ACTIVITY = re.compile(r"^arn:aws[a-z-]*:states:[^:]*:[^:]*:activity:[A-Za-z0-9_.-]+$")
KEY = "activity"  # the wait decision's member naming the activity and holding the Task's input


def is_activity(resource: Any) -> bool:
    """Whether a Task's `Resource` is an activity ARN."""
    return isinstance(resource, str) and _ACTIVITY.match(resource) is not None


def no_call(parameters: Any, context: Any) -> None:
    """An activity Task's call: none (its worker polls for the input instead)."""
    return None


def describe(resource: str, effective_input: Any) -> dict[str, Any]:
    """What the wait decision of an activity Task records for its pollers."""
    return {"arn": resource, "input": effective_input}


def claim_key(record_key: str) -> str:
    """The record that hands the task of token record `record_key` to one worker."""
    return f"{record_key}.activity"
