"""Task tokens without a coordinator: `.waitForTaskToken` Tasks and their callbacks.

A Task whose Resource ends in `.waitForTaskToken` runs its call (a Lambda handler, an SQS
message, ...) with `$$.Task.Token` set, then its function commits a *wait decision*
`{"__next__": "__wait__", "wait": {state, transfer, nonce, issued, timeout}}` and stops (IR
`suspend`): no successor, no result. The token names that invocation and carries the nonce:

    unum1.<base64url(JSON [workflow id, function, root iteration, nonce])>

so nothing but the store is needed to resume: `complete(token, outcome, store, invoker)`
1. decodes the token and reads the waiting invocation's checkpoint (`naming.checkpoint_key`):
   unknown when absent, when it is not a wait decision or when the nonce differs (a token of a
   losing duplicate execution, or a forged one: the 128-bit nonce is not guessable);
2. writes the *callback record* with one create-if-absent (`cb-` + hash of the invocation): the
   first callback wins; any later one is refused with `TaskAlreadyCompleted` (after re-sending the
   winner's continuation, so a callback that crashed before invoking is completed by a retry);
3. invokes the same function as the next invocation of its thread (iteration + 1) with the resume
   event; the runner there applies the Task's ResultSelector / ResultPath / Catch to the
   callback's output or error and continues. Its name is deterministic, so a re-sent
   continuation is absorbed by its commit: the workflow resumes exactly once.

A token is expired once the waiting invocation's retention ends (its checkpoint's expiry). A
callback after the Task's `TimeoutSeconds` resumes the workflow with `States.Timeout` (Catch can
take it) and is refused with `TaskTimedOut`. Nothing fires at the timeout by itself: there is no
timer without a coordinator (docs/step-functions.md). `.waitForTaskToken` inside a Parallel or Map
branch is rejected at compile time: its continuation would have to rejoin the branch's fan-out
position, which the handler's context does not expose.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from unum_entry.errors import UnumError

WAIT = "__wait__"
RESUME = "__unum_asl_resume__"
TOKEN_PREFIX = "unum1."


class CallbackError(UnumError):
    """A callback was refused; `error` is Step Functions' name for the refusal."""

    error = "States.TaskFailed"


class InvalidToken(CallbackError):
    error = "InvalidToken"


class TaskAlreadyCompleted(CallbackError):
    error = "TaskDoesNotExist"


class TaskTimedOut(CallbackError):
    error = "TaskTimedOut"


class TaskNotWaitingYet(CallbackError):
    """The waiting function has not committed its wait yet (a very fast callback): retry shortly."""

    error = "TaskNotWaitingYet"


@dataclass(frozen=True)
class Token:
    """What a task token names: the waiting invocation (root fan-out position) and its nonce."""

    workflow: str
    function: str
    iteration: int
    nonce: str

    def text(self) -> str:
        raw = json.dumps([self.workflow, self.function, self.iteration, self.nonce], separators=(",", ":"))
        return TOKEN_PREFIX + base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def parse(cls, text: str) -> Token:
        """Raises InvalidToken (never a traceback) for anything that is not a unum task token."""
        try:
            if not text.startswith(TOKEN_PREFIX):
                raise ValueError("wrong prefix")
            body = text[len(TOKEN_PREFIX):]
            workflow, function, iteration, nonce = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            if not all(isinstance(v, str) and v for v in (workflow, function, nonce)) or not isinstance(iteration, int):
                raise ValueError("bad fields")
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise InvalidToken(f"not a unum task token: {text[:40]!r}") from exc
        return cls(workflow, function, iteration, nonce)

    @property
    def invocation(self) -> str:
        from unum_entry import naming
        from unum_entry.envelope import Frame
        return naming.checkpoint_key(self.workflow, self.function, (Frame(0, 1, self.iteration),))

    @property
    def record_key(self) -> str:
        return "cb-" + hashlib.blake2b(f"{self.invocation}/{self.nonce}".encode(), digest_size=16).hexdigest()


# ---- the waiting side (inside the compiled function) -----------------------------------------

def waits(state: Mapping[str, Any]) -> bool:
    """True for a Task that waits for a callback (`.waitForTaskToken`)."""
    return str(state.get("Resource", "")).endswith(".waitForTaskToken")


def issue(context: Any) -> Token:
    """A fresh token for the invocation running `context` (workflow, function, iteration)."""
    return Token(context.workflow_id, context.function_name, int(context.iteration), secrets.token_hex(16))


def wait_decision(state: str, transfer: Mapping[str, Any], token: Token, timeout: float | None) -> dict[str, Any]:
    """The decision a waiting Task's function commits (its IR `suspend`s on it)."""
    return {"__next__": WAIT, "wait": {"state": state, "transfer": dict(transfer), "nonce": token.nonce,
                                       "issued": time.time(), "timeout": timeout}}


# ---- the callback side (Python API, `python -m builder task-success|task-failure`) ------------

@dataclass(frozen=True)
class Resumed:
    """What a callback did: the workflow and the continuation it invoked."""

    workflow: str
    function: str
    outcome: Mapping[str, Any]


def task_success(token: str, output: Any, *, store: Any, invoker: Any, now: float | None = None) -> Resumed:
    """SendTaskSuccess: the waiting Task's result is `output`. Raises a CallbackError."""
    return complete(token, {"output": output}, store=store, invoker=invoker, now=now)


def task_failure(token: str, error: str | None, cause: str | None, *, store: Any, invoker: Any,
                 now: float | None = None) -> Resumed:
    """SendTaskFailure: the waiting Task fails with `error` / `cause` (Retry is not re-run; Catch applies)."""
    return complete(token, {"error": error or "States.TaskFailed", "cause": cause or ""}, store=store,
                    invoker=invoker, now=now)


def complete(token_text: str, outcome: Mapping[str, Any], *, store: Any, invoker: Any,
             now: float | None = None) -> Resumed:
    """Resume the waiting Task exactly once (module docstring)."""
    from unum_entry.codec import decode, encode
    from unum_entry.stores.base import Kind

    token = Token.parse(token_text)
    now = time.time() if now is None else now
    records = store.read([token.invocation])
    record = records.get(token.invocation)
    if record is None or record.value is None:
        raise TaskNotWaitingYet(f"task token of workflow {token.workflow}: no waiting task (yet): the function "
                                f"{token.function!r} has not committed its wait, or its retention has ended")
    decision = decode(record.value)
    wait = decision.get("wait") if isinstance(decision, Mapping) and decision.get("__next__") == WAIT else None
    if wait is None or wait.get("nonce") != token.nonce:
        raise InvalidToken(f"unknown task token for workflow {token.workflow} (function {token.function!r} is not "
                           "waiting on it)")
    timed_out = wait.get("timeout") is not None and now > wait["issued"] + wait["timeout"]
    if timed_out:
        outcome = {"error": "States.Timeout", "cause": f"the task timed out after {wait['timeout']:g} seconds "
                                                      "before its callback"}
    resume = {RESUME: {"wait": wait, "outcome": dict(outcome)}}
    stored, created = store.create(token.record_key, encode(resume, what="callback"), workflow=token.workflow,
                                   kind=Kind.MARKER, expires_at=record.expires_at)
    _continue(token, decode(stored), record.expires_at, invoker)
    if not created:
        raise TaskAlreadyCompleted(f"task token of workflow {token.workflow}: the task was already completed by an "
                                   "earlier callback; this one is ignored")
    if timed_out:
        raise TaskTimedOut(f"task token of workflow {token.workflow}: the task had timed out (TimeoutSeconds "
                           f"{wait['timeout']:g}); the workflow continues with States.Timeout")
    return Resumed(token.workflow, token.function, outcome)


def _continue(token: Token, resume: Any, deadline: int, invoker: Any) -> None:
    """Invoke the continuation: the waiting function's next invocation in its thread."""
    from unum_entry.codec import encode
    from unum_entry.envelope import DataRef, Envelope, Frame

    inline = {"value": resume} if len(encode(resume)) <= 64 * 1024 else {}
    env = Envelope(workflow=token.workflow, frames=(Frame(0, 1, token.iteration + 1),),
                   inputs=(DataRef(ref=token.record_key, **inline),), deadline=int(deadline))
    invoker.invoke(token.function, env.to_wire())
