"""The in-function Step Functions state runner.

A compiled state machine is a normal unum workflow: one function per Task (plus, where a state
has nowhere else to run, a small router or join function, see docs/step-functions.md). Each
function's handler is `run`: it enters the state machine at the function's *head* state, runs
the Task's user handler (data flow in, Retry, Catch, data flow out), then every non-Task state
that follows (Pass, Choice, Wait, Succeed, Fail) until the next Task, Parallel or Map, or the
end, and returns a *decision*. The decision is the function's checkpointed output, so every
replay takes the same route; the function's IR routes on `$.__next__`:

- `{"__next__": "<Task>", "transfer": T}`       invoke the Task's function with T
- `{"__next__": "<Parallel>", "fanout": F}`     fan out to the branches (each builds its own T)
- `{"__next__": "<Map>", "items": [T, ...], "max_concurrency": k}`    map over the iterations, k at a time
- `{"__next__": "__end__", "output": X[, "stack": S]}`   the end (of the workflow, or of a branch: fan-in)
- `{"__next__": "__fail__", "error": E[, "stack": S]}`   a failure (of the workflow, or of a branch)

A transfer T is `{"__unum_asl__": 1, "input", "vars", "stack", "exec"}`: the next state's raw
input, the workflow variables, the Parallel/Map nesting stack and the execution's context
object fields. Each stack level is `{"parent": P}` where only branch 0 carries P (the Parallel or
Map state's raw input, variables and retry counters, which the join needs) and the others None;
with `Fragment.positions` it also holds `"at": [index, size, iteration]`, the fan-out frame the
branches run under (the origin's innermost frame after its IR's leading `next`), so a Task in a
branch can name its whole fan-out position in a task token (unum_entry/asl/callbacks.py).
"""

from __future__ import annotations

import json
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any

from unum_entry.asl import dataflow, event_ids, mocked, paths, timing
from unum_entry.asl.retry import matches, retry_delay
from unum_entry.errors import ConditionEvaluationError, StatesRuntimeError
from unum_entry.timers import TIMER, timers_of

MARK = "__unum_asl__"
END = "__end__"
FAIL = "__fail__"
MAX_STEPS = 25_000  # Step Functions' history limit: a Pass/Choice loop without a Task ends here
FRAGMENT_VERSION = 1
DATA_LIMIT = 256 * 1024  # Step Functions' payload quota (UTF-8 bytes of the JSON text)
DATA_LIMIT_EXCEEDED = "States.DataLimitExceeded"
NESTED = "__unum_nested__"  # a Parallel that runs a nested state machine (unum_entry/asl/nested.py)
NOTED = "__task__"  # what a decision keeps of its Task for the execution history (_Runner._note)
NOTED_RESULT_BYTES = 2048  # a larger raw result is not kept: the history shows it as unknown
NOTED_CAUSE_CHARS = 32768  # Step Functions' limit of a cause


@dataclass(frozen=True)
class Fragment:
    """What one function runs (its `unum-asl.json`)."""

    function: str
    head: str                     # the state this function starts at
    join: bool                    # head is a Parallel/Map whose branches this function joins
    in_branch: bool               # inside a Parallel/Map branch: the end fans in
    states: Mapping[str, Mapping[str, Any]]
    task: str | None = None       # the Task whose user handler this function holds
    query_language: str = "JSONPath"
    machine: Mapping[str, Any] = field(default_factory=dict)  # {"Name", "Id"} of the state machine
    carry_input: bool = False     # keep $$.Execution.Input in every transfer (the definition reads it)
    lambda_name: str | None = None
    positions: bool = False       # record each fan-out's position in the stack (`.waitForTaskToken` in a branch)
    renamed: int = 0              # a fire-and-forget child's states are `CHILD.STATE`: the length of `CHILD.`
    mocking: bool = False         # compiled for a mock test case: transfers count mocked invocations
    mock: Mapping[str, Any] | None = None  # the Task's mocked response (unum_entry/asl/mocked.py)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Fragment:
        """The fragment `doc` (an `unum-asl.json`) holds: its keys named as the fields, a field
        left out takes its default; TypeError when `function`, `head` or `states` is missing."""
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in doc.items() if key in names})


@dataclass(frozen=True)
class Services:
    """Time and randomness, injectable so tests are fast and deterministic."""

    sleep: Callable[[float], None]
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc)
    time_scale: float = 1.0       # multiplies every Wait and Retry delay (tests: 0.001)
    uuid: Callable[[], str] | None = None
    random: Callable[[], float] | None = None
    data_limit: int | None = DATA_LIMIT  # bytes of a state's input/output; None lifts the limit

    def pause(self, seconds: float) -> None:
        if seconds > 0:
            self.sleep(seconds * self.time_scale)


@dataclass(frozen=True)
class LambdaContext:
    """The second argument of a Task's handler: the fields Lambda handlers use, plus unum's."""

    function_name: str
    invocation: str
    workflow_id: str
    attempt: int
    index: int
    size: int
    iteration: int
    deadline: float | None = None
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 128
    log_group_name: str = ""
    log_stream_name: str = ""
    unum: Any = None              # the runtime's InvocationContext (steps API of `@durable` handlers)
    retry_count: int = 0          # the Task's retries so far: a durable function's execution per attempt
    execution_arn: str = ""       # $$.Execution.Id and $$.StateMachine.Id (events:putEvents appends them)
    state_machine_arn: str = ""

    def __getattr__(self, name: str) -> Any:
        # `ctx.step`, `ctx.transact`, `ctx.now`, `ctx.abort`, ... come from the unum context.
        if name.startswith("_") or self.unum is None:
            raise AttributeError(name)
        return getattr(self.unum, name)

    @property
    def aws_request_id(self) -> str:
        return f"{self.invocation}-{self.attempt}"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:local:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        import time
        return 900_000 if self.deadline is None else max(0, int((self.deadline - time.monotonic()) * 1000))


@dataclass(frozen=True)
class _Thread:
    """The running state of one thread of control: raw input of the current state and what travels with it."""

    input: Any
    vars: dict[str, Any]
    stack: list[Any]
    exec: dict[str, Any]
    ev: int | None = None  # events of the execution history so far in this scope (unum_entry/asl/event_ids.py)
    mocks: dict[str, int] | None = None  # mocked invocations so far (a mock test case: unum_entry/asl/mocked.py)

    @classmethod
    def of(cls, t: Mapping[str, Any]) -> _Thread:
        """The thread a transfer `t` carries."""
        ev = t.get("ev")
        return cls(t["input"], dict(t["vars"]), list(t["stack"]), t["exec"], ev if isinstance(ev, int) else None,
                   t.get("mocks"))

    def transfer(self) -> dict[str, Any]:
        out = {MARK: 1, "input": self.input, "vars": self.vars, "stack": self.stack, "exec": self.exec}
        if self.ev is not None:
            out["ev"] = self.ev
        if self.mocks is not None:
            out["mocks"] = self.mocks
        return out

    def advanced(self, events: int | None) -> _Thread:
        """This thread after `events` more history events (None: the count is no longer known)."""
        return replace(self, ev=None if self.ev is None or events is None else self.ev + events)


def invoke_response(payload: Any) -> dict[str, Any]:
    """The `lambda:invoke` integration's result around the function's payload, as Step Functions shows it."""
    return {"ExecutedVersion": "$LATEST", "Payload": payload, "StatusCode": 200,
            "SdkHttpMetadata": {"HttpStatusCode": 200}, "SdkResponseMetadata": {}}


class _TaskError(Exception):
    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause}")
        self.error, self.cause = error, cause


Handler = Callable[[Any, Any], Any]


def run(fragment: Fragment, handler: Handler | None, event: Any, context: Any, services: Services, *,
        note: bool = False) -> dict[str, Any]:
    """Run this function's part of the state machine on `event`; return the decision. `note`
    (the compiled function's handler sets it): add `NOTED` when the Task's attempts left what
    the decision does not show, for the execution history (_Runner._note)."""
    runner = _Runner(fragment, handler, context, services)
    decision = runner.start(event)
    if note and runner.noted is not None:
        decision[NOTED] = runner.noted
    return decision


class _Runner:
    def __init__(self, fragment: Fragment, handler: Handler | None, context: Any, services: Services) -> None:
        self.f = fragment
        self.handler = handler
        self.context = context
        self.services = services
        self.ran_task = False
        self.noted: dict[str, Any] | None = None  # the Task's failed attempts ("x") and raw result ("r")

    # ---- entering ------------------------------------------------------------------------

    def start(self, event: Any) -> dict[str, Any]:
        if isinstance(event, Mapping) and TIMER in event:  # a durable timer fired (unum_entry/asl/timing.py)
            return self._timer(event[TIMER])
        if self.f.join:
            return self._join(event)
        if isinstance(event, Mapping) and "__unum_asl_resume__" in event:  # a task-token callback (unum_entry/asl/callbacks.py)
            return self._resumed(event["__unum_asl_resume__"])
        if isinstance(event, Mapping) and "__next__" in event and "fanout" in event:
            fan = event["fanout"]  # a Parallel branch (the origin's whole decision): this is branch `index`
            level = {"parent": fan["parent"] if self.context.index == 0 else None}
            for key in ("at", "ev0", "strip"):
                if key in fan:
                    level[key] = fan[key]
            th = _Thread(fan["input"], dict(fan["vars"]), [*fan["stack"], level], fan["exec"],
                         fan["ev"] if isinstance(fan.get("ev"), int) else None, fan.get("mocks"))
        elif isinstance(event, Mapping) and event.get(MARK) == 1:
            th = _Thread.of(event)
        else:  # the workflow's own input
            from unum_entry.asl import context_object
            th = _Thread(event, {}, [], context_object.execution(self.f.machine, self.context.workflow_id, event,
                                                                  _iso(self.services.now()), self.f.carry_input),
                         ev=1, mocks={} if self.f.mocking else None)  # ExecutionStarted
        return self._walk(self.f.head, th)

    # ---- walking the states --------------------------------------------------------------

    def _walk(self, name: str, th: _Thread) -> dict[str, Any]:
        for _ in range(MAX_STEPS):
            state = self.f.states[name]
            kind = state["Type"]
            if kind == "Task" and (name != self.f.task or self.ran_task):
                return {"__next__": name, "transfer": th.transfer()}
            run_state = {"Task": self._task, "Pass": self._pass, "Choice": self._choice, "Wait": self._wait,
                         "Succeed": self._succeed, "Fail": self._fail_state,
                         "Parallel": self._fan_out, "Map": self._fan_out}[kind]
            step = run_state(name, state, th)
            if isinstance(step, dict):
                return step
            name, th = step
        return self._fail(th, "States.Runtime", f"more than {MAX_STEPS} state transitions without a Task")

    def _after(self, state: Mapping[str, Any], th: _Thread) -> tuple[str, _Thread] | dict[str, Any]:
        if state.get("End"):
            return self._end(th)
        return state["Next"], th

    def _too_large(self, name: str, value: Any) -> StatesRuntimeError | None:
        """States.DataLimitExceeded when `value` is over the payload quota (unless lifted)."""
        return self._over_limit(name, self._json_size(value))

    def _json_size(self, value: Any) -> int | None:
        """UTF-8 bytes of `value`'s JSON text; None when the quota is lifted (not measured) or it is not JSON."""
        if self.services.data_limit is None:
            return None
        try:
            return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        except (TypeError, ValueError):
            return None  # not JSON: the data flow that follows reports it

    def _over_limit(self, name: str, size: int | None) -> StatesRuntimeError | None:
        limit = self.services.data_limit
        if limit is None or size is None or size <= limit:
            return None
        return StatesRuntimeError(DATA_LIMIT_EXCEEDED, f"The state/task '{name}' returned a result with a size "
                                  "exceeding the maximum number of bytes service limit.")

    def _checked(self, name: str, state: Mapping[str, Any], th: _Thread, *, catch: bool = False):
        """Continue after state `name` (output in `th.input`), failing first when the output is
        over the payload quota (a Task, Parallel or Map can catch it by its name)."""
        exceeded = self._too_large(name, th.input)
        if exceeded is not None:
            if catch:
                return self._catch(name, state, th, exceeded.error, exceeded.cause)
            return self._fail(th, exceeded.error, exceeded.cause)
        return self._after(state, th)

    def _end(self, th: _Thread) -> dict[str, Any]:
        decision = {"__next__": END, "output": th.input}
        if self.f.in_branch:
            decision["stack"] = th.stack
            if th.ev is not None:
                decision["ev"] = th.ev  # the join adds the branch's events (unum_entry/asl/event_ids.py)
        return decision

    def _failed(self, name: str, th: _Thread, exc: StatesRuntimeError) -> dict[str, Any]:
        """State `name` (entered after `th`) failed at run time: the failure, AWS's prefix on its cause."""
        return self._fail(th, exc.error, event_ids.prefixed(name, th.stack, th.ev, exc.error, exc.cause,
                                                             self.f.renamed))

    def _caught(self, name: str, state: Mapping[str, Any], th: _Thread, exc: StatesRuntimeError):
        """A runtime failure of state `name` that its Catch may take (the count of events is lost)."""
        return self._catch(name, state, th, exc.error, event_ids.prefixed(name, th.stack, th.ev, exc.error, exc.cause,
                                                                          self.f.renamed))

    def _fail(self, th: _Thread, error: Any, cause: Any) -> dict[str, Any]:
        decision = {"__next__": FAIL, "error": {"Error": error, "Cause": cause}}
        if self.f.in_branch:
            decision["stack"] = th.stack
        return decision

    def _scope(self, name: str, th: _Thread, *, retry_count: int = 0, item: Any = None,
               variables: Mapping[str, Any] | None = None) -> dataflow.Scope:
        from unum_entry.asl import context_object
        state = self.f.states.get(name, {})
        # A nested child's states are compiled as `Task.State`; they see their own name, as on AWS.
        context = context_object.for_state(th.exec, self.f.machine, event_ids.shown(name, th.stack, self.f.renamed),
                                           state.get("Type"), _iso(self.services.now()), retry_count)
        if item is not None:
            context["Map"] = {"Item": item}
        scope = dataflow.Scope(context=context, variables=th.vars if variables is None else variables,
                               query_language=state.get("QueryLanguage", self.f.query_language))
        if self.services.uuid is not None:
            scope = replace(scope, uuid=self.services.uuid)
        if self.services.random is not None:
            scope = replace(scope, random=self.services.random)
        return scope

    # ---- non-Task states (folded) --------------------------------------------------------

    def _pass(self, name: str, state: Mapping[str, Any], th: _Thread):
        scope = self._scope(name, th)
        try:
            effective = dataflow.state_input(state, th.input, scope)
            result = state["Result"] if "Result" in state else effective
            output, variables = dataflow.state_output(state, th.input, result, scope)
        except StatesRuntimeError as exc:
            return self._failed(name, th, exc)
        return self._checked(name, state, replace(th, input=output, vars={**th.vars, **variables}).advanced(event_ids.STATE))

    def _succeed(self, name: str, state: Mapping[str, Any], th: _Thread):
        scope = self._scope(name, th)
        try:
            effective = dataflow.state_input(state, th.input, scope)
            output, variables = dataflow.state_output(state, th.input, effective, scope)
        except StatesRuntimeError as exc:
            return self._failed(name, th, exc)
        exceeded = self._too_large(name, output)
        if exceeded is not None:
            return self._fail(th, exceeded.error, exceeded.cause)
        return self._end(replace(th, input=output).advanced(event_ids.STATE))

    def _fail_state(self, name: str, state: Mapping[str, Any], th: _Thread):
        scope = self._scope(name, th)
        values = {}
        try:
            for key in ("Error", "Cause"):
                if f"{key}Path" in state:
                    values[key] = dataflow.resolve(state[f"{key}Path"], th.input, scope, field=f"{key}Path")
                elif key in state:
                    values[key] = dataflow.resolve(state[key], th.input, scope, field=key)
        except StatesRuntimeError as exc:
            return self._failed(name, th, exc)
        return self._fail(th, values.get("Error"), values.get("Cause"))

    def _wait(self, name: str, state: Mapping[str, Any], th: _Thread):
        scope = self._scope(name, th)
        try:
            effective = dataflow.state_input(state, th.input, scope)
            delay = self._wait_seconds(state, effective, scope)
            output, variables = dataflow.state_output(state, th.input, effective, scope)
        except StatesRuntimeError as exc:
            return self._failed(name, th, exc)
        th = replace(th, input=output, vars={**th.vars, **variables}).advanced(event_ids.STATE)
        waited = self._delay("wait", name, th, delay)
        return waited if waited is not None else self._checked(name, state, th)

    def _wait_seconds(self, state: Mapping[str, Any], raw: Any, scope: dataflow.Scope) -> float:
        for key in ("Seconds", "SecondsPath", "Timestamp", "TimestampPath"):
            if key not in state:
                continue
            value = dataflow.resolve(state[key], raw, scope, field=key)
            if key.startswith("Seconds"):
                # AWS: the number of seconds must be a non-negative integer (1.5 fails the state).
                integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
                if key == "SecondsPath" and (isinstance(value, bool) or not integral or value < 0):
                    shown = value if isinstance(value, str) else paths.short_json(value)
                    problem = ("references a negative value" if integral and not isinstance(value, bool)
                               else "cannot be parsed as a long value")
                    raise StatesRuntimeError("States.Runtime", f"The SecondsPath parameter {problem}: "
                                             f"{state[key]} == {shown}")  # AWS's wording
                if isinstance(value, bool) or not integral or value < 0:
                    raise StatesRuntimeError("States.Runtime", f"The value {paths.short_json(value)} of the field "
                                             f"'{key}' is not a non-negative integer: a Wait waits whole seconds")
                return float(value)
            moment = _parse_timestamp(value)
            if moment is None:
                raise StatesRuntimeError("States.Runtime", f"Wait {key} must be an ISO-8601 timestamp, found {value!r}")
            return max(0.0, (moment - self.services.now()).total_seconds())
        return 0.0

    def _choice(self, name: str, state: Mapping[str, Any], th: _Thread):
        scope = self._scope(name, th)
        try:
            effective = dataflow.state_input(state, th.input, scope)
            chosen, target = None, state.get("Default")
            for index, rule in enumerate(state.get("Choices", [])):
                if dataflow.evaluate_condition(rule, effective, scope, field=f"Choices[{index}]/Condition"):
                    chosen, target = rule, rule["Next"]
                    break
            if target is None:
                return self._fail(th, "States.NoChoiceMatched", f"no Choice rule of {name!r} matched and it has no Default")
            out_state = dict(state)
            for key in ("Assign", "Output"):
                if chosen is not None and key in chosen:
                    out_state[key] = chosen[key]
            output, variables = dataflow.state_output(out_state, th.input, effective, scope)
        except StatesRuntimeError as exc:
            return self._failed(name, th, exc)
        except ConditionEvaluationError as exc:
            return self._failed(name, th, StatesRuntimeError("States.Runtime", str(exc)))
        exceeded = self._too_large(name, output)
        if exceeded is not None:
            return self._fail(th, exceeded.error, exceeded.cause)
        return target, replace(th, input=output, vars={**th.vars, **variables}).advanced(event_ids.STATE)

    # ---- Task ----------------------------------------------------------------------------

    def _task(self, name: str, state: Mapping[str, Any], th: _Thread, counts: list[int] | None = None):
        from unum_entry.asl import activities, callbacks
        self.ran_task = True
        counts = counts if counts is not None else [0] * len(state.get("Retry", []))
        scope = self._scope(name, th, retry_count=sum(counts))
        token = None
        if callbacks.waits(state) and self.f.mock is not None:  # mocked: a made-up token, as Step Functions Local's
            scope = replace(scope, context={**scope.context, "Task": {"Token": f"mocked-{self.context.invocation}"}})
        elif callbacks.waits(state):  # `.waitForTaskToken`: $$.Task.Token names this invocation
            frames = self._position(th)
            if frames is None:
                return self._fail(th, "States.Runtime", f"the Task {name!r} waits for a task token but its fan-out "
                                  "position is unknown (compile the state machine again)")
            token = callbacks.issue(self.context, frames)
            scope = replace(scope, context={**scope.context, "Task": {"Token": token.text()}})  # AWS: only with a token
            th_after = th.advanced(None)  # a waiting Task's events are not counted (unum_entry/asl/event_ids.py)
        try:
            effective = dataflow.state_input(state, th.input, scope)
            timeout = self._timeout(state, th.input, scope)
            heartbeat = None if token is None else timing.seconds_field(
                state, "HeartbeatSeconds", lambda key: dataflow.resolve(state[key], th.input, scope, field=key))
        except StatesRuntimeError as exc:
            return self._caught(name, state, th, exc)
        invoke_api = state.get("Resource", "").startswith("arn:aws:states:::lambda:invoke")
        event = effective
        if invoke_api:
            event = effective.get("Payload", th.input) if isinstance(effective, Mapping) else th.input
        exceeded = self._too_large(name, effective)
        if exceeded is not None:
            return self._catch(name, state, th, exceeded.error, exceeded.cause)
        while True:
            try:
                if self.f.mock is not None:  # a mock test case: the configured answer instead of the call
                    result = self._mocked(name, th, sum(counts))
                else:
                    result = self._call(event, timeout, retry_count=sum(counts), execution=th.exec)
                break
            except _TaskError as exc:
                self._note("x", [exc.error, exc.cause[:NOTED_CAUSE_CHARS] if isinstance(exc.cause, str) else exc.cause])
                attempts = sum(counts) + 1
                delay = retry_delay(state.get("Retry", []), exc.error, counts, self.services.random or _random)
                if delay is None:
                    return self._catch(name, state, self._invoked(name, th, attempts), exc.error, exc.cause,
                                       done=th.advanced(event_ids.task_events(attempts)).ev)
                waited = self._delay("retry", name, th, delay, counts)
                if waited is not None:
                    return waited
        th = self._invoked(name, th, sum(counts) + 1)
        if token is not None:  # the call is made: this function stops here until the callback resumes it
            decision = callbacks.wait_decision(name, th_after.transfer(), token, timeout, counts,
                                               deadline=getattr(self.context, "deadline", 0))
            if activities.is_activity(state.get("Resource")):  # its worker polls for this input
                decision["wait"][activities.KEY] = activities.describe(state["Resource"], effective)
            timers = timers_of(self.context)
            if timers is not None:  # TimeoutSeconds / HeartbeatSeconds fire when they elapse
                timing.arm_task_timers(timers, decision["wait"], timeout=timeout, heartbeat=heartbeat,
                                       scale=self.services.time_scale)
            return decision
        result = raw = lambda_payload(result)
        size = self._json_size(result)
        exceeded = self._over_limit(name, size)
        if exceeded is not None:
            return self._catch(name, state, th, exceeded.error, exceeded.cause)
        if invoke_api and self.f.mock is None:  # (a mocked Return is Lambda's whole response)
            result = invoke_response(result)
        scope = self._scope(name, th, retry_count=sum(counts))
        try:
            output, variables = dataflow.state_output(state, th.input, result, scope)
        except StatesRuntimeError as exc:
            return self._caught(name, state, th, exc)
        if size is not None and size <= NOTED_RESULT_BYTES and not (output is result and self._hands_on(state)):
            self._note("r", raw)
        done = th.advanced(event_ids.task_events(sum(counts) + 1) + 1)  # + TaskStateExited
        return self._checked(name, state, replace(done, input=output, vars={**th.vars, **variables}), catch=True)

    def _note(self, key: str, value: Any) -> None:
        """Keep what the history cannot read from the decision (builder/serve/history.py replays
        the function's states from its input and these): each failed attempt's `[error, cause]`
        ("x": a fault path), the raw result ("r") when small (its size is measured anyway, for
        the payload quota) and not already the decision's next input. Nothing on the fault-free
        path of a Task whose result is its output."""
        if self.noted is None:
            self.noted = {}
        if key == "x":
            self.noted.setdefault("x", []).append(value)
        else:
            self.noted[key] = value

    def _hands_on(self, state: Mapping[str, Any]) -> bool:
        """The Task's output goes into the decision unchanged: it ends its scope, or a Task or
        Parallel (run elsewhere) follows it."""
        return bool(state.get("End")) or self.f.states.get(state.get("Next", ""), {}).get("Type") in ("Task", "Parallel")

    def _mocked(self, name: str, th: _Thread, retries: int) -> Any:
        """The mocked Task `name`'s answer for this invocation (unum_entry/asl/mocked.py); a Throw
        is the Task's error, as a handler raising it would be."""
        from unum_entry.asl.integrations.resources import TaskFailed
        try:
            return mocked.respond(self.f.mock or {}, name, mocked.invocation(th.mocks, name, retries))
        except TaskFailed as exc:
            raise _TaskError(exc.error, exc.cause) from None

    def _invoked(self, name: str, th: _Thread, attempts: int) -> _Thread:
        """`th` after `attempts` invocations of the mocked Task `name` (unchanged when not mocked)."""
        if self.f.mock is None:
            return th
        return replace(th, mocks=mocked.counted(th.mocks, name, attempts))

    def _resumed(self, resume: Mapping[str, Any]) -> dict[str, Any]:
        """Continue after a `.waitForTaskToken` Task with its callback's output or error."""
        wait, outcome = resume["wait"], resume["outcome"]
        name, t = wait["state"], wait["transfer"]
        th = _Thread.of(t)
        state = self.f.states[name]
        self.ran_task = True
        if "error" in outcome:
            # A failed (or timed-out) callback is the Task's failure: its Retry applies as to any
            # error (the Task runs again with a new token after the back-off), then its Catch.
            counts = list(wait.get("retries") or [0] * len(state.get("Retry", [])))
            delay = None
            if outcome["error"] != "States.Runtime":
                delay = retry_delay(state.get("Retry", []), outcome["error"], counts, self.services.random or _random)
            waited = None if delay is None else self._delay("retry", name, th, delay, counts)
            if waited is not None:
                return waited
            if delay is not None:
                step = self._task(name, state, th, counts)
            else:
                step = self._catch(name, state, th, outcome["error"], outcome["cause"])
        else:
            try:
                output, variables = dataflow.state_output(state, th.input, outcome["output"], self._scope(name, th))
            except StatesRuntimeError as exc:
                step = self._catch(name, state, th, exc.error, exc.cause)
            else:
                step = self._checked(name, state, replace(th, input=output, vars={**th.vars, **variables}), catch=True)
        return step if isinstance(step, dict) else self._walk(*step)

    def _delay(self, purpose: str, name: str, th: _Thread, seconds: float,
               retries: list[int] | None = None) -> dict[str, Any] | None:
        """Wait `seconds` (scaled) before going on from state `name` with `th`: None after
        sleeping here when the wait is short (timing.IN_PROCESS_SECONDS) or there is no runtime
        to arm a timer; else the timer wait decision to commit (unum_entry/asl/timing.py)."""
        scaled = seconds * self.services.time_scale
        timers = timers_of(self.context)
        if timers is None or scaled <= timing.IN_PROCESS_SECONDS:
            self.services.pause(seconds)
            return None
        try:
            return timing.suspend(timers, purpose, name, th.transfer(), scaled, ran_task=self.ran_task,
                                  retries=retries)
        except StatesRuntimeError as exc:
            return self._fail(th, exc.error, exc.cause)

    def _timer(self, timer: Mapping[str, Any]) -> dict[str, Any]:
        """A timer's delivery: continue after the Wait, re-run the Task (or re-fan the Parallel or
        Map) after a Retry back-off, or resume a waiting Task with its callback's or timeout's
        outcome. Raises TimerNotDue (re-armed) when it came early."""
        if timer.get("purpose") == timing.NESTED_TIMEOUT:
            return self._nested_timed_out(timer)
        timers = timers_of(self.context)
        if timers is None:
            raise StatesRuntimeError("States.Runtime", "a timer was delivered to a function running without a runtime")
        fired = timing.fired(timers, timer)
        if fired.resume is not None:
            return self._resumed(fired.resume)
        wait = fired.wait or {}
        name, t = wait["state"], wait["transfer"]
        th = _Thread.of(t)
        state = self.f.states[name]
        self.ran_task = bool(wait.get("ran"))
        if wait["timer"] == "wait":
            step = self._checked(name, state, th)
        elif state["Type"] == "Task":
            step = self._task(name, state, th, list(wait["retries"]))
        else:  # a Parallel or Map retried after its branches failed
            step = self._fan_out(name, state, th, list(wait["retries"]))
        return step if isinstance(step, dict) else self._walk(*step)

    def _position(self, th: _Thread) -> list[list[int]] | None:
        """This invocation's fan-out frames, root first: the `at` of every stack level, then the
        innermost frame from the context; None unless they name exactly this invocation."""
        from unum_entry import naming
        from unum_entry.envelope import Frame

        outer = [level.get("at") if isinstance(level, Mapping) else None for level in th.stack]
        if not all(isinstance(at, list) for at in outer):
            return None
        ctx = self.context
        frames = [*(list(at) for at in outer if isinstance(at, list)), [ctx.index, ctx.size, ctx.iteration]]
        try:
            named = naming.checkpoint_key(ctx.workflow_id, ctx.function_name, [Frame(*f) for f in frames])
        except (TypeError, ValueError):
            return None
        return frames if named == ctx.invocation else None

    def _position_after_hop(self) -> list[int]:
        """The frame the branches of a fan-out from here run under: this invocation's innermost
        frame after its IR's leading `next` (builder/compiler/plan.py: every program starts so)."""
        ctx = self.context
        return [ctx.index, ctx.size, ctx.iteration + 1]

    def _timeout(self, state: Mapping[str, Any], raw: Any, scope: dataflow.Scope) -> float | None:
        return timing.seconds_field(state, "TimeoutSeconds",
                                    lambda key: dataflow.resolve(state[key], raw, scope, field=key))

    def _call(self, event: Any, timeout: float | None, *, retry_count: int = 0,
              execution: Mapping[str, Any] | None = None) -> Any:
        """The user handler, its exceptions as Step Functions errors (Lambda's shape)."""
        import time
        from unum_entry.asl import context_object
        ctx = LambdaContext(function_name=self.f.lambda_name or self.f.function, invocation=self.context.invocation,
                            workflow_id=self.context.workflow_id, attempt=self.context.attempt,
                            index=self.context.index, size=self.context.size, iteration=self.context.iteration,
                            deadline=None if timeout is None else time.monotonic() + timeout * self.services.time_scale,
                            unum=self.context, retry_count=retry_count,
                            execution_arn=str((execution or {}).get("Id", "")),
                            state_machine_arn=context_object.machine(self.f.machine)["Id"])
        handler = self.handler
        if handler is None:  # pragma: no cover - the compiler gives every Task function a handler
            raise _TaskError("States.Runtime", f"function {self.f.function!r} has no handler")
        if timeout is None:
            return _guarded(handler, event, ctx)
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["result"] = _guarded(handler, event, ctx)
            except _TaskError as exc:
                box["error"] = exc

        worker = threading.Thread(target=target, daemon=True, name=f"task-{self.f.function}")
        worker.start()
        worker.join(timeout * self.services.time_scale)
        if worker.is_alive():  # a thread cannot be killed: it is abandoned, its result ignored
            raise _TaskError("States.Timeout", f"Task timed out after {timeout:g} seconds")
        if "error" in box:
            raise box["error"]
        return box["result"]

    def _catch(self, name: str, state: Mapping[str, Any], th: _Thread, error: str, cause: str, *,
               done: int | None = None):
        """Catch the error of state `name` (entered after `th`); `done`: the events of the scope when
        the state failed, if known (a TaskStateExited follows a caught failure)."""
        for catcher in state.get("Catch", []):
            if matches(catcher.get("ErrorEquals", ()), error):
                scope = self._scope(name, th)
                try:
                    output, variables = dataflow.error_output(catcher, th.input, {"Error": error, "Cause": cause}, scope)
                except StatesRuntimeError as exc:
                    return self._failed(name, th, exc)
                after = replace(th, ev=None if done is None else done + 1)
                return catcher["Next"], replace(after, input=output, vars={**th.vars, **variables})
        return self._fail(th, error, cause)

    # ---- Parallel and Map: fan out, join -------------------------------------------------

    def _fan_out(self, name: str, state: Mapping[str, Any], th: _Thread, retries: list[int] | None = None):
        scope = self._scope(name, th)
        retries = retries if retries is not None else [0] * len(state.get("Retry", []))
        parent = {"raw": th.input, "vars": th.vars, "exec": th.exec, "retries": retries,
                  **({} if th.mocks is None else {"mocks": th.mocks})}
        # History events (unum_entry/asl/event_ids.py): the join adds the branches' counts to the
        # parent's; a branch knows its absolute ids only when nothing runs beside it.
        before = event_ids.entered(th.stack, th.ev)
        started = None if before is None else before + 1  # the id of <Type>StateStarted
        if th.ev is not None:
            parent["ev"] = th.ev
        try:
            at = {"at": self._position_after_hop()} if self.f.positions else {}
            if state["Type"] == "Parallel":
                effective = dataflow.state_input(state, th.input, scope)
                if NESTED in state:  # a nested state machine: one branch, the child's own execution
                    from unum_entry.asl import nested
                    child_input, child = nested.start(state[NESTED], effective, self.context.invocation, name,
                                                      self.services.now())
                    timed = self._nested_timeout(name, state, th, scope)
                    return {"__next__": name, "fanout": {"input": child_input, "vars": {}, "stack": th.stack,
                                                         "exec": child, "parent": {**parent, "child": child, **timed},
                                                         **at, "ev": 1, "ev0": 0, "strip": len(name) + 1}}
                counted: dict[str, Any] = {} if th.ev is None else {"ev": 0}
                if started is not None and state.get("__branches__") == 1:  # (builder/compiler: _strip)
                    counted["ev0"] = started
                if th.mocks is not None:
                    counted["mocks"] = th.mocks
                return {"__next__": name, "fanout": {"input": effective, "vars": th.vars, "stack": th.stack,
                                                     "exec": th.exec, "parent": parent, **at, **counted}}
            inputs = self._map_inputs(name, state, th, scope)
            limit = self._max_concurrency(state, th.input, scope)
        except StatesRuntimeError as exc:
            return self._caught(name, state, th, exc)
        if not inputs:  # nothing to fan out: the Map completes here with []
            return self._complete(name, state, th, [], ev=None if th.ev is None else th.ev + event_ids.join_events("Map", []))
        alone = started is not None and (len(inputs) == 1 or limit == 1) and not _distributed(state)
        items = [{MARK: 1, "input": value, "vars": th.vars, "exec": th.exec,
                  **({} if th.ev is None else {"ev": 1}),  # MapIterationStarted
                  **({} if th.mocks is None else {"mocks": mocked.iteration(th.mocks, i, len(inputs))}),
                  "stack": [*th.stack, {"parent": parent if i == 0 else None, **at,
                                        **({"ev0": started} if alone and i == 0 else {})}]}
                 for i, value in enumerate(inputs)]
        # The IR's map runs the iterations in `max_concurrency` lanes (0: all at once).
        return {"__next__": name, "items": items, "max_concurrency": limit}

    def _nested_timeout(self, name: str, state: Mapping[str, Any], th: _Thread, scope: dataflow.Scope) -> dict[str, Any]:
        """A `.sync` Task's TimeoutSeconds(Path): arm its timer, delivered to the Task's join when
        it elapses (unum_entry/asl/timing.py: nested_due); `{"timeout", "timeout_at"}` for the
        fan-out's parent, or {} without a timeout (or a runtime to arm it: unit runs)."""
        marker = state[NESTED]
        timeout = self._timeout(marker, th.input, scope)  # the Task's TimeoutSeconds(Path) (compiler)
        # HeartbeatSeconds(Path): nothing can send a .sync Task a heartbeat, so it is a second,
        # earlier timeout failing with States.HeartbeatTimeout (docs/step-functions.md)
        heartbeat = timing.seconds_field(marker, "HeartbeatSeconds",
                                         lambda key: dataflow.resolve(marker[key], th.input, scope, field=key))
        beats = heartbeat is not None and (timeout is None or heartbeat < timeout)
        timeout = heartbeat if beats else timeout
        timers = timers_of(self.context)
        join = marker.get("join")
        if timeout is None or timers is None or not isinstance(join, str):
            return {}
        scaled = timeout * self.services.time_scale
        if timers.now() + scaled > timers.latest:
            raise StatesRuntimeError("Unum.RetentionExpired", f"the {'Heartbeat' if beats else 'Timeout'}Seconds of "
                                     f"state {name!r} ends {scaled:.0f} s from now, after the workflow's retention ends")
        return {"timeout": timeout, "timeout_at": timing.arm_nested_timeout(timers, join, scaled),
                **({"heartbeat": True} if beats else {})}

    def _max_concurrency(self, state: Mapping[str, Any], raw: Any, scope: dataflow.Scope) -> int:
        """MaxConcurrency(Path), checked with AWS's causes (and the tolerated-failure limits, which
        AWS checks when the Map starts, before any iteration runs)."""
        from unum_entry.asl import map_limits

        def resolve(key: str) -> Any:
            return dataflow.resolve(state[key], raw, scope, field=key)
        if state["Type"] == "Map":
            map_limits.tolerated(state, resolve)
        return map_limits.max_concurrency(state, resolve)

    def _map_inputs(self, name: str, state: Mapping[str, Any], th: _Thread, scope: dataflow.Scope) -> list[Any]:
        """The input of each Map iteration: InputPath, ItemsPath/Items, ItemSelector (per item,
        with `$$.Map.Item`), then ItemBatcher."""
        base = {k: v for k, v in state.items() if k in ("InputPath", "QueryLanguage")}
        effective = dataflow.state_input(base, th.input, scope)
        if "ItemReader" in state:  # Distributed Map: the items come from S3 (unum_entry/asl/item_io.py)
            from unum_entry.asl import item_io
            items = item_io.read_items(state["ItemReader"], lambda v, f: dataflow.resolve(v, effective, scope, field=f))
        elif "Items" in state:
            items = dataflow.resolve(state["Items"], effective, scope, field="Items")
        elif "ItemsPath" in state:
            items = dataflow.resolve(state["ItemsPath"], effective, scope, field="ItemsPath")
        else:
            items = effective
        if not isinstance(items, list):
            raise _not_an_array(state, items, scope.jsonata)
        selector_key = "ItemSelector" if "ItemSelector" in state else "Parameters" if "Parameters" in state else None
        if selector_key is not None:
            items = [dataflow.resolve(state[selector_key], effective,
                                      self._scope(name, th, item={"Index": i, "Value": v}), field=selector_key)
                     for i, v in enumerate(items)]
        batcher = state.get("ItemBatcher")
        if batcher is None:
            return items
        return _batches(batcher, items, lambda key: dataflow.resolve(batcher[key], effective, scope, field=key))

    def _join(self, event: Any) -> dict[str, Any]:
        """Complete the Parallel/Map `head` from its branches' end decisions (branch order)."""
        name = self.f.head
        state = self.f.states[name]
        ends = list(event)
        parent = ends[0]["stack"][-1]["parent"]
        th = _Thread(parent["raw"], dict(parent["vars"]), list(ends[0]["stack"][:-1]), parent["exec"],
                     parent["ev"] if isinstance(parent.get("ev"), int) else None, parent.get("mocks"))
        failed = [(i, e["error"]) for i, e in enumerate(ends) if e["__next__"] == FAIL]
        nested_marker = state.get(NESTED) if state["Type"] == "Parallel" else None
        if nested_marker is not None and failed:  # the child failed: the Task fails with States.TaskFailed
            from unum_entry.asl import nested
            failed = [(0, nested.failure(nested_marker, parent.get("child", {}), failed[0][1], self.services.now()))]
        if failed and not self._tolerated(state, th, len(failed), len(ends)):
            step = self._fan_failed(name, state, th, parent, failed[0][1])
        else:
            results: Any = [e["output"] if e["__next__"] == END else e["error"] for e in ends]
            if nested_marker is not None:  # AWS's DescribeExecution shape of the child's end
                from unum_entry.asl import nested
                results = nested.result(nested_marker, parent.get("child", {}), results[0], self.services.now())
            counts = [e["ev"] for e in ends if isinstance(e.get("ev"), int)]
            exact = (not failed and nested_marker is None and not _distributed(state) and len(counts) == len(ends))
            after = th.advanced(event_ids.join_events(state["Type"], counts) if exact else None).ev
            step = self._complete(name, state, th, results, failed=[i for i, _ in failed], ev=after)
        if isinstance(step, dict):
            return step
        return self._walk(*step)

    def _fan_failed(self, name: str, state: Mapping[str, Any], th: _Thread, parent: Mapping[str, Any],
                    error: Mapping[str, Any]):
        """The Parallel/Map `name` failed with `error` (a branch's, or a nested Task's timeout): its
        Retry re-issues the fan-out, else its Catch (States.Runtime is neither retried nor caught)."""
        if error["Error"] == "States.Runtime" or not isinstance(error["Error"], str):
            return self._fail(th, error["Error"], error["Cause"])
        retries = list(parent.get("retries", []))
        delay = retry_delay(state.get("Retry", []), error["Error"], retries, self.services.random or _random)
        if delay is not None:  # a retried fan-out's events are not counted (aborted siblings vary)
            uncounted = th.advanced(None)
            return (self._delay("retry", name, uncounted, delay, retries)
                    or self._fan_out(name, state, uncounted, retries))
        return self._catch(name, state, th, error["Error"], error["Cause"])

    def _nested_timed_out(self, timer: Mapping[str, Any]) -> dict[str, Any]:
        """A nested `.sync` Task's TimeoutSeconds timer at its join: the Task fails with
        States.Timeout (then its Retry / Catch) unless the child's end committed this join first."""
        timers = timers_of(self.context)
        if timers is None:
            raise StatesRuntimeError("States.Runtime", "a timer was delivered to a function running without a runtime")
        fan = timing.nested_due(timers, timer)["fanout"]
        name = self.f.head
        state = self.f.states[name]
        parent = fan["parent"]
        th = _Thread(parent["raw"], dict(parent["vars"]), list(fan["stack"]), parent["exec"])
        error = ({"Error": "States.HeartbeatTimeout", "Cause": f"the nested state machine sent no heartbeat "
                  f"within HeartbeatSeconds ({parent['timeout']:g} s)"} if parent.get("heartbeat") else
                 {"Error": "States.Timeout",
                  "Cause": f"the nested state machine did not end within TimeoutSeconds ({parent['timeout']:g} s)"})
        step = self._fan_failed(name, state, th, parent, error)
        return step if isinstance(step, dict) else self._walk(*step)

    def _tolerated(self, state: Mapping[str, Any], th: _Thread, failures: int, total: int) -> bool:
        if state["Type"] != "Map":
            return False
        from unum_entry.asl import map_limits
        scope = self._scope(self.f.head, th)
        limits = map_limits.tolerated(state, lambda key: dataflow.resolve(state[key], th.input, scope, field=key))
        if not limits:
            return False
        count_ok = failures <= limits.get("ToleratedFailureCount", 0) if "ToleratedFailureCount" in limits else False
        pct_ok = (100.0 * failures / total) <= limits["ToleratedFailurePercentage"] if "ToleratedFailurePercentage" in limits else False
        return count_ok or pct_ok

    def _complete(self, name: str, state: Mapping[str, Any], th: _Thread, results: list[Any], failed: Sequence[int] = (),
                  *, ev: int | None = None):
        """The Parallel/Map `name` (entered after `th`) ends with `results`; `ev`: the scope's events
        after its Exited event, if known."""
        scope = self._scope(name, th)
        try:
            if state["Type"] == "Map" and "ResultWriter" in state:  # export to S3 (unum_entry/asl/item_io.py)
                from unum_entry.asl import item_io
                from unum_entry.asl import context_object
                run_id = item_io.MapRun(context_object.machine(self.f.machine)["Id"], name, self.context.invocation,
                                        state.get("Label"))
                results = item_io.write_results(state["ResultWriter"], results, failed, run_id,
                                                lambda v, f: dataflow.resolve(v, th.input, scope, field=f))
            output, variables = dataflow.state_output(state, th.input, results, scope)
        except StatesRuntimeError as exc:
            return self._caught(name, state, th, exc)
        return self._checked(name, state, replace(th, input=output, vars={**th.vars, **variables}, ev=ev), catch=True)


def _guarded(handler: Handler, event: Any, ctx: LambdaContext) -> Any:
    """Call user code; any exception becomes a Task error named by its class, with Lambda's
    error payload (errorMessage, errorType, stackTrace) as the Cause."""
    from unum_entry.asl.integrations.resources import TaskFailed
    from unum_entry.steps import Aborted
    from unum_entry.errors import StaleInvocation
    try:
        return handler(event, ctx)
    except Aborted:
        raise  # ctx.abort: the workflow fails and compensates; no Retry or Catch applies
    except StaleInvocation:
        raise  # a durable function's handler waits (unum_entry.durable_functions): the delivery is dropped, not failed
    except TaskFailed as exc:  # an integration's error, named as Step Functions names it
        raise _TaskError(exc.error, exc.cause) from exc
    except Exception as exc:  # user code: anything can come out
        name = type(exc).__name__
        trace = traceback.format_tb(exc.__traceback__)[1:]
        cause = json.dumps({"errorMessage": str(exc), "errorType": name, "requestId": ctx.aws_request_id,
                            "stackTrace": [line.strip() for line in trace]})
        raise _TaskError(name, cause) from exc


def _batches(batcher: Mapping[str, Any], items: list[Any], resolve: Callable[[str], Any]) -> list[Any]:
    """Group Map items as ItemBatcher says: `{"Items": [...], "BatchInput": ...}` per batch."""
    from unum_entry.asl import map_limits
    max_items, max_bytes = map_limits.batch_limits(batcher, resolve)
    batch_input = resolve("BatchInput") if "BatchInput" in batcher else None
    batches: list[list[Any]] = []
    size = 0
    for item in items:
        item_size = len(json.dumps(item))
        if not batches or (max_items and len(batches[-1]) >= max_items) or (max_bytes and size + item_size > max_bytes):
            batches.append([])
            size = 0
        batches[-1].append(item)
        size += item_size
    return [{"Items": b, **({"BatchInput": batch_input} if batch_input is not None else {})} for b in batches]


def lambda_payload(result: Any) -> Any:
    """What Step Functions sees of a handler's return value: bytes (or a bytearray) are the
    JSON payload itself, as Lambda sends them unencoded; bytes that are not JSON are the text."""
    if not isinstance(result, (bytes, bytearray)):
        return result
    text = bytes(result).decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def _not_an_array(state: Mapping[str, Any], items: Any, jsonata: bool) -> StatesRuntimeError:
    """The error of a Map whose items are not an array: States.QueryEvaluationError in JSONata
    mode (as AWS), States.Runtime in JSONPath mode."""
    from unum_entry.asl import jsonata_mode

    if jsonata:
        text = state["Items"] if jsonata_mode.is_expression(state.get("Items")) else "{% $states.input %}"
        return StatesRuntimeError(jsonata_mode.QUERY_EVALUATION_ERROR,
                                  jsonata_mode.unexpected_type_cause(text, "Items", "array", items))
    path = state.get("ItemsPath", "$")
    return StatesRuntimeError("States.Runtime", f"Invalid path '{path}' : the value {paths.short_json(items)} "
                              f"is not an array: a Map state iterates over an array")


def _distributed(state: Mapping[str, Any]) -> bool:
    """A Distributed Map: its iterations are child executions with histories of their own."""
    return state.get("__mode__") == "DISTRIBUTED" or "ItemReader" in state or "ResultWriter" in state


def _random() -> float:
    import random
    return random.random()


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
