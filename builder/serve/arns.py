"""ARNs in AWS's format, and the names inside them (AWS's name rules).

State machine `arn:aws:states:REGION:ACCOUNT:stateMachine:NAME`, its version `...:NAME:N` and
alias `...:NAME:ALIAS`; execution `arn:aws:states:REGION:ACCOUNT:execution:MACHINE:NAME`
(`express:` for an EXPRESS machine's); activity `...:activity:NAME`; a Distributed Map's Map Run
`...:mapRun:MACHINE/STATE:EXECUTION:RUN` (RUN: a digest of the invocation that fanned the Map
out, so the history and the Map Run operations name the same run; builder.serve.map_runs) and
its child executions `...:execution:MACHINE/STATE:EXECUTION:RUN-INDEX`. Step Functions Local's
`#TestCase` suffix on a state machine ARN chooses a mock test case (builder.serve.mocks).
Parsing refuses what AWS refuses: `InvalidArn` for an ARN of another shape, region or account.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from builder.serve.wire import ApiError

DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT = "123456789012"
# AWS: 1-80 characters; no whitespace, brackets, wildcards, special characters or control characters.
_BAD_NAME = re.compile(r"[\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]")
_VERSION = re.compile(r"[1-9][0-9]{0,8}")


def check_name(name: str, what: str = "name") -> str:
    """`name` if AWS accepts it as a state machine, execution, alias or activity name; else InvalidName."""
    if not 1 <= len(name) <= 80 or _BAD_NAME.search(name):
        raise ApiError("InvalidName", f"Invalid Name: '{name}' ({what}: 1-80 characters, no whitespace, brackets, "
                                      "wildcards or any of \" # % \\ ^ | ~ ` $ & , ; : /)")
    return name


@dataclass(frozen=True)
class MachineRef:
    """A parsed state machine ARN: the machine, and its version number or alias if qualified."""

    name: str
    version: int | None = None
    alias: str | None = None
    test_case: str | None = None  # Step Functions Local's `#TestCase` suffix


@dataclass(frozen=True)
class ExecutionRef:
    machine: str
    name: str
    express: bool = False


@dataclass(frozen=True)
class MapRunRef:
    """A parsed Map Run ARN: the execution (registry key `machine:execution`), the Map state, the run."""

    machine: str
    state: str
    execution: str
    run: str


def map_run_arn(machine_arn: str, machine: str, execution: str, state: str, fan_key: str) -> str:
    """The Map Run ARN of the Distributed Map `state` fanned out by the invocation whose record is
    `fan_key`, in the execution `machine:execution` (region and account from `machine_arn`)."""
    prefix = ":".join(machine_arn.split(":")[:5])
    run = hashlib.sha256(fan_key.encode()).hexdigest()[:16]
    return f"{prefix}:mapRun:{machine}/{quote(state, safe='')}:{execution}:{run}"


@dataclass(frozen=True)
class Arns:
    """ARNs of one account and region (`serve --region --account`)."""

    region: str = DEFAULT_REGION
    account: str = DEFAULT_ACCOUNT

    @property
    def _prefix(self) -> str:
        return f"arn:aws:states:{self.region}:{self.account}"

    def machine(self, name: str, *, version: int | None = None, alias: str | None = None) -> str:
        qualifier = f":{version}" if version is not None else f":{alias}" if alias is not None else ""
        return f"{self._prefix}:stateMachine:{name}{qualifier}"

    def execution(self, machine: str, name: str, *, express: bool = False) -> str:
        return f"{self._prefix}:{'express' if express else 'execution'}:{machine}:{name}"

    def activity(self, name: str) -> str:
        return f"{self._prefix}:activity:{name}"

    def _parts(self, arn: str, kinds: tuple[str, ...], what: str) -> list[str]:
        if not isinstance(arn, str):
            raise ApiError("InvalidArn", f"Invalid Arn: {what} must be a string")
        parts = arn.split(":")
        if len(parts) < 7 or parts[:3] != ["arn", "aws", "states"] or parts[5] not in kinds:
            raise ApiError("InvalidArn", f"Invalid Arn: '{arn}' (expected arn:aws:states:{self.region}:{self.account}:"
                                         f"{kinds[0]}:...)")
        if parts[3] != self.region or parts[4] != self.account:
            raise ApiError("InvalidArn", f"Invalid Arn: '{arn}' names region {parts[3]!r} and account {parts[4]!r}; "
                                         f"this server is {self.region} / {self.account}")
        return parts[5:]

    def parse_machine(self, arn: str) -> MachineRef:
        """A state machine ARN, possibly qualified by a version or an alias, possibly with `#TestCase`."""
        base, _, test_case = arn.partition("#") if isinstance(arn, str) else (arn, "", "")
        parts = self._parts(base, ("stateMachine",), "stateMachineArn")
        if len(parts) not in (2, 3) or not parts[1]:
            raise ApiError("InvalidArn", f"Invalid Arn: '{arn}' is not a state machine ARN")
        qualifier = parts[2] if len(parts) == 3 else None
        version = int(qualifier) if qualifier is not None and _VERSION.fullmatch(qualifier) else None
        return MachineRef(parts[1], version=version, alias=qualifier if version is None else None,
                          test_case=test_case or None)

    def parse_execution(self, arn: str) -> ExecutionRef:
        parts = self._parts(arn, ("execution", "express"), "executionArn")
        if len(parts) < 3 or not parts[1] or not parts[2]:
            raise ApiError("InvalidArn", f"Invalid Arn: '{arn}' is not an execution ARN")
        return ExecutionRef(parts[1], ":".join(parts[2:]), express=parts[0] == "express")

    def parse_activity(self, arn: str) -> str:
        parts = self._parts(arn, ("activity",), "activityArn")
        if len(parts) != 2 or not parts[1]:
            raise ApiError("InvalidArn", f"Invalid Arn: '{arn}' is not an activity ARN")
        return parts[1]

    def resource_kind(self, arn: str) -> str:
        """What `arn` names (`stateMachine`, `activity`, ...): for the tag operations."""
        return self._parts(arn, ("stateMachine", "activity"), "resourceArn")[0]

    def parse_map_run(self, arn: str) -> MapRunRef:
        """A Map Run ARN (`map_run_arn`); AWS's own shape `...:mapRun:MACHINE/LABEL:ID` parses with
        no execution (so it names no run of this server: ResourceNotFound); InvalidArn for another."""
        parts = self._parts(arn, ("mapRun",), "mapRunArn")
        machine, slash, state = parts[1].partition("/") if len(parts) in (3, 4) else ("", "", "")
        if not (machine and slash and state and all(parts[2:])):
            raise ApiError("InvalidArn", f"Invalid Arn: '{arn}' is not a Map Run ARN")
        execution, run = (parts[2], parts[3]) if len(parts) == 4 else ("", parts[2])
        return MapRunRef(machine, unquote(state), execution, run)
