"""AWS's "(entered at the event id #N)" prefix of runtime causes, counted in the function.

Step Functions starts the cause of a runtime error with `An error occurred while executing the
state 'S' (entered at the event id #N). `, N being the id of S's `<Type>StateEntered` event in
the execution history. unum keeps no history to read, but in a chain the id follows from the path
taken, so the runner counts the events AWS would have written so far and carries the count in
every transfer (`"ev"`, a small integer), as AWS's history numbers them:

- `ExecutionStarted` is 1 (a nested child's own history starts at 1 too);
- Pass, Choice, Wait, Succeed: `Entered` + `Exited` (2);
- a Task (Lambda or service integration): `TaskStateEntered`, per attempt `…Scheduled`,
  `…Started` and `…Succeeded` / `…Failed` / `…TimedOut` (3), then `TaskStateExited` (also after a
  caught failure);
- a Parallel: `Entered`, `ParallelStateStarted`, its branches' events, `ParallelStateSucceeded`,
  `Exited`; a Map: `Entered`, `MapStateStarted`, per iteration `MapIterationStarted`, its events,
  `MapIterationSucceeded`, then `MapStateSucceeded`, `Exited`.

The count after a Parallel or Map is exact (the join adds its branches' counts, each branch's end
carries its own), but the ids *inside* a branch depend on how the branches' events interleave, so
a branch knows its absolute ids (`"ev0"`, the id its count starts from) only when nothing runs
beside it: a Parallel with one branch, a Map with one item or iteration 0 of a Map with
MaxConcurrency 1, and a nested state machine (its own history). Elsewhere the count is unknown
(None) and the cause has no prefix: inside other branches, after a waiting Task
(`.waitForTaskToken`), a nested `.sync` Task, a failed and caught or retried Parallel/Map, a
caught data-flow error and a Distributed Map (ItemReader / ResultWriter).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# The errors whose causes AWS prefixes (the runtime's own failures, not a Task's or a Fail state's).
PREFIXED = frozenset({"States.Runtime", "States.QueryEvaluationError", "States.ItemReaderFailed"})
STATE = 2          # <Type>StateEntered + <Type>StateExited
ATTEMPT = 3        # …Scheduled, …Started, …Succeeded / …Failed / …TimedOut
FAN = 2            # <Type>StateEntered + <Type>StateStarted (and Succeeded + Exited at the join)


def task_events(attempts: int) -> int:
    """A Task that ran `attempts` calls, from its Entered event to its last attempt's end (Exited not included)."""
    return 1 + ATTEMPT * attempts


def join_events(kind: str, branch_counts: Iterable[int]) -> int:
    """The events of a Parallel/Map whose branches (iterations) ended after `branch_counts` events
    each (a Map iteration's count includes its MapIterationStarted)."""
    per_branch = 1 if kind == "Map" else 0  # MapIterationSucceeded
    return FAN + sum(c + per_branch for c in branch_counts) + FAN


def entered(stack: Sequence[Any], ev: int | None) -> int | None:
    """The absolute id of the next state's Entered event, or None when it is not known here."""
    if ev is None:
        return None
    if not stack:
        return ev + 1
    level = stack[-1]
    base = level.get("ev0") if isinstance(level, Mapping) else None
    return base + ev + 1 if isinstance(base, int) else None


def prefixed(state: str, stack: Sequence[Any], ev: int | None, error: Any, cause: Any, renamed: int = 0) -> Any:
    """`cause` with AWS's prefix when `error` is a runtime error of state `state`, entered after
    `ev` events of its scope, and the id is known; else `cause` unchanged. `renamed`: see `shown`."""
    if error not in PREFIXED or not isinstance(cause, str):
        return cause
    number = entered(stack, ev)
    if number is None:
        return cause
    return (f"An error occurred while executing the state '{shown(state, stack, renamed)}' "
            f"(entered at the event id #{number}). {cause}")


def shown(state: str, stack: Sequence[Any], renamed: int = 0) -> str:
    """The state's name as its own state machine has it: a `.sync` child's states are compiled as
    `Task.State` (the stack level says how much to cut), a fire-and-forget child's as
    `Child.State` (`renamed`: the length of `Child.`)."""
    for level in reversed(stack):
        if isinstance(level, Mapping) and isinstance(level.get("strip"), int):
            return state[level["strip"]:]
    return state[renamed:]
