"""Redrive: re-run a failed workflow from the invocation that failed it, with that invocation's
recorded input, keeping everything that committed (Step Functions' RedriveExecution).

The failing invocation's failure record carries its history stamp (unum_entry.history: function,
fan-out position, input references, join set, lanes, the workflow's input for the entry), so the
invocation can be sent again exactly as it was first sent. `redrive`:

1. refuses a workflow that did not fail (succeeded, stopped, running, unknown), one whose failure
   no invocation recorded (a Fail state, the deadline watchdog, a runtime without stamps), and
   one past its retention (its objects may be gone: unum_entry.retention);
2. claims redrive number n with one create-if-absent (`naming.redrive_key(workflow, n)`, n = the
   redrives so far), which keeps the failure record it clears: of two redrives at once, one
   claims and the other is refused (it finds its claim, or a claim holding the same failure);
3. deletes the failure record (the workflow is running again) and invokes the failed invocation
   (attempt 0, marked redelivered, so its ingress reads its checkpoint first).

Exactly once: every invocation commits by create-if-absent, so whatever committed before is
kept and not re-run, and even the invocation sent again runs its handler to a commit only once
(a late duplicate of a redrive finds the checkpoint). The handler that runs is the code deployed
now (Step Functions' redrive does the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from unum_entry import naming
from unum_entry.codec import decode
from unum_entry.envelope import DataRef, Envelope, Frame, Gather
from unum_entry.errors import RetentionExpired, UnumError
from unum_entry.history import split
from unum_entry.stores.base import Kind

if TYPE_CHECKING:
    from unum_entry.invokers import Invoker
    from unum_entry.retention import Retention
    from unum_entry.stores.base import Store

MAX_REDRIVES = 1000  # Step Functions allows 1,000 redrives of one execution


class CannotRedrive(UnumError):
    """The workflow cannot be redriven (see `redrive`); the message says why, in one line."""


@dataclass(frozen=True)
class Redriven:
    """What `redrive` sent: redrive `number` (from 0) of `workflow`, re-invoking `function`."""

    workflow: str
    number: int
    function: str
    envelope: Envelope
    failure: dict[str, Any]  # the failure record it cleared (kept under the claim)


def redrive(store: Store, workflow: str, invoker: Invoker, *, retention: Retention | None = None) -> Redriven:
    """Redrive `workflow` (module docstring). Raises CannotRedrive with one line saying why not."""
    from unum_entry.outcome import STOP_FIELD, WorkflowStatus, read_outcome
    from unum_entry.retention import store_retention

    retention = retention or store_retention(store)
    key = naming.failure_key(workflow)
    raw = store.get(key)
    if raw is None:
        status = read_outcome(store, workflow).status
        if status is WorkflowStatus.UNKNOWN:
            raise CannotRedrive(f"no workflow {workflow!r} in this store (mistyped, or expired and collected)")
        raise CannotRedrive(f"workflow {workflow} did not fail ({status}): only a failed workflow is redriven")
    own, meta = split(raw)
    failure = decode(own)
    if isinstance(failure, dict) and failure.get(STOP_FIELD) is True:
        raise CannotRedrive(f"workflow {workflow} was stopped, not failed: start it again instead")
    if meta is None or meta.get("e") or not isinstance(meta.get("f"), str):
        raise CannotRedrive(f"workflow {workflow}'s failure was not recorded by an invocation (a Fail state, the "
                            "deadline watchdog or a runtime without history stamps): nothing to re-run")
    if isinstance(meta.get("w"), dict) and "$omitted" in meta["w"]:
        raise CannotRedrive(f"workflow {workflow} failed in its entry, whose input was too large to keep in its "
                            "history: start it again instead")
    deadline = int(meta.get("d") or min((r.expires_at for r in store.records(workflow)), default=0))
    try:
        retention.check(workflow, deadline)
    except RetentionExpired:
        raise CannotRedrive(f"workflow {workflow} is past its retention (its objects expire at {deadline}): "
                            "start it again instead") from None
    number = _claim(store, workflow, raw, deadline)
    store.delete([key])
    env = envelope_of(workflow, meta, deadline)
    invoker.invoke(meta["f"], env.to_wire())
    return Redriven(workflow=workflow, number=number, function=meta["f"], envelope=env,
                    failure=failure if isinstance(failure, dict) else {"Error": failure})


def _claim(store: Store, workflow: str, failure: bytes, deadline: int) -> int:
    """Create the next redrive claim, holding the failure record it clears; its number. A claim
    that already holds this very failure record (its stamp makes each one unique) means another
    redrive has it: refused, so two redrives at once send the invocation once."""
    for number in range(MAX_REDRIVES):
        claim = naming.redrive_key(workflow, number)
        held = store.get(claim)
        if held == failure:
            raise CannotRedrive(f"workflow {workflow} is being redriven already (redrive {number} has this failure)")
        if held is not None:
            continue
        if store.create(claim, failure, workflow=workflow, kind=Kind.MARKER, expires_at=deadline)[1]:
            return number
        raise CannotRedrive(f"workflow {workflow} is being redriven already (redrive {number} claimed meanwhile)")
    raise CannotRedrive(f"workflow {workflow} was redriven {MAX_REDRIVES} times: no more redrives")


def envelope_of(workflow: str, meta: dict[str, Any], deadline: int) -> Envelope:
    """The request that the stamped invocation was sent, again (attempt 0, redelivered)."""
    frames = tuple(Frame(int(i), int(n), int(it)) for i, n, it in meta.get("p", [[0, 1, 0]]))
    inputs: tuple[DataRef, ...]
    if "w" in meta:
        inputs = (DataRef(value=meta["w"]),)
    else:
        inputs = tuple(DataRef(ref=str(ref), item=item, path=path) for ref, item, path in meta.get("i", []))
    gather = Gather(str(meta["g"][0]), int(meta["g"][1])) if "g" in meta else None
    return Envelope(workflow=workflow, frames=frames, inputs=inputs, gathered=bool(meta.get("gd")) or gather is not None,
                    gather=gather, start="w" in meta, deadline=deadline, redelivered=True, lanes=int(meta.get("l", 0)))
