"""The checkpoint rule: one create-if-absent write commits an invocation's output, and it alone
tells a duplicate from a first execution (docs/coordination.md; NSDI'23, "Unum: A System for
Highly Scalable Serverless Workflows without a Centralized Orchestrator", §3.4 and §4).

- **Commit** (`commit`): an execution's output is written under the invocation's checkpoint
  name by one conditional create; the stored value (the first writer's) is the output from
  then on, for this execution and every other one of the invocation. A function that
  `commits_its_result` commits straight into the workflow's result record at its position.
- **A loser is a duplicate**: it continues with the winner's output, and of its successors
  invokes only those that have not committed (`not_yet_committed`), each marked `redelivered`
  so that its ingress reads its checkpoint first: a duplicate never sends a wave down the
  workflow.
- **Reading first** (`reads_checkpoint_first`): ingress reads the checkpoint before the handler
  only when it reads anyway, when the IR asks (`ingress_check`) or when a duplicate sent the
  request; an existing checkpoint skips the handler.
- **Stale witnesses** (`witnesses`, `committed_meanwhile`): what must still hold for an
  execution to do new work with effects (a step, unum_entry.steps): the workflow has not ended
  (unum_entry.outcome.Ending) and its invocation has not committed while it ran.

Nothing here deletes anything (unum_entry.retention), so every step is safe to repeat.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from unum_entry import naming
from unum_entry.codec import encode
from unum_entry.envelope import Envelope
from unum_entry.errors import StaleInvocation
from unum_entry.ir import FunctionIR
from unum_entry.outcome import Ending, create_result
from unum_entry.retention import Ledger
from unum_entry.stores.base import Guard, Joined, Joining, Kind, SetAdd, SetState, Store

if TYPE_CHECKING:
    from unum_entry.plan import Call
    from unum_entry.retention import Retention


def commits_its_result(ir: FunctionIR) -> bool:
    """A checkpointed function without instructions is always terminal: its commit IS the
    workflow's result record at its fan-out position (one write instead of checkpoint + result).
    Nothing reads such a function's checkpoint: it has no successors and joins nothing."""
    return ir.checkpoint and not ir.instructions


def commit_key(ir: FunctionIR, env: Envelope, invocation: str) -> str | None:
    """Where an execution's output is committed: its checkpoint (named `invocation`), the result
    record for a function that `commits_its_result`, or nowhere without a checkpoint."""
    if not ir.checkpoint:
        return None
    return naming.result_key(env.workflow, env.frames) if commits_its_result(ir) else invocation


def commit(store: Store, ir: FunctionIR, retention: Retention, env: Envelope, key: str | None,
           output: Any, *, stamp: bytes = b"") -> tuple[bytes, bool]:
    """Create the commit record `key` (see `commit_key`) unless it exists; returns (the committed
    bytes, created?). One conditional write; a loser gets the winner's bytes back. Raises
    UnencodableValue before writing anything when the output cannot be stored. `stamp` (the
    invocation's history, unum_entry.history) is stored after the value in the same write;
    `codec.decode` reads the value alone."""
    if key is None:
        return encode(output, what=_output_of(ir.function)), first_delivery(env)
    ledger = Ledger.of(env, retention)
    if commits_its_result(ir):  # (`key` is its result record: outcome.create_result writes it)
        return create_result(store, ledger, env.frames, result_record(env, output) + stamp)
    return ledger.create(store, key, encode(output, what=_output_of(ir.function)) + stamp, Kind.CHECKPOINT)


def commit_joining(store: Store, ir: FunctionIR, ledger: Ledger, key: str, output: Any,
                   join: SetAdd, *, stamp: bytes = b"") -> tuple[bytes, bool, SetState | None]:
    """`commit` of a fan-in branch's checkpoint `key` together with its join's first set add
    (`unum_entry.fanin.leaf_add`, which built `join` through the workflow's `ledger`) where the
    store makes both in one write (`Store.create_joining`): (the committed bytes, created?, the
    leaf shard right after the add - None when nothing was added: a loser, or a store that does
    not join in its creates; egress then adds)."""
    return ledger.create_joining(store, key, encode(output, what=_output_of(ir.function)) + stamp, join)


def commit_joining_many(store: Store, ir: FunctionIR,
                        commits: Sequence[tuple[Ledger, str, Any, SetAdd, bytes]]) -> list[Joined | Exception]:
    """`commit_joining` of each (ledger, key, output, join, stamp), all in one write where the
    store batches them (`Store.create_joining_many`): in order, what `commit_joining` returns
    for each, or the exception that failed it (an output that cannot be stored fails its own
    item, before anything is written; a failed write fails every item it held)."""
    what = _output_of(ir.function)
    results: list[Joined | Exception | None] = [None] * len(commits)
    creates: list[Joining] = []
    where: list[int] = []
    for i, (ledger, key, output, join, stamp) in enumerate(commits):
        try:
            creates.append(ledger.joining(key, encode(output, what=what) + stamp, join))
        except Exception as exc:
            results[i] = exc
            continue
        where.append(i)
    for i, made in zip(where, store.create_joining_many(creates), strict=True):
        results[i] = made
    return results  # type: ignore[return-value]  # every item set above


@functools.lru_cache(maxsize=1024)
def _output_of(function: str) -> str:
    """How an unencodable output is named in its error (once per function, not per commit)."""
    return f"output of function {function!r}"


def first_delivery(env: Envelope) -> bool:
    """What stands in for `created` of a function without a checkpoint (`"checkpoint": false`):
    no record tells its duplicates apart, so a delivery that is known to repeat one (sent
    `redelivered` by a duplicate upstream, or a retry: `attempt` > 0) is taken as a duplicate.
    Its egress then invokes only the successors that have not committed, marked `redelivered`
    (`not_yet_committed`: one batch read, paid by repeats only). A repeat the platform does not
    mark (the same event delivered twice) still runs as a first delivery; its successors'
    create-if-absent commits absorb it (each continues as a duplicate with the first output)."""
    return not (env.redelivered or env.attempt > 0)


def record_result(store: Store, retention: Retention, env: Envelope, value: Any, *, stamp: bytes = b"") -> None:
    """Write the workflow's result at the fan-out position of `env` (the first one wins), followed
    by `stamp` (when it was written: unum_entry.history.end_stamp)."""
    create_result(store, Ledger.of(env, retention), env.frames, result_record(env, value) + stamp)


def result_record(env: Envelope, value: Any) -> bytes:
    """A workflow result at the fan-out position of `env` (unum_entry.outcome reads it)."""
    return encode({"at": [f.index for f in env.frames[1:]], "of": [f.size for f in env.frames[1:]], "value": value},
                  what="workflow result")


def reads_checkpoint_first(env: Envelope, *, reads_anyway: bool, ingress_check: bool) -> bool:
    """Whether ingress reads the invocation's checkpoint before running the handler."""
    return reads_anyway or ingress_check or env.redelivered


def not_yet_committed(store: Store, calls: Sequence[Call]) -> list[Call]:
    """The duplicate path: of our successors, those whose checkpoint does not exist yet (one
    batch read), each marked `redelivered` so its ingress reads its checkpoint first. A
    successor that committed is never invoked again by a duplicate: its own delivery is
    retried by the platform until its egress finished, so nothing is lost. (A successor that
    `commits_its_result` is not seen here and gets one redelivered call, which its ingress
    answers from its result record.)"""
    if not calls:
        return []
    names = [naming.checkpoint_key(c.envelope.workflow, c.function, c.envelope.frames) for c in calls]
    committed = store.read(names)
    return [call.with_envelope(replace(call.envelope, redelivered=True))
            for call, name in zip(calls, names, strict=True) if name not in committed]


def committed_meanwhile(store: Store, checkpoint: str | None) -> None:
    """Raise StaleInvocation when the invocation committed while this execution was running (a
    slow duplicate must not perform a new effect; it continues with the committed output)."""
    if checkpoint is not None and store.get(checkpoint) is not None:
        raise StaleInvocation(f"{checkpoint} committed while this execution ran")


def witnesses(env: Envelope, checkpoint: str | None) -> list[Guard]:
    """What must still hold, checked inside the write that records new work, for an execution
    of the invocation `env` to do that work: the workflow has not ended, and the invocation has
    not committed (`checkpoint`; for a function that commits its result, the result key)."""
    guards = [Guard(key, present=False) for key in Ending.of(env.workflow).keys]
    if checkpoint is not None:
        guards.append(Guard(checkpoint, present=False))
    return list({g.key: g for g in guards}.values())  # one operation per item in a transaction
