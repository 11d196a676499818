"""The Step Functions API's registry kept in the workflow's own store (the cloud front door,
issue 43): the same methods as builder.serve.registry.Registry (what StatesApi calls), with every
state machine, version, alias, tag set, activity and execution as records of the store the
functions use (DynamoDB on Lambda), so the API function keeps nothing of its own.

One primitive, create-if-absent, carries every write. Each registry entry (a machine, a version,
an alias, an ARN's tags, an activity, an execution) is a *register*: a chain of records
`api-<kind>-<hash of its name>.<n>`, n = 1, 2, …, each holding one revision (JSON; `null` is a
deletion, so a deleted machine can be created again). The current value is the last revision.
A write of revision n+1 is a `create` of its key: the store's atomic create-if-absent is the
compare-and-swap, so of two racing writers one wins and the other re-reads and tries again (an
update) or finds the winner (a create: AWS's CreateStateMachine, CreateActivity,
CreateStateMachineAlias and StartExecution are idempotent, and two racing creates return one).

Costs: a lookup reads the chain in batches of `WINDOW` keys (one BatchGetItem on DynamoDB for an
entry updated fewer than `WINDOW` times); a list (ListStateMachines, ListExecutions, versions,
aliases) reads every registry record in one scan of the registry's records (a filtered Scan on
DynamoDB: linear in the table). Registry records belong to the pseudo-workflow `REGISTRY` (so
`python -m builder list` shows it) and never expire while the definitions they hold are in use
(`FOREVER`), but an execution's, which expires with the store's TTL like its workflow's records.

An execution's status is never cached here (`remember_end` does nothing): DescribeExecution reads
the ending the store decided, as the functions wrote it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from unum_entry.errors import StoreError
from unum_entry.stores.base import Kind, Store

from builder.serve.registry import Alias, Execution, Machine, Version

REGISTRY = "unum-api-registry"  # the pseudo-workflow every registry record belongs to
WINDOW = 8  # revisions read per batch when following a register's chain
FOREVER = 100 * 365 * 24 * 3600  # seconds a definition's records live (AWS keeps them until deleted)
ATTEMPTS = 50  # compare-and-swap attempts before a write gives up (each lost one means another writer won)


class RegistryContention(StoreError):
    """A registry write lost its compare-and-swap `ATTEMPTS` times in a row."""


def _prefix(kind: str, name: str) -> str:
    return f"api-{kind}-{hashlib.sha256(name.encode()).hexdigest()[:40]}."


class StoreRegistry:
    """The registry over `store` (module docstring). Thread-safe (the store is); a context manager
    whose close leaves the store open (its owner closes it)."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time, *,
                 on_repeat: Callable[[Execution], None] | None = None) -> None:
        """`on_repeat(indexed)` runs when `add_execution` finds the execution indexed already (a
        repeated StartExecution): the cloud engine completes a start cut short there
        (builder.serve.cloud_engine.CloudEngine.restart)."""
        self.store = store
        self.clock = clock
        self.on_repeat = on_repeat

    def close(self) -> None:
        """Nothing to release: the records are the store's."""

    def __enter__(self) -> StoreRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- registers ---------------------------------------------------------------------

    def _head(self, prefix: str) -> tuple[int, Any]:
        """(n, value) of the register's last revision; (0, None) when it has none."""
        n, value, start = 0, None, 1
        while True:
            keys = [f"{prefix}{i}" for i in range(start, start + WINDOW)]
            found = self.store.get_many(keys)
            for i, key in enumerate(keys, start):
                if key not in found:
                    return n, value
                n, value = i, json.loads(found[key])
            start += WINDOW

    def _put(self, prefix: str, n: int, value: Any, *, expires: int | None = None) -> bool:
        """Write revision `n` (create-if-absent): True if this call wrote it."""
        expires_at = expires if expires is not None else int(self.clock()) + FOREVER
        _, created = self.store.create(f"{prefix}{n}", json.dumps(value, separators=(",", ":")).encode(),
                                       workflow=REGISTRY, kind=Kind.MARKER, expires_at=expires_at)
        return created

    def _create(self, prefix: str, value: Any, *, expires: int | None = None) -> Any | None:
        """Make `value` current unless the register holds a live value: None if this call did,
        else the live value found (the winner of a race)."""
        for _ in range(ATTEMPTS):
            n, current = self._head(prefix)
            if current is not None:
                return current
            if self._put(prefix, n + 1, value, expires=expires):
                return None
        raise RegistryContention(f"registry entry {prefix}: {ATTEMPTS} concurrent writes won over this one")

    def _update(self, prefix: str, change: Callable[[Any], Any]) -> tuple[Any, Any]:
        """Apply `change(current)` as the next revision: (before, after). `change` returning
        the current value unchanged writes nothing."""
        for _ in range(ATTEMPTS):
            n, current = self._head(prefix)
            after = change(current)
            if after == current or self._put(prefix, n + 1, after):
                return current, after
        raise RegistryContention(f"registry entry {prefix}: {ATTEMPTS} concurrent writes won over this one")

    def _current(self, kind: str) -> list[Any]:
        """The live value of every register of `kind`, from one scan of the registry's records."""
        heads: dict[str, tuple[int, Any]] = {}
        marker = f"api-{kind}-"
        for record in self.store.records(REGISTRY):
            if not record.key.startswith(marker) or record.value is None:
                continue
            prefix, _, number = record.key.rpartition(".")
            n = int(number)
            if n > heads.get(prefix, (0, None))[0]:
                heads[prefix] = (n, json.loads(record.value))
        return [value for _, value in heads.values() if value is not None]

    # ---- state machines ----------------------------------------------------------------

    def add_machine(self, machine: Machine) -> Machine | None:
        """Create `machine` unless one of its name exists; returns the existing one then."""
        found = self._create(_prefix("m", machine.name), dataclasses.asdict(machine))
        return None if found is None else Machine(**found)

    def machine(self, name: str) -> Machine | None:
        value = self._head(_prefix("m", name))[1]
        return None if value is None else Machine(**value)

    def machines(self) -> list[Machine]:
        return sorted((Machine(**v) for v in self._current("m")), key=lambda m: (m.created, m.name))

    def update_machine(self, machine: Machine) -> None:
        """Replace the machine's definition and settings; its version counter stays the stored one."""
        def change(current: Any) -> Any:
            if current is None:
                return None
            return {**dataclasses.asdict(machine), "next_version": current["next_version"], "created": current["created"]}

        self._update(_prefix("m", machine.name), change)

    def delete_machine(self, name: str) -> bool:
        """Delete the machine with its versions and aliases; False if it did not exist."""
        before, _ = self._update(_prefix("m", name), lambda current: None)
        for version in self.versions(name):
            self.delete_version(name, version.version)
        for alias in self.aliases(name):
            self.delete_alias(name, alias.name)
        return before is not None

    # ---- versions and aliases -----------------------------------------------------------

    def publish(self, name: str, description: str | None, revision_wanted: str | None,
                now: float) -> tuple[Version | None, str]:
        """As Registry.publish: the next version, or the latest one when it holds the current
        revision; ("missing", "conflict") as the second item on refusal. The number is taken by
        a compare-and-swap of the machine's counter first, so two publishers never share one."""
        for _ in range(ATTEMPTS):
            n, current = self._head(_prefix("m", name))
            if current is None:
                return None, "missing"
            machine = Machine(**current)
            if revision_wanted is not None and revision_wanted != machine.revision:
                return None, "conflict"
            latest = self.versions(name)
            if latest and latest[0].revision == machine.revision:
                return latest[0], "existing"
            number = machine.next_version
            if not self._put(_prefix("m", name), n + 1, {**current, "next_version": number + 1}):
                continue
            version = Version(name, number, machine.definition, machine.role_arn, description, now, machine.revision)
            self._create(_prefix("v", f"{name}\0{number}"), dataclasses.asdict(version))
            return version, "new"
        raise RegistryContention(f"publish of {name}: {ATTEMPTS} concurrent writes won over this one")

    def version(self, machine: str, number: int) -> Version | None:
        value = self._head(_prefix("v", f"{machine}\0{number}"))[1]
        return None if value is None else Version(**value)

    def versions(self, machine: str) -> list[Version]:
        """Newest first."""
        found = (Version(**v) for v in self._current("v") if v["machine"] == machine)
        return sorted(found, key=lambda v: -v.version)

    def delete_version(self, machine: str, number: int) -> bool:
        before, _ = self._update(_prefix("v", f"{machine}\0{number}"), lambda current: None)
        return before is not None

    def put_alias(self, alias: Alias, *, create: bool) -> Alias | None:
        """Create (`create`) or replace an alias; on create, returns the existing one if any."""
        prefix = _prefix("a", f"{alias.machine}\0{alias.name}")
        if create:
            found = self._create(prefix, dataclasses.asdict(alias))
            return None if found is None else Alias(**found)
        self._update(prefix, lambda current: dataclasses.asdict(alias))
        return None

    def alias(self, machine: str, name: str) -> Alias | None:
        value = self._head(_prefix("a", f"{machine}\0{name}"))[1]
        return None if value is None else Alias(**value)

    def aliases(self, machine: str) -> list[Alias]:
        found = (Alias(**v) for v in self._current("a") if v["machine"] == machine)
        return sorted(found, key=lambda a: (a.created, a.name))

    def delete_alias(self, machine: str, name: str) -> bool:
        before, _ = self._update(_prefix("a", f"{machine}\0{name}"), lambda current: None)
        return before is not None

    # ---- tags and activities -----------------------------------------------------------

    def tag(self, arn: str, tags: dict[str, str]) -> None:
        self._update(_prefix("t", arn), lambda current: {**(current or {}), **tags})

    def untag(self, arn: str, keys: list[str]) -> None:
        self._update(_prefix("t", arn), lambda current: {k: v for k, v in (current or {}).items() if k not in keys}
                     or None)

    def tags(self, arn: str) -> dict[str, str]:
        return dict(sorted((self._head(_prefix("t", arn))[1] or {}).items()))

    def add_activity(self, name: str, now: float) -> float:
        """Create the activity unless it exists (AWS: CreateActivity is idempotent); its creation time."""
        found = self._create(_prefix("y", name), {"name": name, "created": now})
        return now if found is None else float(found["created"])

    def activity(self, name: str) -> float | None:
        value = self._head(_prefix("y", name))[1]
        return None if value is None else float(value["created"])

    def activities(self) -> list[tuple[str, float]]:
        return sorted(((v["name"], float(v["created"])) for v in self._current("y")), key=lambda a: (a[1], a[0]))

    def delete_activity(self, name: str) -> None:
        self._update(_prefix("y", name), lambda current: None)

    # ---- executions ----------------------------------------------------------------------

    def _expiry(self, started: float) -> int:
        """An execution's entry lives as long as its workflow's records (the store's TTL)."""
        return int(max(started, self.clock())) + self.store.ttl_seconds

    def add_execution(self, execution: Execution) -> tuple[Execution, bool]:
        """Index `execution` unless its workflow is indexed: (the indexed one, created?)."""
        indexed = dataclasses.replace(execution, status=None, stopped=None, error=None, cause=None, output=None)
        found = self._create(_prefix("e", execution.workflow), dataclasses.asdict(indexed),
                             expires=self._expiry(execution.started))
        if found is None:
            return execution, True
        existing = Execution(**found)
        if self.on_repeat is not None:
            self.on_repeat(existing)
        return existing, False

    def execution(self, workflow: str) -> Execution | None:
        value = self._head(_prefix("e", workflow))[1]
        return None if value is None else Execution(**value)

    def executions(self, machine: str | None = None, *, unended: bool = False) -> list[Execution]:
        """Newest first (AWS lists executions by start, newest first). Every execution counts as
        unended: its status is the store's to tell (module docstring)."""
        found = (Execution(**v) for v in self._current("e") if machine is None or v["machine"] == machine)
        return sorted(found, key=lambda e: (-e.started, e.workflow))

    def remember_end(self, workflow: str, status: str, stopped: float, *, error: str | None, cause: str | None,
                     output: str | None) -> None:
        """Nothing: the store's ending is read each time (module docstring)."""

    def forget_end(self, workflow: str, *, redriven: float) -> None:
        """A redrive: count it and its time on the execution's entry."""
        prefix = _prefix("e", workflow)
        for _ in range(ATTEMPTS):
            n, current = self._head(prefix)
            if current is None:
                return
            after = {**current, "redrives": current["redrives"] + 1, "redriven": redriven}
            if self._put(prefix, n + 1, after, expires=self._expiry(current["started"])):
                return
        raise RegistryContention(f"redrive count of {workflow}: {ATTEMPTS} concurrent writes won over this one")
