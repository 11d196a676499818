"""The Step Functions API's operations over the registry, the store and the engine.

`StatesApi.call(operation, params)` answers one operation whose request `builder.serve.wire`
has already checked against botocore's model; it returns the answer's members (rendered for
the output shape by the caller) or raises `ApiError` with AWS's code and message.

Which rule decides what:
- an execution's status, output and error are the store's (unum_entry.outcome: the first ending
  wins); the registry caches an ending once the store holds it;
- StartExecution is idempotent as on AWS: the same name with the same input while running
  returns the same execution, otherwise `ExecutionAlreadyExists`; the execution is indexed
  before anything runs, so a server killed right after answering resumes it (builder.serve.engine);
- StopExecution, RedriveExecution and the task-token calls are the CLI's own rules
  (unum_entry.outcome.stop_workflow, unum_entry.redrive, unum_entry.asl.callbacks), each a
  create-if-absent in the store, so a second call or a racing one finds the first's record.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from builder.serve.arns import Arns, ExecutionRef, MachineRef, check_name
from builder.serve.redrives import Redrives
from builder.serve.registry import Alias, Execution, Machine, Registry
from builder.serve.wire import ApiError, validation_error

if TYPE_CHECKING:
    from unum_entry.stores.base import Store

    from builder.serve.engine import Engine
    from builder.serve.map_runs import MapRuns
    from builder.serve.mocks import MockConfig

STATUS = {"succeeded": "SUCCEEDED", "failed": "FAILED", "stopped": "ABORTED", "timed out": "TIMED_OUT"}
DEFAULT_LOGGING = {"level": "OFF", "includeExecutionData": False}
SYNC_TIMEOUT = 300.0  # seconds StartSyncExecution waits (AWS: an EXPRESS execution lasts at most 5 minutes)
SYNC_POLL = 0.02
ACTIVITY_POLL = 55.0  # under botocore's 60 s read timeout, as AWS answers within 60 s
_ROLE = "arn:aws:iam::"


def _revision(definition: str, role_arn: str) -> str:
    return hashlib.sha256(f"{definition}\0{role_arn}".encode()).hexdigest()[:32]


def _json_text(text: str, code: str, what: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ApiError(code, f"Invalid {what}: {exc}") from None


def _page(items: list[Any], params: dict[str, Any], *, default_max: int = 100) -> tuple[list[Any], str | None]:
    """One page of `items` by maxResults (0: the default) and nextToken (an offset, opaque)."""
    size = params.get("maxResults") or default_max
    start = 0
    token = params.get("nextToken")
    if token:
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode())
        except (ValueError, UnicodeDecodeError):
            raise ApiError("InvalidToken", f"Invalid Token: '{token}' is not a nextToken this server gave") from None
    chunk = items[start:start + size]
    more = start + size < len(items)
    return chunk, base64.urlsafe_b64encode(str(start + size).encode()).decode() if more else None


class StatesApi:
    """The operations (module docstring). `clock` is the registry's and the answers' clock."""

    def __init__(self, registry: Registry, engine: Engine, store: Store, arns: Arns,
                 clock: Callable[[], float] = time.time, *, mocks: MockConfig | None = None) -> None:
        self.registry = registry
        self.engine = engine
        self.store = store
        self.arns = arns
        self.clock = clock
        self.activity_poll = ACTIVITY_POLL  # seconds GetActivityTask holds a request (tests shorten it)
        self.mocks = mocks  # `serve --mock-config`: the `#TestCase` ARNs' mocks (builder.serve.mocks)
        self.redrives = Redrives(store)  # RedriveExecution's, one at a time per execution

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        method = getattr(self, f"op_{operation}", None)
        if method is None:
            raise ApiError("UnsupportedOperation", f"{operation} is not supported by unum serve (see docs/api.md)")
        result: dict[str, Any] = method(params)
        return result

    # ---- state machines ----------------------------------------------------------------

    def _machine(self, name: str, arn: str) -> Machine:
        machine = self.registry.machine(name)
        if machine is None:
            raise ApiError("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'")
        return machine

    def _check_definition(self, name: str, definition: str) -> str:
        """`definition` if it is a valid state machine whose code compiles; else InvalidDefinition."""
        from unum_entry.errors import UnumError

        from builder.compiler.validate import validate

        doc = _json_text(definition, "InvalidDefinition", "State Machine Definition")
        if not isinstance(doc, dict):
            raise ApiError("InvalidDefinition", "Invalid State Machine Definition: the definition must be a JSON object")
        try:
            validate(doc, name)
            # Tasks a test case mocks need no code (Step Functions Local never calls them).
            self.engine.compiled(name, definition, (self.mocks.any_case(name) if self.mocks else None) or None)
        except UnumError as exc:
            raise ApiError("InvalidDefinition", f"Invalid State Machine Definition: '{exc}'") from None
        return definition

    def _check_role(self, role_arn: str) -> str:
        if not role_arn.startswith(_ROLE) or ":role/" not in role_arn:
            raise ApiError("InvalidArn", f"Invalid Arn: 'Resource type not valid in this context: {role_arn}'")
        return role_arn

    def op_CreateStateMachine(self, p: dict[str, Any]) -> dict[str, Any]:
        name = check_name(p["name"], "name")
        role = self._check_role(p["roleArn"])
        kind = p.get("type") or "STANDARD"
        definition = self._check_definition(name, p["definition"])
        now = self.clock()
        machine = Machine(name, definition, role, kind, now, now, _revision(definition, role), p.get("description"),
                          p.get("loggingConfiguration"), p.get("tracingConfiguration"))
        existing = self.registry.add_machine(machine)
        arn = self.arns.machine(name)
        if existing is not None:
            if (existing.definition, existing.role_arn, existing.type) != (definition, role, kind):
                raise ApiError("StateMachineAlreadyExists", f"State Machine Already Exists: '{arn}'")
            machine = existing
        if p.get("tags"):
            self.registry.tag(arn, {t["key"]: t.get("value", "") for t in p["tags"]})
        answer: dict[str, Any] = {"stateMachineArn": arn, "creationDate": machine.created}
        if p.get("publish"):
            version, _ = self.registry.publish(name, p.get("versionDescription"), None, now)
            if version is not None:
                answer["stateMachineVersionArn"] = self.arns.machine(name, version=version.version)
        return answer

    def op_DescribeStateMachine(self, p: dict[str, Any]) -> dict[str, Any]:
        ref = self.arns.parse_machine(p["stateMachineArn"])
        machine = self._machine(ref.name, p["stateMachineArn"])
        common = {"name": machine.name, "type": machine.type, "status": "ACTIVE",
                  "loggingConfiguration": machine.logging or DEFAULT_LOGGING,
                  "tracingConfiguration": machine.tracing or {"enabled": False}}
        if ref.alias is not None:
            raise validation_error(f"DescribeStateMachine takes a state machine or version ARN, not an alias: "
                                   f"'{p['stateMachineArn']}' (use DescribeStateMachineAlias)")
        if ref.version is not None:
            version = self.registry.version(ref.name, ref.version)
            if version is None:
                raise ApiError("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{p['stateMachineArn']}'")
            return {**common, "stateMachineArn": self.arns.machine(ref.name, version=ref.version),
                    "definition": version.definition, "roleArn": version.role_arn, "creationDate": version.created,
                    "revisionId": version.revision, "description": version.description}
        return {**common, "stateMachineArn": self.arns.machine(machine.name), "definition": machine.definition,
                "roleArn": machine.role_arn, "creationDate": machine.created, "revisionId": machine.revision,
                "description": machine.description}

    def op_UpdateStateMachine(self, p: dict[str, Any]) -> dict[str, Any]:
        ref = self.arns.parse_machine(p["stateMachineArn"])
        if ref.version is not None or ref.alias is not None:
            raise validation_error("UpdateStateMachine takes an unqualified state machine ARN")
        machine = self._machine(ref.name, p["stateMachineArn"])
        if p.get("definition") is None and p.get("roleArn") is None and p.get("loggingConfiguration") is None \
                and p.get("tracingConfiguration") is None:
            raise ApiError("MissingRequiredParameter", "Either the definition, the role ARN, the logging "
                                                       "configuration or the tracing configuration must be specified")
        if p.get("definition") is not None:
            machine.definition = self._check_definition(machine.name, p["definition"])
        if p.get("roleArn") is not None:
            machine.role_arn = self._check_role(p["roleArn"])
        machine.logging = p.get("loggingConfiguration", machine.logging)
        machine.tracing = p.get("tracingConfiguration", machine.tracing)
        machine.updated = self.clock()
        machine.revision = _revision(machine.definition, machine.role_arn)
        self.registry.update_machine(machine)
        answer: dict[str, Any] = {"updateDate": machine.updated, "revisionId": machine.revision}
        if p.get("publish"):
            version, _ = self.registry.publish(machine.name, p.get("versionDescription"), None, machine.updated)
            if version is not None:
                answer["stateMachineVersionArn"] = self.arns.machine(machine.name, version=version.version)
        return answer

    def op_DeleteStateMachine(self, p: dict[str, Any]) -> dict[str, Any]:
        ref = self.arns.parse_machine(p["stateMachineArn"])
        if ref.alias is not None:
            raise validation_error("DeleteStateMachine takes a state machine or version ARN (use DeleteStateMachineAlias)")
        if ref.version is not None:
            self.registry.delete_version(ref.name, ref.version)
        else:
            self.registry.delete_machine(ref.name)  # AWS: deleting a deleted machine succeeds
        return {}

    def op_ListStateMachines(self, p: dict[str, Any]) -> dict[str, Any]:
        machines = self.registry.machines()
        page, token = _page(machines, p)
        return {"stateMachines": [{"stateMachineArn": self.arns.machine(m.name), "name": m.name, "type": m.type,
                                   "creationDate": m.created} for m in page], "nextToken": token}

    def op_ValidateStateMachineDefinition(self, p: dict[str, Any]) -> dict[str, Any]:
        from unum_entry.errors import AslDefinitionError, UnumError

        from builder.compiler.validate import validate

        try:
            doc = json.loads(p["definition"])
            if not isinstance(doc, dict):
                raise ValueError("the definition must be a JSON object")
            validate(doc, "definition")
        except ValueError as exc:
            return {"result": "FAIL", "diagnostics": [{"severity": "ERROR", "code": "INVALID_JSON_DESCRIPTION",
                                                       "message": str(exc)}], "truncated": False}
        except AslDefinitionError as exc:
            location = "/" + "/".join(x for x in ("States", exc.state, exc.field) if x) if exc.state else f"/{exc.field}"
            return {"result": "FAIL", "diagnostics": [{"severity": "ERROR", "code": "SCHEMA_VALIDATION_FAILED",
                                                       "message": exc.problem, "location": location}],
                    "truncated": False}
        except UnumError as exc:
            return {"result": "FAIL", "diagnostics": [{"severity": "ERROR", "code": "SCHEMA_VALIDATION_FAILED",
                                                       "message": str(exc)}], "truncated": False}
        return {"result": "OK", "diagnostics": [], "truncated": False}

    def op_DescribeStateMachineForExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        execution = self._execution(p["executionArn"])
        definition = self._definition_of(execution)
        machine = self.registry.machine(execution.machine)
        return {"stateMachineArn": self.arns.machine(execution.machine), "name": execution.machine,
                "definition": definition, "roleArn": machine.role_arn if machine else "",
                "updateDate": machine.updated if machine else execution.started, "revisionId": execution.revision,
                "loggingConfiguration": (machine.logging if machine else None) or DEFAULT_LOGGING,
                "tracingConfiguration": (machine.tracing if machine else None) or {"enabled": False}}

    def _definition_of(self, execution: Execution) -> str:
        from pathlib import Path

        from builder.serve.engine import DEFINITION_FILE

        source = Path(execution.folder).parent / "staging" / DEFINITION_FILE
        return source.read_text() if source.is_file() else ""

    # ---- versions and aliases -------------------------------------------------------------

    def op_PublishStateMachineVersion(self, p: dict[str, Any]) -> dict[str, Any]:
        ref = self.arns.parse_machine(p["stateMachineArn"])
        version, how = self.registry.publish(ref.name, p.get("description"), p.get("revisionId"), self.clock())
        if how == "missing" or version is None:
            if how == "conflict":
                raise ApiError("ConflictException", f"the state machine's revision is not {p.get('revisionId')!r}")
            raise ApiError("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{p['stateMachineArn']}'")
        return {"creationDate": version.created,
                "stateMachineVersionArn": self.arns.machine(ref.name, version=version.version)}

    def op_ListStateMachineVersions(self, p: dict[str, Any]) -> dict[str, Any]:
        ref = self.arns.parse_machine(p["stateMachineArn"])
        self._machine(ref.name, p["stateMachineArn"])
        page, token = _page(self.registry.versions(ref.name), p)
        return {"stateMachineVersions": [{"stateMachineVersionArn": self.arns.machine(ref.name, version=v.version),
                                          "creationDate": v.created} for v in page], "nextToken": token}

    def op_DeleteStateMachineVersion(self, p: dict[str, Any]) -> dict[str, Any]:
        ref = self.arns.parse_machine(p["stateMachineVersionArn"])
        if ref.version is None:
            raise validation_error(f"not a version ARN: '{p['stateMachineVersionArn']}'")
        for alias in self.registry.aliases(ref.name):
            if any(self.arns.parse_machine(r["stateMachineVersionArn"]).version == ref.version for r in alias.routing):
                raise ApiError("ConflictException", f"Version {ref.version} is referenced by alias {alias.name!r}: "
                                                    "update or delete the alias first")
        self.registry.delete_version(ref.name, ref.version)
        return {}

    def _routing(self, machine: str, routing: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not 1 <= len(routing) <= 2:
            raise validation_error("routingConfiguration: one or two versions")
        if sum(r["weight"] for r in routing) != 100:
            raise validation_error("routingConfiguration: the weights must add up to 100")
        if len({r["stateMachineVersionArn"] for r in routing}) < len(routing):
            raise validation_error("routingConfiguration: each version at most once")
        for r in routing:
            ref = self.arns.parse_machine(r["stateMachineVersionArn"])
            if ref.name != machine or ref.version is None:
                raise validation_error(f"routingConfiguration: '{r['stateMachineVersionArn']}' is not a version of "
                                       f"{machine}")
            if self.registry.version(machine, ref.version) is None:
                raise ApiError("ResourceNotFound", f"Resource not found: '{r['stateMachineVersionArn']}'")
        return [{"stateMachineVersionArn": r["stateMachineVersionArn"], "weight": r["weight"]} for r in routing]

    def op_CreateStateMachineAlias(self, p: dict[str, Any]) -> dict[str, Any]:
        name = check_name(p["name"], "alias name")
        first = self.arns.parse_machine(p["routingConfiguration"][0]["stateMachineVersionArn"]) \
            if p["routingConfiguration"] else None
        if first is None:
            raise validation_error("routingConfiguration: one or two versions")
        routing = self._routing(first.name, p["routingConfiguration"])
        now = self.clock()
        alias = Alias(first.name, name, p.get("description"), routing, now, now)
        existing = self.registry.put_alias(alias, create=True)
        if existing is not None and (existing.routing, existing.description) != (routing, alias.description):
            raise ApiError("ConflictException", f"Alias {name!r} of {first.name} exists with another configuration")
        return {"stateMachineAliasArn": self.arns.machine(first.name, alias=name),
                "creationDate": (existing or alias).created}

    def _alias(self, arn: str) -> Alias:
        ref = self.arns.parse_machine(arn)
        alias = self.registry.alias(ref.name, ref.alias) if ref.alias is not None else None
        if alias is None:
            raise ApiError("ResourceNotFound", f"Resource not found: '{arn}'")
        return alias

    def op_DescribeStateMachineAlias(self, p: dict[str, Any]) -> dict[str, Any]:
        alias = self._alias(p["stateMachineAliasArn"])
        return {"stateMachineAliasArn": p["stateMachineAliasArn"], "name": alias.name,
                "description": alias.description, "routingConfiguration": alias.routing,
                "creationDate": alias.created, "updateDate": alias.updated}

    def op_UpdateStateMachineAlias(self, p: dict[str, Any]) -> dict[str, Any]:
        alias = self._alias(p["stateMachineAliasArn"])
        if p.get("routingConfiguration") is not None:
            alias.routing = self._routing(alias.machine, p["routingConfiguration"])
        if p.get("description") is not None:
            alias.description = p["description"]
        alias.updated = self.clock()
        self.registry.put_alias(alias, create=False)
        return {"updateDate": alias.updated}

    def op_DeleteStateMachineAlias(self, p: dict[str, Any]) -> dict[str, Any]:
        alias = self._alias(p["stateMachineAliasArn"])
        self.registry.delete_alias(alias.machine, alias.name)
        return {}

    def op_ListStateMachineAliases(self, p: dict[str, Any]) -> dict[str, Any]:
        ref = self.arns.parse_machine(p["stateMachineArn"])
        self._machine(ref.name, p["stateMachineArn"])
        aliases = self.registry.aliases(ref.name)
        if ref.version is not None:  # AWS: a version ARN lists the aliases that route to that version
            aliases = [a for a in aliases if any(self.arns.parse_machine(r["stateMachineVersionArn"]).version
                                                 == ref.version for r in a.routing)]
        page, token = _page(aliases, p)
        return {"stateMachineAliases": [{"stateMachineAliasArn": self.arns.machine(ref.name, alias=a.name),
                                         "creationDate": a.created} for a in page], "nextToken": token}

    # ---- tags -------------------------------------------------------------------------

    def _taggable(self, arn: str) -> str:
        kind = self.arns.resource_kind(arn)
        exists = (self.registry.machine(self.arns.parse_machine(arn).name) is not None if kind == "stateMachine"
                  else self.registry.activity(self.arns.parse_activity(arn)) is not None)
        if not exists:
            raise ApiError("ResourceNotFound", f"Resource not found: '{arn}'")
        return arn

    def op_TagResource(self, p: dict[str, Any]) -> dict[str, Any]:
        self.registry.tag(self._taggable(p["resourceArn"]), {t["key"]: t.get("value", "") for t in p["tags"]})
        return {}

    def op_UntagResource(self, p: dict[str, Any]) -> dict[str, Any]:
        self.registry.untag(self._taggable(p["resourceArn"]), list(p["tagKeys"]))
        return {}

    def op_ListTagsForResource(self, p: dict[str, Any]) -> dict[str, Any]:
        tags = self.registry.tags(self._taggable(p["resourceArn"]))
        return {"tags": [{"key": k, "value": v} for k, v in tags.items()]}

    # ---- activities (the resource; see docs/api.md for activity Tasks) ---------------------

    def op_CreateActivity(self, p: dict[str, Any]) -> dict[str, Any]:
        name = check_name(p["name"], "activity name")
        created = self.registry.add_activity(name, self.clock())
        arn = self.arns.activity(name)
        if p.get("tags"):
            self.registry.tag(arn, {t["key"]: t.get("value", "") for t in p["tags"]})
        return {"activityArn": arn, "creationDate": created}

    def op_DescribeActivity(self, p: dict[str, Any]) -> dict[str, Any]:
        name = self.arns.parse_activity(p["activityArn"])
        created = self.registry.activity(name)
        if created is None:
            raise ApiError("ActivityDoesNotExist", f"Activity Does Not Exist: '{p['activityArn']}'")
        return {"activityArn": p["activityArn"], "name": name, "creationDate": created}

    def op_ListActivities(self, p: dict[str, Any]) -> dict[str, Any]:
        page, token = _page(self.registry.activities(), p)
        return {"activities": [{"activityArn": self.arns.activity(n), "name": n, "creationDate": c} for n, c in page],
                "nextToken": token}

    def op_GetActivityTask(self, p: dict[str, Any]) -> dict[str, Any]:
        from builder.serve.activity_tasks import poll

        name = self.arns.parse_activity(p["activityArn"])
        if self.registry.activity(name) is None:
            raise ApiError("ActivityDoesNotExist", f"Activity Does Not Exist: '{p['activityArn']}'")

        def running() -> list[str]:
            return [e.workflow for e in reversed(self.registry.executions(unended=True))
                    if self.status(e)[0] == "RUNNING"]

        return poll(self.store, running, p["activityArn"], p.get("workerName"), wait=self.activity_poll)

    def op_DeleteActivity(self, p: dict[str, Any]) -> dict[str, Any]:
        self.registry.delete_activity(self.arns.parse_activity(p["activityArn"]))
        return {}

    # ---- executions ---------------------------------------------------------------------

    def _target(self, ref: MachineRef, arn: str, name: str) -> tuple[Machine, str, int | None, str | None, str]:
        """What an execution named `name` of `ref` runs: (machine, definition, version, alias,
        revision). An alias picks one of its versions by weight, from the execution's name, so
        a repeated start picks the same one."""
        from unum_entry.ramp import pick_version

        machine = self._machine(ref.name, arn)
        version_number, alias_name = ref.version, None
        if ref.alias is not None:
            alias = self.registry.alias(ref.name, ref.alias)
            if alias is None:
                raise ApiError("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'")
            alias_name = alias.name
            stable, *ramped = alias.routing  # one or two routes, weights adding up to 100 (_routing)
            chosen = pick_version(f"{ref.name}\0{name}", stable["stateMachineVersionArn"],
                                  ramped[0]["stateMachineVersionArn"] if ramped else None,
                                  ramped[0]["weight"] / 100 if ramped else 0.0)
            version_number = self.arns.parse_machine(chosen).version
        if version_number is not None:
            version = self.registry.version(ref.name, version_number)
            if version is None:
                raise ApiError("StateMachineDoesNotExist", f"State Machine Does Not Exist: '{arn}'")
            return machine, version.definition, version_number, alias_name, version.revision
        return machine, machine.definition, None, None, machine.revision

    def _begin(self, p: dict[str, Any], *, express_only: bool) -> Execution:
        ref = self.arns.parse_machine(p["stateMachineArn"])
        name = check_name(p.get("name") or str(uuid.uuid4()), "execution name")
        text: str = p["input"] if p.get("input") is not None else "{}"
        value = _json_text(text, "InvalidExecutionInput", "execution input")
        machine, definition, version, alias, revision = self._target(ref, p["stateMachineArn"], name)
        if express_only and machine.type != "EXPRESS":
            raise ApiError("StateMachineTypeNotSupported", "This operation is not supported by this type of state "
                                                           f"machine: {machine.name} is {machine.type}")
        folder = self._folder(machine.name, definition, ref)
        execution = Execution(f"{machine.name}:{name}", machine.name, name, p["stateMachineArn"], version, alias,
                              revision, folder, self.clock(), text, express=machine.type == "EXPRESS")
        indexed, created = self.registry.add_execution(execution)
        if not created:
            same = indexed.machine_arn == execution.machine_arn and _same_json(indexed.input, text)
            if not same or self.status(indexed)[0] != "RUNNING":
                raise ApiError("ExecutionAlreadyExists", f"Execution Already Exists: "
                                                         f"'{self._execution_arn(indexed)}'")
            return indexed
        self.engine.start(folder, execution.workflow, value)
        return execution

    def _folder(self, machine: str, definition: str, ref: MachineRef) -> str:
        """The compiled folder an execution runs on (builder.serve.engine); a `#TestCase` ARN's is
        compiled with that test case's mocks (builder.serve.mocks), else ValidationException."""
        from unum_entry.errors import UnumError

        from builder.serve.mocks import UnknownTestCase

        mocks = None
        if ref.test_case is not None:
            if self.mocks is None:
                raise validation_error(f"Test case '{ref.test_case}' cannot run: no mock configuration is loaded "
                                       "(serve --mock-config FILE, or $SFN_MOCK_CONFIG)")
            try:
                mocks = self.mocks.test_case(machine, ref.test_case)
            except UnknownTestCase as exc:
                raise validation_error(str(exc)) from None
        try:
            return self.engine.compiled(machine, definition, mocks)
        except UnumError as exc:
            raise ApiError("InvalidDefinition", f"Invalid State Machine Definition: '{exc}'") from None

    def _execution_arn(self, execution: Execution) -> str:
        return self.arns.execution(execution.machine, execution.name, express=execution.express)

    def op_StartExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        execution = self._begin(p, express_only=False)
        return {"executionArn": self._execution_arn(execution), "startDate": execution.started}

    def op_StartSyncExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        execution = self._begin(p, express_only=True)
        deadline = time.monotonic() + SYNC_TIMEOUT
        while self.status(execution)[0] == "RUNNING" and time.monotonic() < deadline:
            time.sleep(SYNC_POLL)
        described = self._describe(execution)
        keys = ("executionArn", "stateMachineArn", "name", "startDate", "stopDate", "status", "error", "cause",
                "input", "inputDetails", "output", "outputDetails", "traceHeader")
        answer = {k: described.get(k) for k in keys}
        answer["billingDetails"] = {"billedMemoryUsedInMB": 64,
                                    "billedDurationInMilliseconds": int(1000 * ((described.get("stopDate") or 0)
                                                                                - execution.started))}
        if answer["status"] == "RUNNING":
            answer["status"], answer["error"] = "TIMED_OUT", "States.Timeout"
        return answer

    def _execution(self, arn: str) -> Execution:
        ref: ExecutionRef = self.arns.parse_execution(arn)
        execution = self.registry.execution(f"{ref.machine}:{ref.name}")
        if execution is None:
            raise ApiError("ExecutionDoesNotExist", f"Execution Does Not Exist: '{arn}'")
        return execution

    def status(self, execution: Execution) -> tuple[str, float | None, str | None, str | None, str | None]:
        """(status, stopDate, error, cause, output) as the store decided them (module docstring)."""
        if execution.status is not None:
            return execution.status, execution.stopped, execution.error, execution.cause, execution.output
        from unum_entry.history import read_history
        from unum_entry.outcome import Ending, read_outcome

        # A compiled state machine ends with its root result or its failure record: while
        # neither exists it runs, and two key reads say so instead of a scan of its records.
        if not self.store.get_many(Ending.of(execution.workflow).keys):
            return "RUNNING", None, None, None, None
        outcome = read_outcome(self.store, execution.workflow)
        status = STATUS.get(outcome.status.value, "RUNNING")
        if status == "RUNNING":
            return status, None, None, None, None
        history = read_history(self.store, execution.workflow)
        stopped = (history.ended_ms / 1000) if history.ended_ms else self.clock()
        stopped = max(stopped, execution.started)
        failure = outcome.failure or {}
        error, cause = failure.get("Error"), failure.get("Cause")
        output = json.dumps(outcome.result, separators=(",", ":")) if status == "SUCCEEDED" else None
        self.registry.remember_end(execution.workflow, status, stopped, error=error, cause=cause, output=output)
        execution.status, execution.stopped, execution.error, execution.cause, execution.output = \
            status, stopped, error, cause, output
        return status, stopped, error, cause, output

    def _describe(self, execution: Execution) -> dict[str, Any]:
        status, stopped, error, cause, output = self.status(execution)
        answer: dict[str, Any] = {
            "executionArn": self._execution_arn(execution), "stateMachineArn": self.arns.machine(execution.machine),
            "name": execution.name, "status": status, "startDate": execution.started, "stopDate": stopped,
            "input": execution.input, "inputDetails": {"included": True}, "output": output,
            "outputDetails": {"included": True} if output is not None else None, "error": error, "cause": cause,
            "redriveCount": execution.redrives, "redriveDate": execution.redriven,
            "redriveStatus": "REDRIVABLE" if status in ("FAILED", "TIMED_OUT", "ABORTED") and not execution.express
            else "NOT_REDRIVABLE"}
        refusal = self._redrive_refusal(execution) if status in ("FAILED", "TIMED_OUT") and not execution.express \
            else None
        if refusal is not None:
            answer["redriveStatus"], answer["redriveStatusReason"] = "NOT_REDRIVABLE", refusal
        elif status == "ABORTED":
            answer["redriveStatus"] = "NOT_REDRIVABLE"
            answer["redriveStatusReason"] = "Execution was stopped: unum redrives failed executions only"
        elif status == "SUCCEEDED":
            answer["redriveStatusReason"] = "Execution is SUCCEEDED and cannot be redriven"
        elif status == "RUNNING":
            answer["redriveStatusReason"] = "Execution is RUNNING and cannot be redriven"
        if execution.version is not None:
            answer["stateMachineVersionArn"] = self.arns.machine(execution.machine, version=execution.version)
        if execution.alias is not None:
            answer["stateMachineAliasArn"] = self.arns.machine(execution.machine, alias=execution.alias)
        return answer

    def op_DescribeExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._describe(self._execution(p["executionArn"]))

    def op_ListExecutions(self, p: dict[str, Any]) -> dict[str, Any]:
        if p.get("mapRunArn"):
            return self._map_runs().list_executions(p)
        if not p.get("stateMachineArn"):
            raise validation_error("stateMachineArn or mapRunArn must be given")
        ref = self.arns.parse_machine(p["stateMachineArn"])
        self._machine(ref.name, p["stateMachineArn"])
        wanted = p.get("statusFilter")
        rows = []
        for execution in self.registry.executions(ref.name):
            if ref.version is not None and execution.version != ref.version:
                continue
            if ref.alias is not None and execution.alias != ref.alias:
                continue
            status, stopped, *_ = self.status(execution)
            if wanted is not None and status != wanted:
                continue
            if p.get("redriveFilter") == "REDRIVEN" and not execution.redrives:
                continue
            if p.get("redriveFilter") == "NOT_REDRIVEN" and execution.redrives:
                continue
            item: dict[str, Any] = {"executionArn": self._execution_arn(execution),
                                    "stateMachineArn": self.arns.machine(execution.machine), "name": execution.name,
                                    "status": status, "startDate": execution.started, "stopDate": stopped,
                                    "redriveCount": execution.redrives, "redriveDate": execution.redriven}
            if execution.version is not None:
                item["stateMachineVersionArn"] = self.arns.machine(execution.machine, version=execution.version)
            if execution.alias is not None:
                item["stateMachineAliasArn"] = self.arns.machine(execution.machine, alias=execution.alias)
            rows.append(item)
        page, token = _page(rows, p)
        return {"executions": page, "nextToken": token}

    def op_GetExecutionHistory(self, p: dict[str, Any]) -> dict[str, Any]:
        from builder.serve.history import aws_events

        execution = self._execution(p["executionArn"])
        status = self.status(execution)[0]
        events = aws_events(self.store, execution, status, include_data=p.get("includeExecutionData", True), registry=self.registry)
        if p.get("reverseOrder"):
            events.reverse()
        page, token = _page(events, p, default_max=1000)
        return {"events": page, "nextToken": token}

    def op_StopExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        from unum_entry.outcome import stop_workflow

        execution = self._execution(p["executionArn"])
        # The store decides (unum_entry.outcome.stop_workflow: the first ending wins), not a read
        # made here first; an ended execution is left as it ended, and a stop that died between
        # its two writes is completed.
        if execution.status is None:
            stop_workflow(self.store, execution.workflow, error=p.get("error"), cause=p.get("cause"))
        stopped = self.status(execution)[1]
        return {"stopDate": stopped if stopped is not None else self.clock()}

    def op_RedriveExecution(self, p: dict[str, Any]) -> dict[str, Any]:
        from unum_entry.redrive import CannotRedrive

        execution = self._execution(p["executionArn"])
        # one at a time per execution, so a claim found here is a dead server's redrive, continued
        # (builder.serve.redrives); a call that waited finds the execution running
        with self.redrives.one_at_a_time(execution.workflow):
            execution = self._execution(p["executionArn"])
            status = self.status(execution)[0]
            if status not in ("FAILED", "TIMED_OUT", "ABORTED"):
                raise ApiError("ExecutionNotRedrivable", f"Execution is {status} and cannot be redriven: "
                                                         f"'{p['executionArn']}'")
            if execution.express:
                raise ApiError("ExecutionNotRedrivable",
                               f"An EXPRESS execution cannot be redriven: '{p['executionArn']}'")
            now = self.clock()
            try:
                self.redrives.redrive(execution.workflow, self.engine.platform(execution.folder),
                                      redriven=lambda: self.registry.forget_end(execution.workflow, redriven=now))
            except CannotRedrive as exc:
                raise ApiError("ExecutionNotRedrivable", str(exc)) from None
        return {"redriveDate": now}

    def _redrive_refusal(self, execution: Execution) -> str | None:
        """The one line RedriveExecution would refuse this ended execution with, None when it
        would redrive it: unum_entry.redrive's own checks, run over a view of the store that
        stops at redrive's first write (its claim), so DescribeExecution's redriveStatus is
        RedriveExecution's answer told in advance (no check repeated here)."""
        from unum_entry.redrive import CannotRedrive, redrive
        from unum_entry.retention import store_retention

        try:  # adopt: RedriveExecution continues a dead server's redrive (builder.serve.redrives)
            redrive(_UpToTheClaim(self.store), execution.workflow, _NoInvoker(),  # type: ignore[arg-type]
                    retention=store_retention(self.store), adopt=True)
        except CannotRedrive as exc:
            return str(exc)
        except _WouldWrite:
            return None
        return None

    # ---- Map Runs (builder.serve.map_runs) -------------------------------------------------

    def _map_runs(self) -> MapRuns:
        from builder.serve.map_runs import MapRuns

        return MapRuns(self, _page)

    def op_DescribeMapRun(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._map_runs().describe(p)

    def op_ListMapRuns(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._map_runs().list(p)

    def op_UpdateMapRun(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._map_runs().update(p)

    def op_TestState(self, p: dict[str, Any]) -> dict[str, Any]:
        from builder.serve.test_state import test_state

        return test_state(p, functions=self.engine.functions)

    # ---- task tokens ----------------------------------------------------------------------

    def _token_invoker(self, token_text: str) -> Any:
        """The invoker that runs a token's continuation: the platform of the execution it names."""
        from unum_entry.asl.callbacks import CallbackError, Token

        try:
            token = Token.parse(token_text)
        except CallbackError:
            raise ApiError("InvalidToken", f"Invalid Token: '{token_text[:64]}'") from None
        execution = self.registry.execution(token.workflow)
        if execution is None:  # a child workflow (nested machine, durable invoke): its root's platform
            root = token.workflow.split("~", 1)[0]
            execution = self.registry.execution(root)
        if execution is None:
            raise ApiError("TaskDoesNotExist", f"Task Does Not Exist: no execution of this server waits on this token")
        return self.engine.platform(execution.folder).invoker

    def _complete(self, token_text: str, outcome: dict[str, Any]) -> None:
        from unum_entry.asl import callbacks

        invoker = self._token_invoker(token_text)
        try:
            callbacks.complete(token_text, outcome, store=self.store, invoker=invoker)
        except callbacks.InvalidToken:
            raise ApiError("InvalidToken", f"Invalid Token: '{token_text[:64]}'") from None
        except callbacks.TaskAlreadyCompleted:
            raise ApiError("TaskTimedOut", "Task Timed Out: 'Provided task does not exist anymore'") from None
        except callbacks.TaskTimedOut:
            raise ApiError("TaskTimedOut", "Task Timed Out: 'Provided task does not exist anymore'") from None
        except callbacks.TaskNotWaitingYet:
            raise ApiError("TaskDoesNotExist", "Task Does Not Exist: the task is not waiting (yet)") from None

    def op_SendTaskSuccess(self, p: dict[str, Any]) -> dict[str, Any]:
        output = _json_text(p["output"], "InvalidOutput", "output")
        self._complete(p["taskToken"], {"output": output})
        return {}

    def op_SendTaskFailure(self, p: dict[str, Any]) -> dict[str, Any]:
        self._complete(p["taskToken"], {"error": p.get("error"), "cause": p.get("cause")})
        return {}

    def op_SendTaskHeartbeat(self, p: dict[str, Any]) -> dict[str, Any]:
        from unum_entry.asl import callbacks

        self._token_invoker(p["taskToken"])
        try:
            callbacks.task_heartbeat(p["taskToken"], store=self.store)
        except callbacks.InvalidToken:
            raise ApiError("InvalidToken", f"Invalid Token: '{p['taskToken'][:64]}'") from None
        except (callbacks.TaskAlreadyCompleted, callbacks.TaskTimedOut):
            raise ApiError("TaskTimedOut", "Task Timed Out: 'Provided task does not exist anymore'") from None
        except callbacks.CallbackError as exc:
            raise ApiError("TaskDoesNotExist", f"Task Does Not Exist: {exc}") from None
        return {}


class _WouldWrite(Exception):
    """Redrive reached its first write: every check before it passed."""


class _UpToTheClaim:
    """A store for redrive's checks only: reads go to `store`; any write of the Store contract
    (a create, a delete, a set add, a transaction, a sweep) stops redrive with _WouldWrite."""

    WRITES = frozenset({"create", "create_joining", "create_joining_many", "add_to_set", "add_to_set_many",
                        "delete", "transact", "sweep", "close"})

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name in self.WRITES:
            raise _WouldWrite
        return getattr(self._store, name)


class _NoInvoker:
    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        raise _WouldWrite


def _same_json(a: str, b: str) -> bool:
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return a == b
