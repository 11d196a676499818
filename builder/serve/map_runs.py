"""Map Runs: DescribeMapRun, ListMapRuns, UpdateMapRun and ListExecutions(mapRunArn).

A Distributed Map (ItemProcessor ProcessorConfig Mode DISTRIBUTED, or an ItemReader / ResultWriter)
runs its items as unum map branches, one branch per item (per batch with an ItemBatcher: its
items are counted from the batches the fan-out committed). Each
time such a Map fans out is one Map Run; each branch is one child execution. Nothing is recorded
for them apart from the branches' own checkpoints: the runs are read back from the execution's
history as builder.serve.history replays it from the store (`MapRunStarted` names the run, the
`MapIterationStarted` / `MapIterationSucceeded` / `MapIterationFailed` events that follow the
run's `MapStateStarted` are its child executions, `MapRunSucceeded` / `MapRunFailed` its end), so
the counts cannot drift from what ran.

- a branch with no event yet is pending; started and not ended, running (aborted when the
  execution ended without the run: stopped or timed out, the run and its unfinished branches
  then stopping when the execution did); pending items of such a run are aborted too.
  `timedOut` is always 0 (a branch has no timeout of its own).
- `resultsWritten` counts the ended items once the run ended (their results are the Map's output).
- `maxConcurrency` is the one the fan-out resolved and committed; `toleratedFailurePercentage` /
  `toleratedFailureCount` the state's fields (a JSONPath `…Path` selected from the Map's
  committed input; 0 when absent or JSONata).
- UpdateMapRun cannot change a running Map: its lanes and its failure tolerance are fixed in the
  decision that fanned it out. A request naming the values the run already has succeeds; any
  other value is `ValidationException` saying so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote

from builder.serve.arns import MapRunRef
from builder.serve.wire import ApiError, validation_error

if TYPE_CHECKING:
    from builder.serve.arns import Arns
    from builder.serve.registry import Execution, Registry
    from unum_entry.stores.base import Store


class ExecutionsApi(Protocol):
    """What the Map Run operations read of the Step Functions API they serve
    (builder.serve.states_api.StatesApi is one): its store, registry and ARNs, an execution's
    status, definition and ARN. A protocol, so this module does not import the API that
    registers it."""

    store: Store
    registry: Registry
    arns: Arns

    def status(self, execution: Execution) -> tuple[str, float | None, str | None, str | None, str | None]: ...

    def _definition_of(self, execution: Execution) -> str: ...

    def _execution_arn(self, execution: Execution) -> str: ...

    def _execution(self, arn: str) -> Execution: ...



class Status(str, Enum):
    """A Map Run's or a child execution's status, as AWS spells it."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    ABORTED = "ABORTED"


_ENDS = {"MapIterationSucceeded": Status.SUCCEEDED, "MapIterationFailed": Status.FAILED}
_RUN_ENDS = {"MapRunSucceeded": Status.SUCCEEDED, "MapRunFailed": Status.FAILED}


@dataclass(frozen=True)
class Child:
    """One branch of a run: its index, start, end (epoch seconds) and status."""

    index: int
    started: float
    stopped: float | None
    status: Status


@dataclass(frozen=True)
class Run:
    """One Map Run as the history shows it."""

    arn: str
    state: str
    started: float
    stopped: float | None
    status: Status
    length: int
    children: tuple[Child, ...]


def runs_of(events: list[dict[str, Any]], execution_status: str, execution_stopped: float | None) -> list[Run]:
    """The Map Runs of one execution's history `events` (AWS's HistoryEvent dicts, oldest first);
    a run the execution's end cut short is ABORTED when the execution stopped (`execution_stopped`)."""
    by_id = {e["id"]: e for e in events}
    fanned = {e["previousEventId"]: e for e in events if e["type"] == "MapRunStarted"}  # MapStateStarted id -> run

    def owner(event: dict[str, Any], name: str | None) -> tuple[int, int] | None:
        """(the run's MapStateStarted id, iteration index) an event belongs to: the first
        MapIterationStarted back along previousEventId whose previous event is a run's fan-out."""
        seen = 0
        while event is not None and seen <= len(events):
            if event["type"] == "MapIterationStarted" and event["previousEventId"] in fanned:
                details = event["mapIterationStartedEventDetails"]
                if name is None or details.get("name") == name:
                    return event["previousEventId"], int(details["index"])
            event = by_id.get(event["previousEventId"])  # type: ignore[assignment]
            seen += 1
        return None

    starts: dict[int, dict[int, float]] = {k: {} for k in fanned}
    ends: dict[int, dict[int, tuple[float, Status]]] = {k: {} for k in fanned}
    run_end: dict[int, tuple[float, Status]] = {}
    for event in events:
        kind = event["type"]
        if kind == "MapIterationStarted" and event["previousEventId"] in fanned:
            index = int(event["mapIterationStartedEventDetails"]["index"])
            starts[event["previousEventId"]][index] = event["timestamp"]
        elif kind in _ENDS:
            found = owner(event, event[kind[0].lower() + kind[1:] + "EventDetails"].get("name"))
            if found is not None:
                ends[found[0]][found[1]] = (event["timestamp"], _ENDS[kind])
        elif kind in _RUN_ENDS:
            found = owner(event, None)
            if found is not None:
                run_end[found[0]] = (event["timestamp"], _RUN_ENDS[kind])
    runs = []
    for fan_id, started in fanned.items():
        end = run_end.get(fan_id)
        status = end[1] if end else Status.RUNNING if execution_status == "RUNNING" else Status.ABORTED
        cut = execution_stopped if status is Status.ABORTED else None
        unended = Status.RUNNING if status is Status.RUNNING else Status.ABORTED
        children = tuple(Child(i, at, *(ends[fan_id].get(i) or (cut, unended)))
                         for i, at in sorted(starts[fan_id].items()))
        length = int(by_id[fan_id].get("mapStateStartedEventDetails", {}).get("length", len(children)))
        arn = started["mapRunStartedEventDetails"]["mapRunArn"]
        state = unquote(arn.split(":")[6].split("/", 1)[1])  # arns.map_run_arn: ...:mapRun:MACHINE/STATE:...
        runs.append(Run(arn, state, started["timestamp"], end[0] if end else cut, status, length, children))
    return runs


def _map_state(definition: Any, name: str) -> Mapping[str, Any]:
    """The Map state `name` anywhere in a definition (inside Map and Parallel states too)."""
    def walk(states: Any) -> Iterator[Mapping[str, Any]]:
        if not isinstance(states, Mapping):
            return
        for state_name, state in states.items():
            if not isinstance(state, Mapping):
                continue
            if state_name == name and state.get("Type") == "Map":
                yield state
            for inner in (state.get("ItemProcessor"), state.get("Iterator"), *state.get("Branches", [])):
                if isinstance(inner, Mapping):
                    yield from walk(inner.get("States"))
    doc = definition if isinstance(definition, Mapping) else {}
    return next(walk(doc.get("States")), {})


def _number(value: Any) -> float:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


Pager = Callable[[list[Any], dict[str, Any]], tuple[list[Any], "str | None"]]


class MapRuns:
    """The Map Run operations over one API's registry and store (module docstring); `page`
    is the API's pager (maxResults / nextToken), so both page alike."""

    def __init__(self, api: ExecutionsApi, page: Pager) -> None:
        self.api = api
        self.page = page

    def _runs(self, execution: Execution) -> list[Run]:
        from builder.serve.history import aws_events

        status, stopped, *_ = self.api.status(execution)
        events = aws_events(self.api.store, execution, status, include_data=False, registry=self.api.registry)
        return runs_of(events, status, stopped)

    def _find(self, arn: str) -> tuple[Execution, MapRunRef, Run]:
        ref = self.api.arns.parse_map_run(arn)
        execution = self.api.registry.execution(f"{ref.machine}:{ref.execution}") if ref.execution else None
        run = next((r for r in self._runs(execution) if r.arn == arn), None) if execution is not None else None
        if execution is None or run is None:
            raise ApiError("ResourceNotFound", f"Resource not found: '{arn}'")
        return execution, ref, run

    def _state(self, execution: Execution, state: str) -> Mapping[str, Any]:
        """The Map state `state` of the definition the execution runs ({} if not found)."""
        try:
            definition = json.loads(self.api._definition_of(execution))
        except ValueError:
            definition = {}
        return _map_state(definition, state)

    def _fanned(self, execution: Execution, run: Run) -> Mapping[str, Any]:
        """The decision that fanned `run` out, as committed: `{"__next__", "items", "max_concurrency"}`
        ({} if it is not found)."""
        from unum_entry.history import read_history

        from builder.serve.arns import map_run_arn
        from builder.serve.history import ALL_INLINE

        for step in read_history(self.api.store, execution.workflow, inline_bytes=ALL_INLINE).steps:
            decision = step.output if isinstance(step.output, Mapping) else {}
            if isinstance(decision.get("items"), list) and map_run_arn(
                    execution.machine_arn, execution.machine, execution.name, run.state, step.key) == run.arn:
                return decision
        return {}

    def _limits(self, state: Mapping[str, Any], fanned: Mapping[str, Any]) -> dict[str, float]:
        """maxConcurrency as the fan-out resolved it; the tolerated failures as the state gives them
        (a JSONPath `…Path` selected from the Map's input, as the join selects it; JSONata: 0)."""
        from unum_entry.asl import map_limits, paths
        from unum_entry.errors import StatesRuntimeError

        items = fanned.get("items") or [{}]
        stack = items[0].get("stack") if isinstance(items[0], Mapping) else None
        parent = stack[-1].get("parent") if isinstance(stack, list) and stack and isinstance(stack[-1], Mapping) \
            else None
        raw, variables = (parent.get("raw"), parent.get("vars")) if isinstance(parent, Mapping) else (None, None)

        def resolve(key: str) -> Any:
            value = state[key]
            if not key.endswith("Path"):
                return value
            return paths.select(value, raw, variables=variables if isinstance(variables, Mapping) else {}, field=key)
        try:
            tolerated = map_limits.tolerated(state, resolve) if parent is not None else {}
        except StatesRuntimeError:
            tolerated = {}
        concurrency = fanned.get("max_concurrency", state.get("MaxConcurrency"))
        return {"maxConcurrency": int(_number(concurrency)),
                "toleratedFailurePercentage": float(tolerated.get("ToleratedFailurePercentage", 0)),
                "toleratedFailureCount": int(tolerated.get("ToleratedFailureCount", 0))}

    @staticmethod
    def _sizes(state: Mapping[str, Any], fanned: Mapping[str, Any], run: Run) -> list[int]:
        """How many items each branch carries: 1, or with an ItemBatcher its batch's `Items`, from
        the decision that fanned the run out."""
        sizes = [1] * run.length
        if "ItemBatcher" not in state:
            return sizes
        for i, item in enumerate(fanned.get("items", [])[:run.length]):
            batch = item.get("input") if isinstance(item, Mapping) else None
            if isinstance(batch, Mapping) and isinstance(batch.get("Items"), list):
                sizes[i] = len(batch["Items"])
        return sizes

    @staticmethod
    def _counts(run: Run, sizes: list[int]) -> dict[str, int]:
        """Counts of `run`'s branches, each weighing `sizes[index]` (all 1: executionCounts)."""
        def weight(index: int) -> int:
            return sizes[index] if index < len(sizes) else 1
        by = {s.value: sum(weight(c.index) for c in run.children if c.status is s) for s in Status}
        started = {c.index for c in run.children}
        unstarted = sum(weight(i) for i in range(run.length) if i not in started)
        pending = unstarted if run.status is Status.RUNNING else 0
        aborted = by["ABORTED"] + (unstarted if run.status is not Status.RUNNING else 0)
        ended = by["SUCCEEDED"] + by["FAILED"]
        return {"pending": pending, "running": by["RUNNING"], "succeeded": by["SUCCEEDED"], "failed": by["FAILED"],
                "timedOut": 0, "aborted": aborted, "total": sum(by.values()) + unstarted,
                "resultsWritten": ended if run.status in (Status.SUCCEEDED, Status.FAILED) else 0}

    def describe(self, p: dict[str, Any]) -> dict[str, Any]:
        """DescribeMapRun."""
        execution, _, run = self._find(p["mapRunArn"])
        state, fanned = self._state(execution, run.state), self._fanned(execution, run)
        return {"mapRunArn": run.arn, "executionArn": self.api._execution_arn(execution), "status": run.status.value,
                "startDate": run.started, "stopDate": run.stopped, **self._limits(state, fanned),
                "itemCounts": self._counts(run, self._sizes(state, fanned, run)),
                "executionCounts": self._counts(run, [1] * run.length), "redriveCount": 0}

    def list(self, p: dict[str, Any]) -> dict[str, Any]:
        """ListMapRuns: the execution's runs, oldest first."""
        execution = self.api._execution(p["executionArn"])
        page, token = self.page(self._runs(execution), p)
        return {"mapRuns": [{"executionArn": self.api._execution_arn(execution), "mapRunArn": r.arn,
                             "stateMachineArn": self._child_machine(execution, r), "startDate": r.started,
                             "stopDate": r.stopped} for r in page], "nextToken": token}

    def _child_machine(self, execution: Execution, run: Run) -> str:
        return f"{self.api.arns.machine(execution.machine)}/{run.arn.split(':')[6].split('/', 1)[1]}"

    def list_executions(self, p: dict[str, Any]) -> dict[str, Any]:
        """ListExecutions(mapRunArn): the run's child executions, one per branch, by index."""
        if p.get("stateMachineArn"):
            raise validation_error("ListExecutions takes a stateMachineArn or a mapRunArn, not both")
        execution, ref, run = self._find(p["mapRunArn"])
        machine = self._child_machine(execution, run)
        sizes = self._sizes(self._state(execution, run.state), self._fanned(execution, run), run)
        base = self.api.arns.execution(f"{ref.machine}/{run.arn.split(':')[6].split('/', 1)[1]}", ref.execution)
        rows = [{"executionArn": f"{base}:{ref.run}-{c.index}", "stateMachineArn": machine,
                 "name": f"{ref.run}-{c.index}", "status": c.status.value, "startDate": c.started,
                 "stopDate": c.stopped, "mapRunArn": run.arn, "itemCount": sizes[c.index] if c.index < len(sizes) else 1}
                for c in run.children if p.get("statusFilter") in (None, c.status.value)]
        page, token = self.page(rows, p)
        return {"executions": page, "nextToken": token}

    def update(self, p: dict[str, Any]) -> dict[str, Any]:
        """UpdateMapRun: the values the run has are accepted, a change is refused (module docstring)."""
        execution, _, run = self._find(p["mapRunArn"])
        limits = self._limits(self._state(execution, run.state), self._fanned(execution, run))
        changed = [f"{k} {p[k]!r} (the run has {limits[k]!r})" for k in limits
                   if p.get(k) is not None and p[k] != limits[k]]
        if changed:
            raise validation_error("UpdateMapRun cannot change a running Map Run in unum: its concurrency and "
                                   f"failure tolerance are fixed when the Map fans out; asked for {', '.join(changed)} "
                                   "(docs/api.md)")
        return {}
