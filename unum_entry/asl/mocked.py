"""A mocked Task's answer (Step Functions Local's mocked service integrations, builder/serve/mocks.py).

A state machine compiled for a mock test case carries, in the fragment of each mocked Task's
function, `"mock": {"response", "test_case", "answers": [{"from", "to", "Return" | "Throw"}]}`;
the runner asks `respond` instead of calling the handler or integration.

The invocation number of a mocked Task is how many times it was invoked before on this thread of
control: every attempt counts (a Retry's next attempt is the next number) and so does every
visit (a loop back to the Task), carried from function to function in the transfer (`mocks`:
{state: invocations}). A Map iteration adds its position among its Map's iterations (`"+"`: `i`,
or `outer * len(items) + i` inside another Map's iteration), as if each earlier iteration had
invoked the state once; Parallel branches start from the counts of the thread that reached the
Parallel, and after a Parallel/Map the thread continues with the counts it had when it reached it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from unum_entry.asl.integrations.resources import TaskFailed

OFFSET = "+"  # the Map-iteration offset in the carried counts


def invocation(counts: Mapping[str, int] | None, state: str, retries: int) -> int:
    """The invocation number of `state` (module docstring): its earlier invocations on this thread,
    plus the Map offset, plus the attempts of this entry so far."""
    counts = counts or {}
    return counts.get(OFFSET, 0) + counts.get(state, 0) + retries


def counted(counts: Mapping[str, int] | None, state: str, attempts: int) -> dict[str, int]:
    """`counts` after `attempts` more invocations of `state`."""
    out = dict(counts or {})
    out[state] = out.get(state, 0) + attempts
    return out


def iteration(counts: Mapping[str, int] | None, index: int, size: int) -> dict[str, int]:
    """The counts Map iteration `index` (of `size`) starts with."""
    out = dict(counts or {})
    out[OFFSET] = out.get(OFFSET, 0) * size + index
    return out


def respond(mock: Mapping[str, Any], state: str, number: int) -> Any:
    """The `Return` of invocation `number` (a copy), or raise its `Throw` as TaskFailed (what
    Retry and Catch match); no answer for `number` is `States.Runtime` (neither retried nor caught)."""
    for answer in mock.get("answers", ()):
        if answer["from"] <= number <= answer["to"]:
            if "Throw" in answer:
                raise TaskFailed(answer["Throw"]["Error"], answer["Throw"].get("Cause", ""))
            return copy.deepcopy(answer["Return"])
    raise TaskFailed("States.Runtime", f"the mocked response {mock.get('response')!r} of state {state!r} (test case "
                                       f"{mock.get('test_case')!r}) has no response for invocation {number}")
