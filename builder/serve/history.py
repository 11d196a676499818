"""GetExecutionHistory's events, in AWS's shape, replayed from what the runtime committed.

unum keeps no event log. Each committed invocation (unum_entry.history.read_history: its input,
its decision, its times) is replayed here through the compiled runner itself (`_Replay`, a
`unum_entry.asl.runner._Runner` whose Task calls answer what the invocation recorded instead of
calling anything, whose timers never sleep): the replay walks the same states and emits, per
state, the events Step Functions writes for it, in AWS's order, with the values AWS shows:

- `ExecutionStarted` (id 1; `input`, `roleArn`, and `stateMachineVersionArn` /
  `stateMachineAliasArn` when started through one), then per state `<Type>StateEntered`
  (`name`, `input`: the state's raw input) and `<Type>StateExited` (`output`; `assignedVariables`
  for a state with `Assign`). The first state entered has `previousEventId` 0, as on AWS.
- A Task on a Lambda ARN: `LambdaFunctionScheduled` (`resource`, `input`: the Lambda's payload
  after InputPath/Parameters, `timeoutInSeconds`), `LambdaFunctionStarted`, then
  `LambdaFunctionSucceeded` (`output`: the raw result, before ResultSelector/ResultPath) or
  `LambdaFunctionFailed` / `LambdaFunctionTimedOut` per attempt; an `arn:aws:states:::SERVICE:ACTION`
  Task the same as `TaskScheduled` (`resourceType`, `resource`, `region`, `parameters`),
  `TaskStarted`, `TaskSucceeded` / `TaskFailed` / `TaskTimedOut`.
- A Map: `MapStateEntered`, `MapStateStarted` (`length`), per iteration `MapIterationStarted`
  (`name`, `index`) before its states and `MapIterationSucceeded` / `MapIterationFailed` after,
  then `MapStateSucceeded` (or `MapStateFailed`) and `MapStateExited`; a Parallel
  `ParallelStateEntered`, `ParallelStateStarted`, its branches, `ParallelStateSucceeded` /
  `ParallelStateFailed`, `ParallelStateExited`. An iteration's or branch's first event follows
  the fan-out's Started event; the Succeeded event and the Exited event after it both follow
  the branch that ended last (as AWS's histories link them).
- The end: `ExecutionSucceeded` (`output`), `ExecutionFailed` / `ExecutionAborted` /
  `ExecutionTimedOut` (`error`, `cause`); a failure a redrive cleared is followed by
  `ExecutionFailed` and `ExecutionRedriven` (`redriveCount`: 1, 2, ...), which the invocation
  sent again follows.

Ids follow the events' times (each invocation's handler start and commit, never before a
producer's), ties broken by causal order. Values are JSON text; `inputDetails` /
`outputDetails` say `truncated: false` (botocore's model: "Always false for API calls"); a value
over Step Functions' 256 KiB payload quota (possible only with `UNUM_ASL_DATA_LIMIT=off`) is left
out with `truncated: true`. `include_data=False` leaves out every `input` and `output` (with
their details) and `assignedVariables`.

Every replayed invocation is checked: its replay must end in the decision it committed (the
context object's fields aside). When it does not (a raw result that was not recorded, or
`States.UUID()` / `$$.State.EnteredTime` read by a later state), the events after the Task's
outcome are left out, and the outcome and Task exit carry no value. An invocation that cannot be
replayed at all shows its states' Entered / Exited events without values.

## What unum cannot know

- **Timing inside an invocation.** The store holds when each invocation's handler started and
  when it committed: the events before a Task's outcome carry the start, the rest the commit.
  `LambdaFunctionScheduled` and `LambdaFunctionStarted` (`TaskScheduled`, `TaskStarted`) share
  one time; the order of events of concurrent iterations or branches follows those times, not
  AWS's scheduler.
- **A raw Task result over 2 KiB** (`runner.NOTED_RESULT_BYTES`) **that is not the state's
  output** (the Task has ResultSelector, ResultPath or OutputPath, or states run after it in the
  same function): it is not recorded, so `LambdaFunctionSucceeded` / `TaskSucceeded` carry no
  `output` and the states that follow in that invocation are not shown. A result up to 2 KiB,
  or one that is the output, is exact.
- **`TaskStarted` of an integration and `LambdaFunctionStarted`** are not observed apart from
  `...Scheduled`: the call is made in-situ by the function, with nothing between the two.
- **Values a replay cannot reproduce**: `States.UUID()`, `States.MathRandom()` and
  `$$.State.EnteredTime` evaluated after a Task (the invocation is shown as above).
- **Events of states that did not end**: a stopped or timed-out execution has no
  `...StateAborted` / `MapIterationAborted` events, and the attempts of an invocation that
  crashed without reporting an error are not shown.
- **`.waitForTaskToken` Tasks, durable-timer continuations of a callback, nested `.sync`
  executions**: shown as their states' Entered / Exited events without Task events or values.
- **A Distributed Map** shows `MapRunStarted` (`mapRunArn`) after `MapStateStarted` and
  `MapRunSucceeded` / `MapRunFailed` (no error or cause) before `MapStateSucceeded` /
  `MapStateFailed`, as AWS does; its iterations' events stay in the parent's history (AWS keeps
  them in the child executions' histories), and a run the execution's stop cut short has no
  `MapRunAborted`.
- **`taskCredentials`, `heartbeatInSeconds` of a Lambda, and activity events**: unum runs no
  activities and assumes no per-Task role.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unum_entry.asl.runner import NOTED, Fragment, Services, _distributed, _Runner, _TaskError, invoke_response

if TYPE_CHECKING:
    from unum_entry.history import History, Step
    from unum_entry.stores.base import Store

    from builder.serve.registry import Execution, Registry

PAYLOAD_QUOTA = 256 * 1024  # Step Functions' payload quota: a larger value is left out, truncated
ALL_INLINE = 1 << 62  # read every committed value whole (the replay needs them, not references)
_END_EVENT = {"SUCCEEDED": "ExecutionSucceeded", "FAILED": "ExecutionFailed", "ABORTED": "ExecutionAborted",
              "TIMED_OUT": "ExecutionTimedOut"}
_SERVICE_PREFIX = "arn:aws:states:::"
_DATA_KEYS = ("input", "inputDetails", "output", "outputDetails", "assignedVariables", "assignedVariablesDetails")


class _Unreplayable(Exception):
    """The invocation takes a path the replay does not follow (callbacks, nested timers)."""


@dataclass(eq=False)
class _Draft:
    """One event before numbering: `prev` are the events it follows (its `previousEventId` is the
    largest of their ids; 0 when empty), `late` whether it comes after the invocation's Task
    (its time is the commit, else the handler start)."""

    type: str
    details: dict[str, Any] | None
    prev: tuple[_Draft, ...] = ()
    late: bool = False
    at: int = 0
    id: int = 0
    run: str | None = None  # a Distributed Map's MapStateStarted: its Map Run's ARN (MapRunStarted)


@dataclass(frozen=True)
class _Level:
    """One fan-out an invocation runs inside: the Map or Parallel, the branch index, and the
    fan-out's Started event (what the branch's first event follows)."""

    kind: str
    name: str
    index: int
    started: _Draft


@dataclass
class _Segment:
    """One committed invocation's events, its fan-out scope, and what its successors follow."""

    step: Step
    drafts: list[_Draft]
    scope: tuple[_Level, ...]
    fanned: _Draft | None = None   # its `<Type>StateStarted` when it fans out
    fan_kind: str = ""
    fan_name: str = ""
    lasts: tuple[_Draft, ...] = field(default_factory=tuple)  # what an event after it follows


def aws_events(store: Store, execution: Execution, status: str, *, include_data: bool = True,
               registry: Registry | None = None) -> list[dict[str, Any]]:
    """The execution's history as AWS's HistoryEvent list, oldest first (module docstring).
    `registry` names the role the execution runs with (`ExecutionStarted.roleArn`)."""
    from unum_entry.history import read_history
    from unum_entry.outcome import read_outcome

    history = read_history(store, execution.workflow, inline_bytes=ALL_INLINE)
    failure = read_outcome(store, execution.workflow).failure if status in ("FAILED", "ABORTED", "TIMED_OUT") else None
    drafts = _drafts(history, execution, status, failure, _role(registry, execution))
    return [_shaped(d, include_data) for d in _numbered(drafts)]


# ---- the drafts: one segment per committed invocation ------------------------------------------

def _drafts(history: History, execution: Execution, status: str, failure: Mapping[str, Any] | None,
            role: str | None) -> list[_Draft]:
    """ExecutionStarted, every invocation's segment in causal order, then the ending event."""
    started = _Draft("ExecutionStarted", _execution_started(execution, role))
    started.at = int(execution.started * 1000)
    by_key = {s.key: s for s in history.steps}
    segments: dict[str, _Segment] = {}
    out = [started]
    ends: dict[str, int] = {}
    redrives = 0
    rerun: dict[tuple[str, ...], _Draft] = {}  # what a redriven invocation consumed -> its ExecutionRedriven
    for step in history.steps:
        received = _received(step, by_key, history, execution)
        producers = [segments[r] for r in (*(i[0] for i in step.inputs), *step.gathered, _waiting(received))
                     if r in segments]
        begin = max([step.started_ms if step.started_ms is not None else step.ended_ms, started.at,
                     *(ends[p.step.key] for p in producers)])
        ends[step.key] = max(begin, step.ended_ms)
        segment = _segment(step, received, producers, execution, by_key)
        for draft in segment.drafts:
            draft.at = ends[step.key] if draft.late else begin
        consumed = tuple(sorted(p.step.key for p in producers))
        if consumed in rerun and segment.drafts:  # the invocation a redrive sent again
            segment.drafts[0].prev = (rerun.pop(consumed),)
        cleared = _cleared(step, segment, redrives < execution.redrives)
        if cleared is not None:  # the workflow failed here; a redrive cleared the failure and went on
            redrives += 1
            failed = _Draft("ExecutionFailed", cleared, segment.lasts, at=ends[step.key])
            again = _Draft("ExecutionRedriven", {"redriveCount": redrives}, (failed,), at=ends[step.key])
            segment.drafts += [failed, again]
            segment.lasts = (again,)
            rerun[consumed] = again
        segments[step.key] = segment
        out.extend(segment.drafts)
    end = _END_EVENT.get(status)
    if end is not None:
        finish = max([history.ended_ms or started.at, *ends.values(), started.at])
        out.append(_ending(end, execution, failure, _final(list(segments.values()), status), finish))
    return out


def _cleared(step: Step, segment: _Segment, redriven: bool) -> dict[str, Any] | None:
    """The `{error, cause}` of a failure a redrive cleared at this invocation: its failure record
    kept under a redrive's claim, or (while the execution has redrives left to place) a failure
    decision at the machine's top level that the execution went on after."""
    if step.redriven:
        return _error_details(step.error)
    decision = step.output
    if redriven and not segment.scope and isinstance(decision, Mapping) and decision.get("__next__") == "__fail__":
        error = decision.get("error")
        return _error_details(error if isinstance(error, Mapping) else None)
    return None


def _received(step: Step, by_key: Mapping[str, Step], history: History, execution: Execution) -> Any:
    """The event the invocation received: the execution's input for the entry, else what the
    history holds (unum_entry.history.input_of)."""
    from unum_entry.history import input_of

    if not step.inputs and not step.gathered and step.received is None:
        return _parsed(execution.input)
    return input_of(step, by_key, history)


def _waiting(received: Any) -> str:
    """The invocation a timer continues (its committed wait), or "" for another event."""
    from unum_entry.timers import TIMER

    timer = received.get(TIMER) if isinstance(received, Mapping) else None
    return str(timer.get("waiting", "")) if isinstance(timer, Mapping) else ""


def _final(segments: list[_Segment], status: str) -> tuple[_Draft, ...]:
    """What the ending event follows: the invocation that ended the execution (its root end or
    failure), else (stopped, timed out) the latest event."""
    for segment in reversed(segments):
        decision = segment.step.output if segment.step.error is None else None
        ended = isinstance(decision, Mapping) and decision.get("__next__") in ("__end__", "__fail__")
        if (ended and not segment.scope) or (segment.step.error is not None and status == "FAILED"):
            return segment.lasts
    return tuple(d for s in segments[-1:] for d in s.lasts)


def _ending(kind: str, execution: Execution, failure: Mapping[str, Any] | None, prev: tuple[_Draft, ...],
            at: int) -> _Draft:
    if kind == "ExecutionSucceeded":
        details: dict[str, Any] = _value("output", _parsed(execution.output))
    else:
        details = _error_details(failure)
        if kind == "ExecutionTimedOut":
            details.setdefault("error", "States.Timeout")
    return _Draft(kind, details, prev, at=at)


def _execution_started(execution: Execution, role: str | None) -> dict[str, Any]:
    base = ":".join(execution.machine_arn.split(":")[:7])
    details: dict[str, Any] = {"input": execution.input, "inputDetails": {"truncated": False}}  # the text as given
    if role:
        details["roleArn"] = role
    if execution.alias is not None:
        details["stateMachineAliasArn"] = f"{base}:{execution.alias}"
    if execution.version is not None:
        details["stateMachineVersionArn"] = f"{base}:{execution.version}"
    return details


def _role(registry: Registry | None, execution: Execution) -> str | None:
    """The role of the definition the execution runs (its version's, else the machine's)."""
    if registry is None:
        return None
    if execution.version is not None:
        version = registry.version(execution.machine, execution.version)
        if version is not None:
            return version.role_arn
    machine = registry.machine(execution.machine)
    return machine.role_arn if machine is not None else None


def _segment(step: Step, received: Any, producers: Sequence[_Segment], execution: Execution,
             by_key: Mapping[str, Step]) -> _Segment:
    """The events of one invocation: its replay (or, failing that, its states without values),
    linked to the events of what it consumed and closed by its iteration's end."""
    scope, first_prev, head = _placement(step, producers)
    fragment = _fragment(execution.folder, step.function)
    events: list[tuple[str, dict[str, Any] | None, bool]] = []
    fan: tuple[str, str] | None = None
    if fragment is not None:
        try:
            events, fan = _replayed(fragment, step, received, execution, by_key)
        except _Unreplayable:
            events = _unvalued(fragment)
        except Exception:  # noqa: BLE001 - a replay must never break the history of the rest
            events = _unvalued(fragment)
    drafts = list(head)
    previous: tuple[_Draft, ...] = (drafts[-1],) if drafts else first_prev
    fanned = None
    for kind, details, late in events:
        draft = _Draft(kind, details, previous, late)
        if kind in ("MapStateStarted", "ParallelStateStarted"):
            fanned = draft
        drafts.append(draft)
        previous = (draft,)
    if step.gathered and len(drafts) > 1 and drafts[0].type.endswith(("StateSucceeded", "StateFailed")) \
            and drafts[1].type.endswith("StateExited"):
        drafts[1].prev = drafts[0].prev  # the Exited event follows the last branch too, as on AWS
    _map_run_events(step, fragment, fan, fanned, producers, drafts, execution)
    drafts.extend(_iteration_end(step, scope, previous))
    segment = _Segment(step, drafts, scope, fanned, *(fan or ("", "")))
    segment.lasts = (drafts[-1],) if drafts else first_prev
    return segment


def _map_run_events(step: Step, fragment: Fragment | None, fan: tuple[str, str] | None, fanned: _Draft | None,
                    producers: Sequence[_Segment], drafts: list[_Draft], execution: Execution) -> None:
    """A Distributed Map's Map Run events, in place: `MapRunStarted` (`mapRunArn`) after its
    `MapStateStarted`, and `MapRunSucceeded` / `MapRunFailed` before the join's `MapStateSucceeded`
    / `MapStateFailed` (builder.serve.map_runs reads the runs back from these events)."""
    from builder.serve.arns import map_run_arn

    if fanned is not None and fan is not None and fan[0] == "Map" and fragment is not None \
            and _distributed(fragment.states.get(fan[1], {})):
        fanned.run = map_run_arn(execution.machine_arn, execution.machine, execution.name, fan[1], step.key)
        drafts.insert(drafts.index(fanned) + 1, _Draft("MapRunStarted", {"mapRunArn": fanned.run}, (fanned,)))
    levels = [p.scope[-1] for p in producers if p.scope] if step.gathered else []
    if not levels or levels[0].started.run is None:
        return
    for i, draft in enumerate(drafts):
        if draft.type in ("MapStateSucceeded", "MapStateFailed"):
            ended = _Draft(draft.type.replace("MapState", "MapRun"), {} if draft.type == "MapStateFailed" else None,
                           draft.prev, draft.late)
            draft.prev = (ended,)
            drafts.insert(i, ended)
            return


def _placement(step: Step, producers: Sequence[_Segment]) -> tuple[tuple[_Level, ...], tuple[_Draft, ...],
                                                                     list[_Draft]]:
    """(the fan-out scope the invocation runs in, what its first event follows, the events that
    open it: `MapIterationStarted` for a Map iteration's first invocation)."""
    if not producers:
        return (), (), []  # the entry: the first state entered follows event 0, as on AWS
    if step.gathered:  # a join: one scope up; it follows every branch's end
        scope = producers[0].scope[:-1]
        return scope, tuple(d for p in producers for d in p.lasts), []
    producer = producers[0]
    if producer.fanned is None:
        return producer.scope, producer.lasts, []
    index = step.position[-1][0]
    level = _Level(producer.fan_kind, producer.fan_name, index, producer.fanned)
    if producer.fan_kind == "Map":
        opened = _Draft("MapIterationStarted", {"name": producer.fan_name, "index": index}, (producer.fanned,))
        return (*producer.scope, level), (), [opened]
    return (*producer.scope, level), (producer.fanned,), []


def _iteration_end(step: Step, scope: tuple[_Level, ...], previous: tuple[_Draft, ...]) -> list[_Draft]:
    """`MapIterationSucceeded` / `MapIterationFailed` after the invocation that ends a Map iteration."""
    decision = step.output if step.error is None else {"__next__": "__fail__"}
    if not scope or scope[-1].kind != "Map" or not isinstance(decision, Mapping):
        return []
    ending = {"__end__": "MapIterationSucceeded", "__fail__": "MapIterationFailed"}.get(str(decision.get("__next__")))
    if ending is None:
        return []
    return [_Draft(ending, {"name": scope[-1].name, "index": scope[-1].index}, previous, late=True)]


def _fragment(folder: str, function: str) -> Fragment | None:
    """The compiled function's fragment (its unum-asl.json), or None for another function."""
    path = Path(folder) / function / "unum-asl.json"
    try:
        return Fragment.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _unvalued(fragment: Fragment) -> list[tuple[str, dict[str, Any] | None, bool]]:
    """The states an invocation runs, without values (module docstring: when it cannot be replayed)."""
    out: list[tuple[str, dict[str, Any] | None, bool]] = []
    for name, kind, role in _walk_names(fragment):
        if role != "exit":
            out.append((f"{kind}StateEntered", {"name": name}, False))
        if role != "enter":
            out.append((f"{kind}StateExited", {"name": name}, True))
    return out


def _walk_names(fragment: Fragment) -> list[tuple[str, str, str]]:
    """`(name, Type, role)` of the states from the fragment's head through the folded states
    (builder.runs.history.machine_states' walk, for one fragment)."""
    walk: list[tuple[str, str, str]] = []
    name: Any = fragment.head
    seen: set[str] = set()
    while isinstance(name, str) and name not in seen and isinstance(fragment.states.get(name), Mapping):
        seen.add(name)
        kind = str(fragment.states[name].get("Type"))
        if kind in ("Map", "Parallel"):
            walk.append((name, kind, "exit" if fragment.join and not walk else "enter"))
            if not (fragment.join and len(walk) == 1):
                break
        elif kind == "Task" and (name != fragment.task or any(k == "Task" for _, k, _ in walk)):
            break
        elif kind not in ("Task", "Pass", "Wait", "Succeed"):
            walk.append((name, kind, "enter"))
            break
        else:
            walk.append((name, kind, "both"))
        name = fragment.states[name].get("Next")
    return walk


# ---- the replay --------------------------------------------------------------------------------

@dataclass(frozen=True)
class _ReplayContext:
    """The fields of the runtime's context that the runner reads (no timers: nothing is armed)."""

    workflow_id: str
    function_name: str
    invocation: str
    attempt: int
    index: int
    size: int
    iteration: int
    deadline: float = 0.0


def _replayed(fragment: Fragment, step: Step, received: Any, execution: Execution,
              by_key: Mapping[str, Step]) -> tuple[list[tuple[str, dict[str, Any] | None, bool]], tuple[str, str] | None]:
    """Replay `step` (module docstring): its events `(type, details, after the Task)` and, when it
    fans out, `(Map or Parallel, state name)`. Raises _Unreplayable."""
    from unum_entry.asl.function import data_limit

    committed = step.output
    if step.error is not None or not isinstance(committed, Mapping):
        committed = {"__next__": "__fail__", "error": step.error or {}}
    index, size, iteration = step.position[-1]
    context = _ReplayContext(execution.workflow, step.function, step.key, step.attempts - 1, index, size, iteration)
    at = (step.started_ms or step.ended_ms) / 1000
    services = Services(sleep=lambda _s: None, now=lambda: _utc(at), data_limit=data_limit())
    region = execution.machine_arn.split(":")[3] if execution.machine_arn.count(":") >= 3 else ""
    replay = _Replay(fragment, context, services, committed, region, lambda key: _output(by_key, key))
    decision = replay.start(received)
    if not _same(decision, committed):
        return replay.unverified(), replay.fan
    return replay.events, replay.fan


def _output(by_key: Mapping[str, Step], key: str) -> Any:
    found = by_key.get(key)
    return None if found is None else found.output


class _Replay(_Runner):
    """The runner, replaying one committed invocation (module docstring): every state it runs
    records its events; a Task's calls answer with the failures and result the decision noted
    (`runner.NOTED`), else with the next input the decision holds; delays return at once, or
    with the committed timer wait when the invocation suspended there."""

    def __init__(self, fragment: Fragment, context: _ReplayContext, services: Services, committed: Mapping[str, Any],
                 region: str, committed_of: Callable[[str], Any]) -> None:
        super().__init__(fragment, None, context, services)
        self.committed = committed
        self.region = region
        self.committed_of = committed_of
        found = committed.get(NOTED)
        noted: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        self.failures = [tuple(x) for x in noted.get("x", [])]
        self.result: tuple[Any, ...] = (noted["r"],) if "r" in noted else ()
        self.events: list[tuple[str, dict[str, Any] | None, bool]] = []
        self.late = False        # the Task's outcome is emitted: later events carry the commit time
        self.resuming = False    # a timer continues inside a state: no second Entered event
        self.fanning: str | None = None
        self.completed = False
        self.fan: tuple[str, str] | None = None
        self.task: tuple[str, Mapping[str, Any], Any] | None = None  # (name, state, effective input)
        self.outcome_at = -1     # index in events of the Task's outcome
        self.ended_vars: Mapping[str, Any] = {}

    # ---- events ------------------------------------------------------------------------------

    def _emit(self, kind: str, details: dict[str, Any] | None = None) -> None:
        self.events.append((kind, details, self.late))

    def _entered(self, name: str, state: Mapping[str, Any], raw: Any) -> None:
        if self.resuming:
            self.resuming = False
            return
        self._emit(f"{state['Type']}StateEntered", {"name": name, **_value("input", raw)})

    def _exited(self, name: str, state: Mapping[str, Any], step: Any) -> None:
        """The Exited event of a state that went on (`(next, thread)`) or ended its scope."""
        if isinstance(step, tuple):
            output, variables = step[1].input, step[1].vars
        elif isinstance(step, Mapping) and step.get("__next__") == "__end__":
            output, variables = step.get("output"), self.ended_vars
        else:
            return
        details = {"name": name, **_value("output", output)}
        assigned = _assigned(state, variables)
        if assigned is not None:
            details["assignedVariables"] = assigned
            details["assignedVariablesDetails"] = {"truncated": False}
        self._emit(f"{state['Type']}StateExited", details)

    def unverified(self) -> list[tuple[str, dict[str, Any] | None, bool]]:
        """The events when the replay did not end in the committed decision (module docstring)."""
        if self.outcome_at < 0:
            kept = self.events[:1]
            return [(k, {x: v for x, v in (d or {}).items() if x not in _DATA_KEYS[2:]} or None, late)
                    for k, d, late in kept]
        kept = self.events[:self.outcome_at + 1]
        kind, details, late = kept[-1]
        kept[-1] = (kind, {k: v for k, v in (details or {}).items() if k not in _DATA_KEYS}, late)
        if self.task is not None:
            kept.append((f"{self.task[1]['Type']}StateExited", {"name": self.task[0]}, True))
        return kept

    def _end(self, th: Any) -> dict[str, Any]:
        self.ended_vars = th.vars  # an end decision carries no variables: its state's Exited shows them
        return super()._end(th)

    # ---- states --------------------------------------------------------------------------------

    def _folded(self, run: Callable[..., Any], name: str, state: Mapping[str, Any], th: Any) -> Any:
        self._entered(name, state, th.input)
        step = run(name, state, th)
        self._exited(name, state, step)
        return step

    def _pass(self, name: str, state: Mapping[str, Any], th: Any) -> Any:
        return self._folded(super()._pass, name, state, th)

    def _choice(self, name: str, state: Mapping[str, Any], th: Any) -> Any:
        return self._folded(super()._choice, name, state, th)

    def _wait(self, name: str, state: Mapping[str, Any], th: Any) -> Any:
        return self._folded(super()._wait, name, state, th)

    def _succeed(self, name: str, state: Mapping[str, Any], th: Any) -> Any:
        return self._folded(super()._succeed, name, state, th)

    def _fail_state(self, name: str, state: Mapping[str, Any], th: Any) -> Any:
        return self._folded(super()._fail_state, name, state, th)

    def _task(self, name: str, state: Mapping[str, Any], th: Any, counts: list[int] | None = None) -> Any:
        from unum_entry.asl import callbacks, dataflow
        from unum_entry.errors import StatesRuntimeError

        if callbacks.waits(state) or "__unum_nested__" in state:
            raise _Unreplayable(name)
        self._entered(name, state, th.input)
        try:
            effective = dataflow.state_input(state, th.input, self._scope(name, th))
        except StatesRuntimeError:
            effective = None
        self.task = (name, state, effective)
        step = super()._task(name, state, th, counts)
        self._exited(name, state, step)
        return step

    def _call(self, event: Any, timeout: float | None, *, retry_count: int = 0,
              execution: Mapping[str, Any] | None = None) -> Any:
        return self._attempt(event, timeout, mocked=False)

    def _mocked(self, name: str, th: Any, retries: int) -> Any:
        return self._attempt(None, None, mocked=True)

    def _attempt(self, event: Any, timeout: float | None, *, mocked: bool) -> Any:
        """One attempt of the Task: its Scheduled and Started events, then the noted failure (raised
        as the Task's error) or the result."""
        if self.task is None:
            raise _Unreplayable("a call outside a Task")
        name, state, effective = self.task
        resource = str(state.get("Resource", ""))
        integration = resource.startswith(_SERVICE_PREFIX)
        service, action = _service(resource) if integration else ("", "")
        if integration:
            scheduled: dict[str, Any] = {"resourceType": service, "resource": action, "region": self.region,
                                         "parameters": _text(effective)}
            if timeout is not None:
                scheduled["timeoutInSeconds"] = int(timeout)
            self._emit("TaskScheduled", scheduled)
            self._emit("TaskStarted", {"resourceType": service, "resource": action})
        else:
            lambda_scheduled: dict[str, Any] = {"resource": resource, **_value("input", event)}
            if timeout is not None:
                lambda_scheduled["timeoutInSeconds"] = int(timeout)
            self._emit("LambdaFunctionScheduled", lambda_scheduled)
            self._emit("LambdaFunctionStarted")
        if self.failures:
            error, cause = self.failures.pop(0)
            self._outcome(_failed_type(integration, error), {**({"resourceType": service, "resource": action}
                                                                if integration else {}),
                                                             **_error_details({"Error": error, "Cause": cause})})
            raise _TaskError(error, cause)
        invoke = resource.startswith(_SERVICE_PREFIX + "lambda:invoke") and not mocked
        result = self.result[0] if self.result else self._candidate(invoke)
        shown = invoke_response(result) if invoke else result
        if integration:
            self._outcome("TaskSucceeded", {"resourceType": service, "resource": action, **_value("output", shown)})
        else:
            self._outcome("LambdaFunctionSucceeded", _value("output", shown))
        return result

    def _outcome(self, kind: str, details: dict[str, Any]) -> None:
        self._emit(kind, details)
        self.outcome_at = len(self.events) - 1
        self.late = True

    def _candidate(self, invoke: bool) -> Any:
        """The raw result when the decision noted none: the Task's output is its result and is
        the decision's next input (runner._Runner._hands_on); checked when the replay ends."""
        nxt = _next_input(self.committed)
        if invoke and isinstance(nxt, Mapping) and "Payload" in nxt:
            return nxt["Payload"]
        return nxt

    # ---- fan-out and join ----------------------------------------------------------------------

    def _fan_out(self, name: str, state: Mapping[str, Any], th: Any, retries: list[int] | None = None) -> Any:
        self._entered(name, state, th.input)
        self.fanning, self.completed = name, False
        step = super()._fan_out(name, state, th, retries)
        self.fanning = None
        if isinstance(step, Mapping) and step.get("__next__") == name and ("items" in step or "fanout" in step):
            kind = str(state["Type"])
            self._emit(f"{kind}StateStarted", {"length": len(step["items"])} if "items" in step else None)
            self.fan = (kind, name)
        elif not self.completed:
            self._exited(name, state, step)
        return step

    def _complete(self, name: str, state: Mapping[str, Any], th: Any, results: list[Any], failed: Sequence[int] = (),
                  *, ev: int | None = None) -> Any:
        if self.fanning == name:  # a Map over no items completes where it starts
            self._emit("MapStateStarted", {"length": 0})
        self._emit(f"{state['Type']}StateSucceeded")
        self.completed = True
        step = super()._complete(name, state, th, results, failed, ev=ev)
        self._exited(name, state, step)
        return step

    def _fan_failed(self, name: str, state: Mapping[str, Any], th: Any, parent: Mapping[str, Any],
                    error: Mapping[str, Any]) -> Any:
        self._emit(f"{state['Type']}StateFailed")
        self.resuming = True  # a retried fan-out is not entered again
        step = super()._fan_failed(name, state, th, parent, error)
        self.resuming = False
        self._exited(name, state, step)
        return step

    # ---- timers ----------------------------------------------------------------------------------

    def _delay(self, purpose: str, name: str, th: Any, seconds: float,
               retries: list[int] | None = None) -> dict[str, Any] | None:
        from unum_entry.asl.timing import WAIT

        wait = self.committed.get("wait") if self.committed.get("__next__") == WAIT else None
        if isinstance(wait, Mapping) and wait.get("timer") == purpose and wait.get("state") == name:
            return dict(self.committed)  # the invocation suspended here (its timer continues it)
        return None

    def _timer(self, timer: Mapping[str, Any]) -> dict[str, Any]:
        """A timer's continuation: the wait the invocation it names committed, continued as the
        runner continues it (runner._Runner._timer)."""
        from unum_entry.asl.runner import _Thread

        if timer.get("purpose") not in ("wait", "retry"):
            raise _Unreplayable("a callback's or nested execution's timer")
        waited = self.committed_of(str(timer.get("waiting")))
        wait = waited.get("wait") if isinstance(waited, Mapping) else None
        if not isinstance(wait, Mapping):
            raise _Unreplayable("the wait is not committed")
        name, th = wait["state"], _Thread.of(wait["transfer"])
        state = self.f.states[name]
        self.ran_task = bool(wait.get("ran"))
        if wait["timer"] == "wait":
            self._emit(f"{state['Type']}StateExited", {"name": name, **_value("output", th.input)})
            step = self._checked(name, state, th)
        else:
            self.resuming = True
            runs = self._task if state["Type"] == "Task" else self._fan_out
            step = runs(name, state, th, list(wait["retries"]))
        return step if isinstance(step, dict) else self._walk(*step)

    def _resumed(self, resume: Mapping[str, Any]) -> dict[str, Any]:
        raise _Unreplayable("a task token's callback")


# ---- values and shapes ---------------------------------------------------------------------------

def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _value(key: str, value: Any) -> dict[str, Any]:
    """`{key: JSON text, keyDetails: {truncated: false}}`; over the payload quota the value is
    left out, `truncated: true`."""
    text = _text(value)
    if len(text.encode("utf-8")) > PAYLOAD_QUOTA:
        return {f"{key}Details": {"truncated": True}}
    return {key: text, f"{key}Details": {"truncated": False}}


def _parsed(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _error_details(error: Mapping[str, Any] | None) -> dict[str, Any]:
    """`{error, cause}` of a failure record (each left out when absent), as text."""
    details: dict[str, Any] = {}
    for key in ("Error", "Cause"):
        value = (error or {}).get(key)
        if value is not None:
            details[key.lower()] = value if isinstance(value, str) else _text(value)
    return details


def _assigned(state: Mapping[str, Any], variables: Mapping[str, Any]) -> dict[str, str] | None:
    """The variables the state's Assign set, as JSON text (None without Assign)."""
    assign = state.get("Assign")
    if not isinstance(assign, Mapping):
        return None
    names = [k[:-2] if k.endswith(".$") else k for k in assign]
    return {n: _text(variables[n]) for n in names if n in variables}


def _service(resource: str) -> tuple[str, str]:
    """(resourceType, resource) of an integration's ARN, as AWS names them: `lambda`, `invoke`;
    `aws-sdk:s3`, `getObject`; `states`, `startExecution.sync`."""
    rest = resource[len(_SERVICE_PREFIX):]
    service, _, action = rest.rpartition(":")
    return service, action


def _failed_type(integration: bool, error: str) -> str:
    timed_out = error == "States.Timeout"
    if integration:
        return "TaskTimedOut" if timed_out else "TaskFailed"
    return "LambdaFunctionTimedOut" if timed_out else "LambdaFunctionFailed"


def _next_input(decision: Mapping[str, Any]) -> Any:
    """The input of what comes after the invocation, as its decision holds it."""
    if "transfer" in decision:
        return decision["transfer"].get("input")
    if "fanout" in decision:
        return decision["fanout"].get("parent", {}).get("raw")
    if "items" in decision and decision["items"]:
        return decision["items"][0]["stack"][-1]["parent"]["raw"]
    return decision.get("output")


def _same(replayed: Any, committed: Any) -> bool:
    """Whether the replay ended in the committed decision, the context object's fields aside."""
    return _comparable(replayed) == _comparable(committed)


def _comparable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _comparable(v) for k, v in value.items() if k not in (NOTED, "exec")}
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    return value


def _utc(seconds: float) -> Any:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(seconds, timezone.utc)


def _numbered(drafts: list[_Draft]) -> list[_Draft]:
    """Ids by time (module docstring), `ExecutionStarted` first; a draft is never numbered before
    one it follows."""
    first, rest = drafts[0], drafts[1:]
    order = {id(d): i for i, d in enumerate(rest)}
    rest.sort(key=lambda d: (d.at, order[id(d)]))
    numbered = [first, *rest]
    for i, draft in enumerate(numbered, start=1):
        draft.id = i
    return numbered


def _shaped(draft: _Draft, include_data: bool) -> dict[str, Any]:
    """The HistoryEvent of a numbered draft (its details under the member AWS names for its type)."""
    event: dict[str, Any] = {"timestamp": draft.at / 1000, "type": draft.type, "id": draft.id,
                             "previousEventId": max((p.id for p in draft.prev), default=0)}
    if draft.type == "ExecutionStarted":
        event["previousEventId"] = 0
    details = draft.details
    if details is not None:
        if not include_data:
            details = {k: v for k, v in details.items() if k not in _DATA_KEYS}
        event[_details_key(draft.type)] = details
    return event


def _details_key(event_type: str) -> str:
    if event_type.endswith("StateEntered"):
        return "stateEnteredEventDetails"
    if event_type.endswith("StateExited"):
        return "stateExitedEventDetails"
    return event_type[0].lower() + event_type[1:] + "EventDetails"
