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
3. deletes the failure record (the workflow is running again), arms the workflow's timers again
   (`rearm`: the execution timeout - TimeoutSeconds counted from this redrive - and the deadline
   watchdog, under names of redrive n, unum_entry.watchdog "After a redrive"), then invokes the
   failed invocation (attempt 0, marked redelivered, so its ingress reads its checkpoint first).
   Timers first: on the embedded engine's journal (a prefix of what was sent survives a kill) a
   redrive killed before its invocation was journaled left at most its timers, which do not count
   as work to resume, so `continue_dead_redrive` continues it and arms them again (by name: once);
4. sends again the fan-out items that noticed the failure and did not run (`_resend_dropped`:
   the embedded engine drops them; unum_entry.ingress drops those that read anyway), by
   re-delivering as a duplicate the committed invocation that sends them — a duplicate's
   egress sends only the successors that never committed.

Exactly once: every invocation commits by create-if-absent, so whatever committed before is
kept and not re-run, and even the invocation sent again runs its handler to a commit only once
(a late duplicate of a redrive finds the checkpoint). The handler that runs is the code the
invoker reaches: on the embedded engine and in `serve`, the workflow's own version
(docs/versions.md); Step Functions' redrive runs the code deployed now.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from unum_entry import naming
from unum_entry.codec import decode
from unum_entry.envelope import DataRef, Envelope, Frame, Gather
from unum_entry.errors import RetentionExpired, UnumError
from unum_entry.history import REDRIVE_STRIDE, split
from unum_entry.stores.base import Kind

if TYPE_CHECKING:
    from unum_entry.invokers import Invoker
    from unum_entry.retention import Retention
    from unum_entry.stores.base import Store
    from unum_entry.watchdog import Rearm

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


def redrive(store: Store, workflow: str, invoker: Invoker, *, retention: Retention | None = None,
            adopt: bool = False, rearm: Rearm | None = None) -> Redriven:
    """Redrive `workflow` (module docstring). Raises CannotRedrive with one line saying why not.
    `rearm`: the timers its entry function arms at a start (`watchdog.Rearm.of(loaded workflow)`),
    armed again for this redrive; None arms none (the redriven run is bounded by nothing but a
    timer still pending from before).
    `adopt`: the caller holds the workflow's exclusive driver lease (the embedded engine's
    unum_entry.local.runs), so a claim that already holds this failure record is a redrive that
    died between its claim and its clearing of the failure record (kill -9): it is continued
    under the same number (what it would have sent is sent, under the same name) instead of
    refused; so is one that died after clearing it, before what it sent was journaled (no
    failure record, no outcome, its claim the latest: `continue_dead_redrive`)."""
    from unum_entry.outcome import STOP_FIELD, WorkflowStatus, read_outcome
    from unum_entry.retention import store_retention

    retention = retention or store_retention(store)
    key = naming.failure_key(workflow)
    raw = store.get(key)
    if raw is None and adopt:
        raw = _cleared_by_dead_redrive(store, workflow)
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
    if meta.get("k") and (len(meta.get("p") or ((0, 1, 0),)) > 1 or "g" in meta or meta.get("gd")):
        raise CannotRedrive(f"workflow {workflow} failed inside a Map or Parallel (or at its join): unum redrives "
                            "a failure decided at the top level only; start it again instead")
    number = _claim(store, workflow, raw, deadline, adopt=adopt)
    store.delete([key])
    if rearm is not None:
        from unum_entry.watchdog import Watchdog

        Watchdog(rearm.function, store, invoker, retention, enabled=rearm.watchdog,
                 timeout_seconds=rearm.timeout_seconds, time_scale=rearm.time_scale).arm_redriven(workflow, deadline,
                                                                                                  number)
    env = envelope_of(workflow, meta, deadline)
    if meta.get("k"):  # its checkpoint holds the decision to fail: run it again under a name of its own
        env = replace(env, frames=(*env.frames[:-1], redriven_frame(env.frames[-1], number)))
    invoker.invoke(meta["f"], env.to_wire())
    _resend_dropped(store, workflow, invoker, deadline, meta)
    return Redriven(workflow=workflow, number=number, function=meta["f"], envelope=env,
                    failure=failure if isinstance(failure, dict) else {"Error": failure})


def continue_dead_redrive(store: Store, workflow: str, invoker: Invoker, *, retention: Retention | None = None,
                          rearm: Rearm | None = None) -> Redriven | None:
    """For a caller that holds the workflow's driver lease and found nothing journaled to resume
    (`run --resume`): a redrive killed after it cleared the failure record and before what it
    sent was journaled left the workflow with no failure, no work and its claim; that redrive is
    continued (`redrive(adopt=True)`: under its number, a duplicate send is a redelivery). None
    when the workflow has ended or no redrive cleared a failure of it."""
    if store.get(naming.failure_key(workflow)) is not None or _cleared_by_dead_redrive(store, workflow) is None:
        return None
    return redrive(store, workflow, invoker, retention=retention, adopt=True, rearm=rearm)


def _cleared_by_dead_redrive(store: Store, workflow: str) -> bytes | None:
    """The failure record the workflow's latest redrive claim holds, while the workflow has no
    failure record and no outcome (that redrive cleared it; a caller holding the driver lease
    knows it is dead): what `adopt` continues. None otherwise."""
    from unum_entry.outcome import finished

    latest = None
    for number in range(MAX_REDRIVES):
        held = store.get(naming.redrive_key(workflow, number))
        if held is None:
            break
        latest = held
    if latest is None or finished(store, workflow):
        return None
    return latest


def _claim(store: Store, workflow: str, failure: bytes, deadline: int, *, adopt: bool = False) -> int:
    """Create the next redrive claim, holding the failure record it clears; its number. A claim
    that already holds this very failure record (its stamp makes each one unique) means another
    redrive has it: refused, so two redrives at once send the invocation once — unless `adopt`
    (the caller holds the driver lease, so that other redrive is dead): its number."""
    for number in range(MAX_REDRIVES):
        claim = naming.redrive_key(workflow, number)
        held = store.get(claim)
        if held == failure and adopt:
            return number
        if held == failure:
            raise CannotRedrive(f"workflow {workflow} is being redriven already (redrive {number} has this failure)")
        if held is not None:
            continue
        if store.create(claim, failure, workflow=workflow, kind=Kind.MARKER, expires_at=deadline)[1]:
            return number
        raise CannotRedrive(f"workflow {workflow} is being redriven already (redrive {number} claimed meanwhile)")
    raise CannotRedrive(f"workflow {workflow} was redriven {MAX_REDRIVES} times: no more redrives")


def _resend_dropped(store: Store, workflow: str, invoker: Invoker, deadline: int, failed: dict[str, Any]) -> int:
    """Send again the fan-out items that never committed besides the failed one (`failed`: its
    stamp), by re-delivering as a duplicate (redelivered: it reads its checkpoint and commits
    nothing new) the committed invocation whose egress sends them: for a Map in lanes, the
    committed item before each lane's first missing item (its continuation); otherwise the Map's
    or fan-out's origin (it re-sends only the items that never committed). Nothing is sent when
    only the failed item is missing. Returns how many were sent. One scan of the records."""
    stamps: dict[str, dict[str, Any]] = {}
    for record in store.records(workflow):
        if record.kind is Kind.CHECKPOINT and record.value is not None:
            meta = split(record.value)[1]
            if meta is not None and isinstance(meta.get("f"), str) and not meta.get("e"):
                stamps[record.key] = meta
    origins: dict[str, dict[str, Any]] = {}  # origin -> {"size", "lanes", "done": {index: key}}

    def consumer(meta: dict[str, Any], key: str | None) -> None:
        position = meta.get("p", [[0, 1, 0]])
        for ref, _item, _path in meta.get("i", []):
            producer = stamps.get(str(ref))
            if producer is None or len(producer.get("p", [[0, 1, 0]])) >= len(position):
                continue
            origin = origins.setdefault(str(ref), {"size": int(position[-1][1]), "lanes": int(meta.get("l", 0)),
                                                   "done": {}})
            if key is not None:
                origin["done"][int(position[-1][0])] = key

    for key, meta in stamps.items():
        consumer(meta, key)
    consumer(failed, None)
    failed_at = int(failed["p"][-1][0]) if len(failed.get("p", [])) > 1 else None
    failed_refs = {str(ref) for ref, _item, _path in failed.get("i", [])}
    sends: dict[str, dict[str, Any]] = {}
    for origin, found in origins.items():
        done, lanes = found["done"], found["lanes"]
        missing = set(range(found["size"])) - set(done) - ({failed_at} if origin in failed_refs else set())
        for index in sorted(missing):
            if not lanes:
                sends[origin] = stamps[origin]
            elif index - lanes in done:  # the lane's last committed item sends this one
                sends[done[index - lanes]] = stamps[done[index - lanes]]
            elif index < lanes:  # a lane head: the origin sends it
                sends[origin] = stamps[origin]
    for meta in sends.values():
        invoker.invoke(meta["f"], envelope_of(workflow, meta, deadline).to_wire())
    return len(sends)


def redriven_frame(frame: Frame, number: int) -> Frame:
    """The frame redrive `number` (from 0) sends an invocation that committed its decision to fail
    (an IR `fail`: a Task's error after its Retry, a Fail state) under: its iteration moved past
    any a loop reaches, so its name, and those of every invocation after it, are new, and the
    failed decision stays as it was committed."""
    return Frame(frame.index, frame.size, frame.iteration % REDRIVE_STRIDE + REDRIVE_STRIDE * (number + 1))


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
