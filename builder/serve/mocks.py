"""Step Functions Local's mocked service integrations: the mock configuration file
(`serve --mock-config FILE`, else `$SFN_MOCK_CONFIG`, as Step Functions Local reads it) and the
test case a `...:stateMachine:NAME#TestCase` ARN selects.

The file, as AWS documents it ("Configuration file for mocked service integrations"):

    {"StateMachines": {"<machine>": {"TestCases": {"<TestCase>": {"<state>": "<MockedResponse>"}}}},
     "MockedResponses": {"<MockedResponse>": {"0": {"Return": ...}, "1-2": {"Throw": {"Error", "Cause"}}}}}

`load` checks all of it when `serve` starts: a bad file is one `MockConfigError` naming the file
and the JSON path of the problem (`serve` exits 2 before it listens). The keys of a mocked response
are invocation numbers (`"3"`) or inclusive ranges (`"0-2"`); ranges may leave gaps (an invocation
without a response fails the execution with `States.Runtime` when it happens, as in Step
Functions Local) but must not overlap. `Return` is any JSON value, the Task's result as the
service would give it (for `lambda:invoke`, Lambda's whole response); `Throw` is
`{"Error": str, "Cause": str}` (Cause may be left out), the Task's error for Retry and Catch.

`MockConfig.test_case(machine, test_case)` is what one execution runs with: for every state the
test case names, `{"response", "test_case", "answers": [{"from", "to", "Return" | "Throw"}]}`
(JSON, carried into the compiled function of that Task: unum_entry/asl/mocked.py answers from it,
and defines the invocation number). Where this differs from Step Functions Local:
- Map iterations: Step Functions Local counts one state's invocations across the execution in
  the order they happen (unpredictable unless MaxConcurrency is 1); here iteration i starts at
  number i whatever the concurrency: the same as Step Functions Local with MaxConcurrency 1 when
  each earlier iteration invoked the state once (not when one retried or looped);
- after a Parallel/Map (and when one is retried) the counts are those it was reached with;
- the whole file is checked when `serve` starts (Step Functions Local reads a test case when an
  execution uses it), and overlapping ranges are refused;
- a `#TestCase` naming no machine or test case of the file (or without a file) is a
  ValidationException of StartExecution;
- only Task states compiled as Tasks are mocked: a nested `startExecution.sync` machine runs;
- the file is read once; an execution keeps the mocks it started with, across restarts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unum_entry.errors import UnumError

MOCK_CONFIG_ENV = "SFN_MOCK_CONFIG"
_NUMBER = re.compile(r"(0|[1-9][0-9]*)")
_SIMPLE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Selection = dict[str, dict[str, Any]]  # state -> {"response", "test_case", "answers"}


class MockConfigError(UnumError):
    """A mock configuration file that cannot be used: `FILE: $.json.path: problem`."""


class UnknownTestCase(UnumError):
    """A `#TestCase` ARN naming a machine or test case the mock configuration does not define."""


def _path(parts: tuple[str, ...]) -> str:
    out = "$"
    for part in parts:
        out += f".{part}" if _SIMPLE_KEY.fullmatch(part) else f"[{json.dumps(part)}]"
    return out


@dataclass(frozen=True, slots=True)
class MockConfig:
    """A checked mock configuration: machine -> test case -> state -> mocked response name, and
    each mocked response's answers ordered by invocation number."""

    source: str
    machines: Mapping[str, Mapping[str, Mapping[str, str]]]
    responses: Mapping[str, tuple[Mapping[str, Any], ...]]

    def test_case(self, machine: str, test_case: str) -> Selection:
        """The mocked states of `machine`'s `test_case` (module docstring); raises UnknownTestCase."""
        cases = self.machines.get(machine)
        if cases is None:
            raise UnknownTestCase(f"the mock configuration {self.source} has no state machine {machine!r} "
                                  f"(it has: {', '.join(sorted(self.machines)) or 'none'})")
        states = cases.get(test_case)
        if states is None:
            raise UnknownTestCase(f"the mock configuration {self.source} has no test case {test_case!r} for state "
                                  f"machine {machine!r} (it has: {', '.join(sorted(cases)) or 'none'})")
        return {state: {"response": name, "test_case": test_case, "answers": [dict(a) for a in self.responses[name]]}
                for state, name in states.items()}

    def any_case(self, machine: str) -> Selection:
        """Every state any test case of `machine` mocks (each with the first test case's response):
        what CreateStateMachine compiles with, so a mocked Task needs no code (none when `machine`
        has no test cases)."""
        selection: Selection = {}
        for test_case in sorted(self.machines.get(machine, {})):
            for state, mock in self.test_case(machine, test_case).items():
                selection.setdefault(state, mock)
        return selection


def load(path: str | Path) -> MockConfig:
    """The mock configuration in `path`, checked (module docstring); raises MockConfigError."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise MockConfigError(f"{source}: cannot read the mock configuration: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise MockConfigError(f"{source}: not JSON: {exc}") from None
    return parse(doc, source)


def parse(doc: Any, source: str) -> MockConfig:
    """`doc` (a mock configuration's JSON) checked; raises MockConfigError naming `source`."""

    def fail(parts: tuple[str, ...], problem: str) -> MockConfigError:
        return MockConfigError(f"{source}: {_path(parts)}: {problem}")

    def obj(value: Any, parts: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise fail(parts, f"expected an object, found {json.dumps(value)[:60]}")
        return value

    top = obj(doc, ())
    responses = {name: _answers(obj(value, ("MockedResponses", name)), ("MockedResponses", name), fail)
                 for name, value in obj(top.get("MockedResponses", {}), ("MockedResponses",)).items()}
    machines: dict[str, dict[str, dict[str, str]]] = {}
    for machine, value in obj(top.get("StateMachines", {}), ("StateMachines",)).items():
        at = ("StateMachines", machine)
        if "TestCases" not in obj(value, at):
            raise fail(at, "expected an object with the field TestCases")
        machines[machine] = {}
        for test_case, states in obj(value["TestCases"], (*at, "TestCases")).items():
            case_at = (*at, "TestCases", test_case)
            machines[machine][test_case] = {}
            for state, name in obj(states, case_at).items():
                if not isinstance(name, str):
                    raise fail((*case_at, state), f"expected the name of a mocked response, found {json.dumps(name)[:60]}")
                if name not in responses:
                    raise fail((*case_at, state), f"names the mocked response {name!r}, which MockedResponses does "
                                                  f"not define (it has: {', '.join(sorted(responses)) or 'none'})")
                machines[machine][test_case][state] = name
    return MockConfig(source, machines, responses)


def _answers(value: Mapping[str, Any], at: tuple[str, ...], fail: Any) -> tuple[Mapping[str, Any], ...]:
    """One mocked response's answers, ordered by invocation number (no two for one invocation)."""
    answers: list[dict[str, Any]] = []
    for key, answer in value.items():
        first, _, last = key.partition("-")
        if not _NUMBER.fullmatch(first.strip()) or (last and not _NUMBER.fullmatch(last.strip())):
            raise fail((*at, key), "expected an invocation number (\"0\") or an inclusive range of them (\"1-2\")")
        lo, hi = int(first), int(last) if last else int(first)
        if hi < lo:
            raise fail((*at, key), f"the range ends ({hi}) before it starts ({lo})")
        if not isinstance(answer, dict) or len(answer) != 1 or next(iter(answer)) not in ("Return", "Throw"):
            raise fail((*at, key), "expected an object with exactly one field, Return or Throw")
        if "Throw" in answer:
            thrown = answer["Throw"]
            if not isinstance(thrown, dict) or not isinstance(thrown.get("Error"), str):
                raise fail((*at, key, "Throw"), "expected an object with the string field Error (and Cause)")
            if not isinstance(thrown.get("Cause", ""), str):
                raise fail((*at, key, "Throw", "Cause"), "expected a string")
            answers.append({"from": lo, "to": hi, "Throw": {"Error": thrown["Error"], "Cause": thrown.get("Cause", "")}})
        else:
            answers.append({"from": lo, "to": hi, "Return": answer["Return"]})
    answers.sort(key=lambda a: a["from"])
    for before, after in zip(answers, answers[1:]):
        if after["from"] <= before["to"]:
            raise fail(at, f"invocation {after['from']} has two responses (ranges overlap)")
    return tuple(answers)


__all__ = ["MOCK_CONFIG_ENV", "MockConfig", "MockConfigError", "Selection", "UnknownTestCase", "load", "parse"]
