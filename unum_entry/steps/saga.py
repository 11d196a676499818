"""The compensation saga: a workflow's compensation log and the chain that undoes it.

Compensations registered by completed steps go to a per-workflow log in completion order
(`append_compensation`); when the workflow ends in failure (`ctx.abort`, a handler's last failed
attempt, a compiled Fail state), `start_compensations` drives a chain of compensation
invocations through the invoker, newest first, each run in the code of the function that ran
the step (unum_entry.steps.layer.run_compensation), each itself a step (recorded, so it runs
once). Nothing is deleted: the log lives until its expiry like everything else
(unum_entry.retention).
"""

from __future__ import annotations

from collections.abc import Mapping

from typing import Any, Final

from unum_entry import naming
from unum_entry.codec import decode, encode
from unum_entry.envelope import DataRef, Envelope
from unum_entry.frozen import ReadOnly
from unum_entry.invokers import Invoker
from unum_entry.outcome import Ending, is_claim, record_failure
from unum_entry.retention import Ledger, store_retention
from unum_entry.stores.base import Kind, Store

COMPENSATION_FIELD = "$unum_compensation"
_PROBE = 16                  # at most this many compensation-log keys per batch read (1, 2, 4, … 16)


def append_compensation(store: Store, workflow: str, data: bytes, identity: str, *,
                        deadline: int = 0) -> tuple[int, bool]:
    """Append a compensation entry (for the effect `identity`) to the workflow's log, once.
    Returns (index, aborted?); index -1 when the workflow already succeeded (nothing will ever
    be compensated, nothing is appended). Entries are stamped by the workflow's ledger
    (`deadline`: the workflow's, 0 when not known: unum_entry.retention.Ledger.bounded).

    The log is the keys `compensation_key(workflow, 0, 1, …)` filled by create-if-absent in
    order, so the filled keys form a prefix and index order is a completion order. An entry for
    the same effect already in the log is returned instead of appended twice (a replayed step).
    `aborted` says the workflow has a failure record and we appended the entry (a replay that
    finds its entry already logged leaves it to whoever appended it). It is read again *after* our entry exists:
    an abort reads the log only after writing its failure record, so either its read sees our
    entry (its chain compensates it) or our read sees its failure (we compensate ourselves) —
    or both, harmlessly: a compensation runs once per index.
    """
    ending = Ending.of(workflow)
    failure, result = ending.failure, ending.result
    aborted = False
    extra = [failure, result]
    start, size = 0, 1
    while True:
        keys = [naming.compensation_key(workflow, i) for i in range(start, start + size)]
        found = store.get_many([*keys, *extra])
        if extra:
            if _succeeded(found, result, failure):
                return -1, False
            aborted, extra = _ended_otherwise(found, result, failure), []
        gap = None
        for i, key in enumerate(keys, start):
            if key not in found:
                gap = i
                break
            if decode(found[key]).get("e") == identity:
                # A replay of a logged step: whoever appended the entry answered for it (the
                # abort's chain, or that appender's own compensation), so an abort is not ours
                # to act on; compensating here would run it out of the chain's order.
                return i, False
        if gap is not None:
            break
        start, size = start + size, min(2 * size, _PROBE)
    index = gap
    while True:
        stored, created = _ledger(store, workflow, deadline).create(store, naming.compensation_key(workflow, index),
                                                                    data, Kind.COMPENSATION)
        if created:
            after = store.get_many([failure, result])
            if _succeeded(after, result, failure):
                # The workflow succeeded meanwhile: nothing will be compensated. The entry stays
                # until its expiry like everything else (nothing is deleted before it).
                return -1, False
            return index, aborted or _ended_otherwise(after, result, failure)
        if decode(stored).get("e") == identity:
            return index, False  # a concurrent replay appended it: it answers for it (above)
        index += 1


def _succeeded(found: Mapping[str, bytes], result: str, failure: str) -> bool:
    """Whether the ending records `found` (a read of the root result and failure keys) say the
    workflow succeeded: a root-level result, and no failure. A stop's or an execution timeout's
    claim of the result key (unum_entry.outcome.end_workflow) is no result: the workflow ended
    without success, even while the claimer's failure record is not written yet."""
    return result in found and failure not in found and not is_claim(decode(found[result]))


def _ended_otherwise(found: Mapping[str, bytes], result: str, failure: str) -> bool:
    """Whether they say the workflow ended without success: a failure record (an abort, a
    stop, a timeout) or a claim whose failure record is not written yet. A step that registers
    its compensation then compensates itself (`append_compensation`'s `aborted`), as after an
    abort: timeline closed — a step's record commits, a stop claims, the step registers; read as a
    success it was never compensated, although the handler's abort that follows runs the chain."""
    return failure in found or (result in found and is_claim(decode(found[result])))


def _first_gap(store: Store, workflow: str) -> int:
    """The number of entries in the log (the index of its first missing key). One read of one
    key when the log is empty, which is every workflow that registered no compensation."""
    start, size = 0, 1
    while True:
        keys = [naming.compensation_key(workflow, i) for i in range(start, start + size)]
        found = store.get_many(keys)
        for i, key in enumerate(keys, start):
            if key not in found:
                return i
        start, size = start + size, min(2 * size, _PROBE)


def start_compensations(store: Store, invoker: Invoker, workflow: str) -> int:
    """THE workflow-abort entry point; call it after the workflow's failure record exists. It
    invokes the newest registered compensation; each compensation invokes the next older one
    (steps that register later compensate themselves, see `_append`). Idempotent: calling it
    again (a retry of the aborting invocation) re-drives the chain and every compensation still
    runs once. Returns how many compensations the chain covers (0: nothing to undo; then it
    cost one read of one key)."""
    count = _first_gap(store, workflow)
    if count == 0:
        return 0
    newest = decode(store.get(naming.compensation_key(workflow, count - 1)) or encode({}))
    if "f" not in newest:
        return 0
    invoker.invoke(newest["f"], compensation_envelope(workflow, count - 1, 0, count - 1).to_wire())
    return count


def abort_workflow(store: Store, invoker: Invoker, workflow: str, record: Mapping[str, Any]) -> None:
    """Record the workflow's failure (unum_entry.outcome.failure_record, first one wins) and
    start its compensations."""
    record_failure(store, workflow, record)
    start_compensations(store, invoker, workflow)


# ---- compensation invocations ------------------------------------------------------------------

class CompensationRequest(ReadOnly):
    """Run compensation `index`, then continue down to `stop`; entries stop..top are this chain's."""

    __slots__ = ("index", "stop", "top")

    index: Final[int]
    stop: Final[int]
    top: Final[int]

    def __init__(self, index: int, stop: int, top: int) -> None:
        self.index = index
        self.stop = stop
        self.top = top


def compensation_envelope(workflow: str, index: int, stop: int, top: int) -> Envelope:
    """A compensation request travels as an ordinary envelope (every platform and invoker
    carries it, retries it and gives up on it like any delivery) whose inline input is marked."""
    request = {COMPENSATION_FIELD: {"index": index, "stop": stop, "top": top}}
    return Envelope(workflow=workflow, inputs=(DataRef(value=request),))


def compensation_request(env: Envelope) -> CompensationRequest | None:
    """The request an envelope carries, or None for an ordinary invocation (one dict lookup)."""
    if env.start or len(env.inputs) != 1 or not env.inputs[0].inline:
        return None
    value = env.inputs[0].value
    if not isinstance(value, dict) or COMPENSATION_FIELD not in value:
        return None
    raw = value[COMPENSATION_FIELD]
    return CompensationRequest(index=int(raw["index"]), stop=int(raw["stop"]), top=int(raw["top"]))


def advance(store: Store, invoker: Invoker, workflow: str, request: CompensationRequest) -> None:
    """After compensation `request.index` ran (or was given up on): invoke the next older one.

    At the end of the chain nothing is deleted: an aborted workflow keeps its log entries and
    compensation records until their TTL, because a replay of a step (say, a retry of the
    aborting invocation) must still find its entry — by the effect's id — and the entry's
    compensation record, or it would compensate the same effect twice."""
    if request.index > request.stop:
        older = request.index - 1
        key = naming.compensation_key(workflow, older)
        # "Passed on" marker (step 1 of this compensation's journal): a duplicate of this
        # request that finds it stops instead of re-driving the rest of the chain, which would
        # otherwise grow with every duplicate delivery at every link.
        passed = naming.step_key(naming.compensation_invocation(workflow, request.index), 1)
        found = store.get_many([key, passed])
        raw = found.get(key)
        if raw is not None and passed not in found:
            invoker.invoke(decode(raw)["f"], compensation_envelope(workflow, older, request.stop, request.top).to_wire())
            _ledger(store, workflow, 0).create(store, passed, b"", Kind.STEP)


def _ledger(store: Store, workflow: str, deadline: int) -> Ledger:
    """The workflow's ledger; compensation requests carry no deadline, so there (0) its bound."""
    return Ledger.bounded(workflow, deadline, store_retention(store))
