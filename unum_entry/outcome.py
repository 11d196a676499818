"""The end of a workflow: how it is recorded, how it is recognised, and what it left.

- A workflow has ENDED once its root-level result record or its failure record exists
  (`Ending.keys`, `Ending.reached`): the one definition every part uses (the retention check in
  `Runtime`, the steps layer before running a step afresh and when it logs a compensation, the
  checkpoint rule's witnesses).
- Its failure record is built by `failure_record` alone: `{"Error", "Cause", "Function",
  "Invocation", "Attempts"}` plus, when user code raised, `"Trace"` (see `user_trace`).
- THE rule of every failure write: it is created only while the workflow has not ended. An
  invocation's (`record_failure`: `Runtime.end_in_failure`, a saga's abort) and the deadline
  watchdog's (`create_failure`) are one store transaction that creates the failure record
  (first failure wins) AND requires the root result key absent, so neither a claim (`end_workflow`,
  step 1) nor a root-level result can be followed by an invocation's failure: refused, the
  writer continues as a duplicate of the ending that won (False). The one unguarded failure
  write is a claimer's own step 3 (`end_workflow`), which needs its own claim present.
  Timeline it closes: a stop claims (a reader says STOPPED), a failing invocation writes its
  failure (before: created, a reader now says FAILED; now: refused), the stop writes its failure
  record (STOPPED for good). Every reader's sequence is monotone: once STOPPED always STOPPED,
  once FAILED always FAILED. Cost, on the failure path only: on DynamoDB a two-item
  `TransactWriteItems` (the Put and a ConditionCheck of the root result key) instead of one
  conditional `PutItem` (transactional items bill double: about 4 write units instead of 1 for a
  record under 1 KB); on Firestore one transaction reading two documents; on SQLite, the file
  and memory stores the same single local transaction with one key more read.
- `read_outcome` reads what it left: results, failure, what the store still retains; a workflow
  without a failure has SUCCEEDED once its results cover every fan-out position
  (`covers_every_position`, also what `python -m builder list` asks of the result records).
  The deadline watchdog's failure record (`WATCHDOG_FIELD`, unum_entry.watchdog) is the one
  failure that yields: results that cover every position win over it (`yields_to_results`).
- Every result record is written by `create_result`, so an ending from outside (a stop, an
  execution timeout: `end_workflow`) and the results are ordered by the store, whatever the
  workflow's shape: its claim and a result never both count, and every reader sees the same one.
- A stop reaches what the workflow started as other workflows: `stop_workflow` then stops each
  durable `context.invoke` child its durable logs name (`invoked_children`), by the same rule.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Final, TYPE_CHECKING

from unum_entry import naming
from unum_entry.codec import decode, encode
from unum_entry.envelope import ROOT
from unum_entry.frozen import ReadOnly
from unum_entry.retention import Ledger, Retention, store_retention
from unum_entry.stores.base import Kind, Store

if TYPE_CHECKING:
    from types import TracebackType

    from unum_entry.envelope import Frame

TRACE_FRAMES = 16         # at most this many frames of user code in a failure record (innermost kept)
TRACE_TEXT = 200          # at most this many characters per file name, function name or source line
_RUNTIME_DIR = str(Path(__file__).resolve().parent)  # frames under it are unum's, not the user's


class WorkflowStatus(enum.StrEnum):
    """What `read_outcome` found (a StrEnum: prints and compares as its value)."""

    SUCCEEDED = "succeeded"   # results cover every fan-out position
    FAILED = "failed"         # a failure record exists
    RUNNING = "running"       # objects exist, the results do not cover the workflow yet
    WAITING = "waiting"       # running, and a Task waits for its task-token callback (unum_entry.asl.callbacks.waiting)
    INTERRUPTED = "interrupted"  # no outcome, work pending, and no live `run` drives it (unum_entry.local.runs)
    STOPPED = "stopped"       # `python -m builder stop` recorded its failure record first (Step Functions: ABORTED)
    TIMED_OUT = "timed out"   # the deadline watchdog or an execution timeout ended it (Step Functions: TIMED_OUT)
    UNKNOWN = "unknown"       # nothing retained for this id


WATCHDOG_FIELD = "Watchdog"  # true in a failure record written by the deadline watchdog
ENDED = (WorkflowStatus.SUCCEEDED, WorkflowStatus.FAILED, WorkflowStatus.STOPPED, WorkflowStatus.TIMED_OUT)


def failed_status(failure: Mapping[str, Any]) -> WorkflowStatus:
    """The status of a workflow whose (decoded) failure record is `failure` and stands (it did
    not yield to results): STOPPED when `stop_workflow` wrote it, TIMED_OUT when the deadline
    watchdog or an execution timeout (`TIMEOUT_FIELD`, unum_entry.watchdog) did, else FAILED.
    The one place the word is chosen (`list`, `inspect`, UI, `run`)."""
    if failure.get(STOP_FIELD) is True:
        return WorkflowStatus.STOPPED
    timed_out = failure.get(WATCHDOG_FIELD) is True or failure.get(TIMEOUT_FIELD) is True
    return WorkflowStatus.TIMED_OUT if timed_out else WorkflowStatus.FAILED


def yields_to_results(failure: Mapping[str, Any] | None, complete: bool) -> bool:
    """Whether `failure` (a decoded failure record) gives way to results that cover every
    position (`complete`): only the watchdog's does, since it may race a branch that started
    before the deadline and commits the last result after it (unum_entry.watchdog)."""
    return complete and failure is not None and failure.get(WATCHDOG_FIELD) is True


class Ending(ReadOnly):
    """The two records whose presence means a workflow has ended (one of them exists or neither)."""

    __slots__ = ("result", "failure")

    result: Final[str]    # the root-level result record
    failure: Final[str]   # the failure record

    def __init__(self, result: str, failure: str) -> None:
        self.result = result
        self.failure = failure

    @classmethod
    def of(cls, workflow: str) -> Ending:
        return cls(naming.result_key(workflow, ROOT), naming.failure_key(workflow))

    @property
    def keys(self) -> tuple[str, str]:
        return (self.result, self.failure)

    def reached(self, found: Container[str]) -> bool:
        """Whether the workflow has ended, given the keys `found` by a read of (at least) `keys`."""
        return self.result in found or self.failure in found


def user_trace(error: BaseException) -> tuple[dict[str, Any], ...]:
    """The frames of the user's code that `error` came through, innermost last, as
    `{"File": str, "Line": int, "Function": str, "Code": str}` (Code: the source line, may be
    ""): frames of unum's own modules are left out; at most TRACE_FRAMES frames (the innermost),
    each string at most TRACE_TEXT characters. Empty when no frame is the user's."""
    import traceback  # lazy: only a failing handler pays for it

    tb: TracebackType | None = error.__traceback__
    frames = [f for f in traceback.extract_tb(tb) if not str(Path(f.filename).resolve()).startswith(_RUNTIME_DIR)]
    return tuple({"File": f.filename[-TRACE_TEXT:], "Line": int(f.lineno or 0), "Function": f.name[:TRACE_TEXT],
                  "Code": (f.line or "")[:TRACE_TEXT]} for f in frames[-TRACE_FRAMES:])


def failure_record(error: str | None, cause: str | None, *, function: str, invocation: str, attempts: int,
                   trace: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    """THE failure record of a workflow: what failed, where, after how many attempts, and (when
    user code raised) through which of its frames (`Trace`, omitted when empty)."""
    record: dict[str, Any] = {"Error": error, "Cause": cause, "Function": function, "Invocation": invocation,
                              "Attempts": attempts}
    if trace:
        record["Trace"] = list(trace)
    return record


STOP_FIELD = "Stopped"  # true in a failure record written by `stop_workflow` (status STOPPED)
TIMEOUT_FIELD = "TimedOut"  # true in the failure record of an execution timeout (status TIMED_OUT)
CLAIMING = (STOP_FIELD, TIMEOUT_FIELD)  # endings that claim the result record (`end_workflow`)


def stop_workflow(store: Store, workflow: str, *, error: str | None = None, cause: str | None = None) -> bool:
    """Stop `workflow` unless it has ended (the first ending wins): `end_workflow` with a
    failure record marked `STOP_FIELD`. Returns whether this call stopped it. What in-flight
    invocations do afterwards: docs/history.md ("Stop").

    Then, when `workflow` reads stopped (this call stopped it, or an earlier stop that may have
    died before this step did), every execution its durable functions started with
    `context.invoke` and whose outcome they have not received (`invoked_children`: each runs as
    its own workflow, unlike a `.sync` nested machine, which runs under its parent's id) is
    stopped the same way, depth first: each child's ending is decided by the store alone (a
    child whose result landed first keeps it; one stopped already is not stopped again)."""
    record = failure_record(error or "Unum.Stopped", cause or "stopped by request", function="",
                            invocation="", attempts=0)
    record[STOP_FIELD] = True
    stopped = end_workflow(store, workflow, record)
    pending = [(workflow, 0)] if stopped or _reads_stopped(store, workflow) else []
    while pending:
        parent, depth = pending.pop()
        for child in invoked_children(store, parent) if depth < MAX_INVOKE_DEPTH else ():
            if end_workflow(store, child, record) or _reads_stopped(store, child):
                pending.append((child, depth + 1))
    return stopped


MAX_INVOKE_DEPTH = 32  # nested `context.invoke`s a stop follows at most (a guard against a malformed log)
_DURABLE_LOG = naming.durable_log_key("", 0)[:2]  # every durable log entry's key starts so ("d-")


def _reads_stopped(store: Store, workflow: str) -> bool:
    return read_outcome(store, workflow).status is WorkflowStatus.STOPPED


def invoked_children(store: Store, workflow: str) -> list[str]:
    """The workflows `workflow`'s durable executions started with `context.invoke` whose
    outcome their logs do not hold yet, without duplicates: a CHAINED_INVOKE operation's START
    in a durable log entry (unum_entry.durable_functions.log: `{"u": [OperationUpdate, …]}`,
    checkpointed before the target is sent, so a child sent but not yet started is found too)
    with no SUCCEED / FAIL update nor completion (`{"c": [{"Id": …}, …]}`: an invoke refused at
    once started no workflow). Child `naming.invoked_workflow(workflow, operation)`. One scan of
    the workflow's step records; empty for a workflow without durable functions."""
    import json  # lazy: only a stop reads durable logs

    started: dict[str, None] = {}
    completed: set[str] = set()
    for record in store.tally(workflow, (Kind.STEP,)).records:
        if record.kind is not Kind.STEP or record.value is None or not record.key.startswith(_DURABLE_LOG):
            continue
        try:
            entry = json.loads(record.value)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        updates = [u for u in entry.get("u") or () if isinstance(u, dict) and u.get("Id")]
        started.update(dict.fromkeys(str(u["Id"]) for u in updates
                                     if u.get("Type") == "CHAINED_INVOKE" and u.get("Action") == "START"))
        completed.update(str(u["Id"]) for u in updates if u.get("Action") in ("SUCCEED", "FAIL"))
        completed.update(str(c["Id"]) for c in entry.get("c") or () if isinstance(c, dict) and c.get("Id"))
    return [naming.invoked_workflow(workflow, op) for op in started if op not in completed]


def end_workflow(store: Store, workflow: str, record: Mapping[str, Any], *, absent: Sequence[str] = ()) -> bool:
    """End `workflow` from outside its functions with the failure `record` (marked with one of
    `CLAIMING`: a stop, an execution timeout) unless it has ended; returns whether this call
    ended it. `absent`: keys the claim also requires absent (an execution timeout: the next
    redrive's claim, so a timer of an earlier attempt never ends a later one). The store orders this ending and the workflow's results (timeline below); no read
    made before a write decides anything:

    1. the **claim** (`claim_result`): the workflow's root-level result record is created
       holding `record` (kind MARKER), in one transaction that also requires the failure record
       absent. From then on no result record can be written (`create_result`: a root-level
       result finds its key taken, a branch's result requires that key absent), so the results
       are fixed; a root-level result that came first makes the claim lose (refused);
    2. the results are read once: if the branches' results that came before the claim cover
       every position, the workflow had succeeded, and this ending yields (refused; the claim
       stays and yields to them for every reader: `read_outcome`);
    3. the workflow's failure record, which every reader goes by (`_claimer_failure`: the one
       failure write without the root-key guard, since the key holds its own claim). No
       invocation's failure can land between the writes (every other failure write requires the
       root result key absent: module docstring); an ending that died between them reads as
       ended (`read_outcome`) and is completed by calling it again.

    Timeline of the race it closes (a map whose branches write the results, a stop): the stop
    reads "running"; the last branch writes its result (a reader now says succeeded); the stop
    writes. Now the stop's claim either comes first (the last result is refused: stopped) or
    after (step 2 sees every result: succeeded), never both."""
    ending = Ending.of(workflow)
    found = store.read(ending.keys)
    if ending.failure in found:
        return False
    if ending.result in found:  # a result, or the claim of an ending that died before its failure record
        claimed = found[ending.result].value
        if claimed is None or not is_claim(decode(claimed)):
            return False
    elif not claim_result(store, workflow, record, absent=absent):
        return False
    if results_complete(store, workflow):
        return False
    return _claimer_failure(store, workflow, record)


def _claimer_failure(store: Store, workflow: str, record: Mapping[str, Any]) -> bool:
    """`end_workflow`'s step 3: the failure record of the ending whose claim holds the root
    result key (create-if-absent, no guard: the guard every other failure write carries would
    find that claim). Returns whether this call wrote it."""
    ledger = Ledger.bounded(workflow, 0, store_retention(store))
    return ledger.create(store, ledger.failure(), encode(dict(record)), Kind.FAILURE)[1]


def results_complete(store: Store, workflow: str) -> bool:
    """Whether `workflow`'s result records cover every fan-out position (one scan of its results)."""
    tally = store.tally(workflow, (Kind.RESULT,))
    return covers_every_position(decode(r.value) for r in tally.records
                                 if r.kind is Kind.RESULT and r.value is not None)


def create_result(store: Store, ledger: Ledger, frames: Sequence[Frame], record: bytes) -> tuple[bytes, bool]:
    """THE write of a workflow's result record at the fan-out position `frames` (`record`: its
    bytes, unum_entry.checkpoint.result_record): create-if-absent, the first one wins; returns
    (the stored bytes, created?). A claim (`end_workflow`) and a result are ordered by the store:

    - at the root position the claim holds the very key, so the create finds it taken;
    - at a branch position the create is one transaction that also requires the root record
      absent (one guard more than a plain create: on DynamoDB a two-item transaction). A branch
      result after a claim is refused: nothing is stored and the claim's bytes come back (a
      result record with no value), as at the root; one before it is seen by the claim's
      ending, which yields to results that cover every position."""
    from unum_entry.errors import GuardFailed
    from unum_entry.stores.base import Guard

    key = ledger.result(frames)
    if len(frames) <= 1:
        return ledger.create(store, key, record, Kind.RESULT)
    root = Ending.of(ledger.workflow).result
    try:
        return store.transact(key, record, (), workflow=ledger.workflow, kind=Kind.RESULT,
                              guards=[Guard(root, present=False)], expires_at=ledger.expires_at(Kind.RESULT))
    except GuardFailed:
        return store.get(root) or encode({"at": [], "of": [], "value": None}), False


def claim_result(store: Store, workflow: str, record: Mapping[str, Any], *, absent: Sequence[str] = ()) -> bool:
    """Create the claim of `workflow`'s root result record (`end_workflow`, step 1) holding
    `record`, or find an earlier claim; False when a result, a failure or one of `absent` came
    first. The claim is
    shaped as a root-level result record with no value (`{"at": [], "of": [], "value": None, …}`),
    so a terminal invocation that loses its result write to it continues as a duplicate of nothing."""
    from unum_entry.errors import GuardFailed
    from unum_entry.stores.base import Guard

    ending = Ending.of(workflow)
    ledger = Ledger.bounded(workflow, 0, store_retention(store))
    claim = encode({"at": [], "of": [], "value": None, **record})
    try:
        stored, created = store.transact(ending.result, claim, (), workflow=workflow, kind=Kind.MARKER,
                                         guards=[Guard(key, present=False) for key in (ending.failure, *absent)],
                                         expires_at=ledger.expires_at(Kind.MARKER))
    except GuardFailed:
        return False
    return created or is_claim(decode(stored))


def is_claim(value: Any) -> bool:
    """Whether a (decoded) record found at a workflow's root result key is a claim (`end_workflow`)."""
    return isinstance(value, dict) and "Error" in value and any(value.get(f) is True for f in CLAIMING)


def record_failure(store: Store, workflow: str, record: Mapping[str, Any], *, stamp: bytes = b"",
                   deadline: int = 0, retention: Retention | None = None) -> bool:
    """An invocation's failure: write the workflow's failure record, followed by `stamp` (the
    failing invocation's history, unum_entry.history), unless the workflow has ended
    (`create_failure`: a failure record, a claim or a root-level result exists). Returns whether
    this call wrote it; False: the invocation continues as a duplicate of the ending that won.
    Its expiry comes from the workflow's ledger (unum_entry.retention: `deadline`, or when the
    caller does not know it, the bound `now + TTL`; `retention`: the store's by default)."""
    ledger = Ledger.bounded(workflow, deadline, retention or store_retention(store))
    return create_failure(store, ledger, encode(dict(record)) + stamp)


def create_failure(store: Store, ledger: Ledger, value: bytes) -> bool:
    """THE failure write of every writer but a claimer (module docstring): one transaction that
    creates `ledger`'s failure record holding `value` (first failure wins) and requires the
    workflow's root result key absent (no claim, no root-level result). Returns whether this call
    created it; False when a failure record exists or the guard refused (nothing written)."""
    from unum_entry.errors import GuardFailed
    from unum_entry.stores.base import Guard

    root = Ending.of(ledger.workflow).result
    try:
        return store.transact(ledger.failure(), value, (), workflow=ledger.workflow, kind=Kind.FAILURE,
                              guards=[Guard(root, present=False)], expires_at=ledger.expires_at(Kind.FAILURE))[1]
    except GuardFailed:
        return False


@dataclass(frozen=True)
class RunResult:
    """Results (ordered by fan-out position), the failure record if any, how many other objects
    (checkpoints, set shards, step records) the store retains for the workflow, by kind, and
    when the last of them expires (unum_entry.retention)."""

    workflow_id: str
    results: list[Any]
    failure: dict[str, Any] | None
    pending: dict[str, int] = field(default_factory=dict)
    complete: bool = False  # the results cover every position of the fan-out tree
    retained_until: int | None = None

    @property
    def result(self) -> Any:
        """The single result of a workflow with one output (a list when there are several)."""
        return self.results[0] if len(self.results) == 1 else self.results

    @property
    def status(self) -> WorkflowStatus:
        if self.failure is not None:
            return failed_status(self.failure)
        if self.complete:
            return WorkflowStatus.SUCCEEDED
        return WorkflowStatus.RUNNING if self.pending or self.results else WorkflowStatus.UNKNOWN


def read_outcome(store: Store, workflow_id: str) -> RunResult:
    """Scan the store for one workflow's objects (O(table) on DynamoDB: for tools, not runtime)."""
    results: list[dict[str, Any]] = []
    failure = None
    root = Ending.of(workflow_id).result
    claim = None  # a claim (end_workflow): the failure record of an ending that died half-way
    tally = store.tally(workflow_id, (Kind.RESULT, Kind.FAILURE), (root,))
    pending: Counter[str] = Counter({kind.value: count for kind, count in tally.counts.items()})
    for record in tally.records:  # in the order they were made, where the store knows it
        if record.kind is Kind.RESULT and record.value is not None:
            results.append(decode(record.value))
        elif record.kind is Kind.FAILURE and record.value is not None:
            failure = decode(record.value)
        elif record.key == root and record.value is not None and is_claim(found := decode(record.value)):
            claim = {k: v for k, v in found.items() if k not in ("at", "of", "value")}
        else:
            continue
        pending[record.kind.value] -= 1  # counted as what it is, not as pending
    pending = +pending  # (kinds whose every record was a result, failure or claim: left out)
    retained_until = tally.latest_expiry
    results.sort(key=lambda r: r["at"])
    complete = covers_every_position(results)
    if failure is None and not complete:  # a claim yields to results: they came before it (end_workflow)
        failure = claim
    if yields_to_results(failure, complete):
        failure = None
    if failure is not None and any(failure.get(f) is True for f in CLAIMING):  # stopped / timed out: no result
        results, complete = [], False
    return RunResult(workflow_id=workflow_id, results=[r["value"] for r in results], failure=failure,
                     pending=dict(pending), complete=complete, retained_until=retained_until)


def finished(store: Store, workflow: str) -> bool:
    """Whether `workflow` has an outcome by any rule: a failure record, or results that cover
    every fan-out position (a workflow whose results are all per-branch has no root-level
    record for `Ending` to find). One scan of the workflow's objects (`read_outcome`): for the
    rare path past a workflow's `deadline - margin` (Runtime._may_run), never a hot path."""
    outcome = read_outcome(store, workflow)
    return outcome.failure is not None or outcome.complete


def covers_every_position(results: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a workflow's result records (decoded; each `{"at": [i1, i2, …], "of": [n1, n2, …],
    "value": …}`, `of` absent for a root-level result) cover its whole fan-out tree.

    A result at fan-out position (i1 of n1, i2 of n2, …) covers 1/(n1·n2·…) of the tree, and
    positions are unique (one result record per position), so the workflow's results are
    complete exactly when the shares add up to 1. No results cover nothing (False)."""
    share = sum((Fraction(1, _product(r.get("of", [1] * len(r["at"])))) for r in results), Fraction(0))
    return share == 1


def _product(sizes: list[int]) -> int:
    total = 1
    for size in sizes:
        total *= size
    return total
