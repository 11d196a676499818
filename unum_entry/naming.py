"""Deterministic, fixed-length names for invocations and the objects they own (the NSDI'23
paper "Unum: A System for Highly Scalable Serverless Workflows without a Centralized
Orchestrator", §3.6).

A name is a hash over a canonical encoding of its parts, so it is the same for every retry of an
invocation, different for any two invocations (workflow id, function, every fan-out frame's
index/size/iteration), and always 34 characters: a kind prefix and 32 hex digits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from unum_entry.envelope import Frame
from unum_entry.packing import pack

_DIGEST_BYTES = 16


def _digest(domain: str, *parts: object) -> str:
    payload = pack([domain, *parts])
    return hashlib.blake2b(payload, digest_size=_DIGEST_BYTES).hexdigest()


def _frames(frames: Sequence[Frame]) -> list[list[int]]:
    return [[f.index, f.size, f.iteration] for f in frames]


def checkpoint_key(workflow: str, function: str, frames: Sequence[Frame]) -> str:
    """The checkpoint of one invocation; also its name in logs and the handler context."""
    return "c-" + _digest("checkpoint", workflow, function, _frames(frames))


def fan_in_set_key(workflow: str, target: str, target_frames: Sequence[Frame], fan_out_size: int) -> str:
    """The set that the `fan_out_size` branches joining invocation (target, target_frames)
    coordinate through. The size is part of the name: a late re-run of the origin that fans
    out to a different number of branches gets sets of its own instead of mixing members."""
    return "s-" + _digest("fan-in", workflow, target, _frames(target_frames), fan_out_size)


def set_shard_key(set_key: str, level: int, index: int) -> str:
    """Shard `index` at `level` (0 = leaves) of a join set's tree (unum_entry.fanin)."""
    return "s-" + _digest("shard", set_key, level, index)


def result_key(workflow: str, frames: Sequence[Frame]) -> str:
    """Where a workflow result lands. Keyed by the fan-out *indexes* only, not by function or
    iteration: one result per position of the fan-out tree, and create-if-absent keeps the first."""
    return "r-" + _digest("result", workflow, [f.index for f in frames[1:]])


def timer_name(workflow: str, purpose: str, *parts: object) -> str:
    """A durable timer's name (`Invoker.invoke_at`): the same for every execution that arms it.
    `purpose` says what it is for ("wait", "watchdog", "task-timeout", "heartbeat", "retry");
    `parts` are whatever makes it unique within the workflow (an invocation name, a count).
    34 characters of [a-z0-9-]: valid as an EventBridge schedule name and a Cloud Tasks task id."""
    return "m-" + _digest("timer", workflow, purpose, [str(p) for p in parts])


def failure_key(workflow: str) -> str:
    """The one failure record of a workflow."""
    return "f-" + _digest("failure", workflow)


def redrive_key(workflow: str, number: int) -> str:
    """The claim of redrive `number` (0, 1, …) of a workflow (unum_entry.redrive): it keeps the
    failure record that redrive cleared."""
    return "f-" + _digest("redrive", workflow, number)


def start_key(workflow: str) -> str:
    """What `python -m builder run` records when it starts a workflow (its input and folder):
    a kind of its own, never a checkpoint name."""
    return "i-" + _digest("run-start", workflow)


def detached_start_key(workflow: str) -> str:
    """Who started the workflow `workflow`, a fire-and-forget `states:startExecution` child,
    with which input (unum_entry.asl.detached): written once, create-if-absent."""
    return "t-" + _digest("detached-start", workflow)


def callback_key(invocation: str, nonce: str) -> str:
    """The callback record of the task token (`invocation`, `nonce`) (unum_entry.asl.callbacks): the
    first callback's create-if-absent write; `a-` as in the task's answer."""
    return "a-" + _digest("callback", invocation, nonce)


def heartbeat_key(invocation: str, nonce: str, bucket: int) -> str:
    """A `task-heartbeat` of the task token (`invocation`, `nonce`) in time bucket `bucket`
    (unum_entry.asl.callbacks): the first heartbeat of each bucket is recorded (create-if-absent)."""
    return "b-" + _digest("heartbeat", invocation, nonce, bucket)


def envelope_key(packed: bytes) -> str:
    """An envelope stored by reference because the platform cannot carry it (over its event or
    message limit): named by its bytes, so every send of the same envelope stores one record."""
    return "e-" + _digest("envelope", packed)


def durable_log_key(invocation: str, n: int) -> str:
    """Entry `n` (0, 1, …) of the checkpoint log of the durable execution run by `invocation`
    (unum_entry.durable_functions.log): each written once, create-if-absent."""
    return "d-" + _digest("durable-log", invocation, n)


def durable_effect_key(invocation: str, operation: str, name: str) -> str:
    """The record of the transactional effect `name` of durable operation `operation` (a step)
    of the execution run by `invocation` (unum_entry.durable_functions.effects): written once,
    in the effect's own transaction."""
    return "t-" + _digest("durable-effect", invocation, operation, name)


INVOKED = "~"  # joins a caller's workflow id and its operation in the workflow of a chained invoke's target
DURABLE_INVOKE = "__unum_durable_invoke__"  # the event key of a chained invoke's target (`context.invoke`): its input is {DURABLE_INVOKE: {caller, payload}}


def invoked_workflow(caller_workflow: str, operation: str) -> str:
    """The workflow a durable function's `context.invoke` runs its target as (its result is
    not the caller's workflow's): `<caller workflow>~<operation, 16 characters>`."""
    return f"{caller_workflow}{INVOKED}{operation[:16]}"


def durable_caller_key(workflow: str) -> str:
    """Who waits for the end of `workflow`, a compiled state machine that a durable function
    invoked (unum_entry.durable_functions.chained): written once by its first function."""
    return "t-" + _digest("durable-caller", workflow)


# ---- step journal and compensations (unum_entry.steps) ------------------------------------------

def step_key(invocation: str, seq: int) -> str:
    """The record of step number `seq` (0, 1, …) of one invocation (its checkpoint name)."""
    return "t-" + _digest("step", invocation, seq)


def compensation_key(workflow: str, index: int) -> str:
    """Entry `index` of a workflow's compensation log (appended in completion order)."""
    return "k-" + _digest("compensation", workflow, index)


def compensation_invocation(workflow: str, index: int) -> str:
    """The invocation name under which compensation `index` of a workflow runs (its step journal)."""
    return "x-" + _digest("compensating", workflow, index)
