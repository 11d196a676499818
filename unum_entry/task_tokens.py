"""Task tokens and wait decisions as the store holds them: the rule every reader of a waiting
Task follows (the callbacks of unum_entry.asl.callbacks, the deadline watchdog's report, inspect,
the console).

A Task waiting for its callback has committed a *wait decision* `{"__next__": WAIT, "wait": {...}}`
as its checkpoint; its token names that invocation (workflow, function, fan-out frames) and a
nonce; the callback record (`naming.callback_key`) exists once it was answered. This module sits
in the rules layer (docs/architecture.md), below the runtime, so the watchdog can name what
waits without reaching up into the Step Functions front end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from unum_entry.errors import InvalidToken
from unum_entry.opaque_text import opaque_fields, opaque_text

WAIT = "__wait__"
TOKEN_PREFIX = "unum1."


Position = tuple[tuple[int, int, int], ...]  # fan-out frames [index, size, iteration], root first


@dataclass(frozen=True)
class Token:
    """What a task token names: the waiting invocation (function and fan-out frames) and its nonce."""

    workflow: str
    function: str
    frames: Position
    nonce: str

    def text(self) -> str:
        return opaque_text(TOKEN_PREFIX, [self.workflow, self.function, [list(f) for f in self.frames], self.nonce])

    @classmethod
    def parse(cls, text: str) -> Token:
        """Raises InvalidToken (never a traceback) for anything that is not a unum task token."""
        try:
            workflow, function, frames, nonce = opaque_fields(TOKEN_PREFIX, text)
            if not all(isinstance(v, str) and v for v in (workflow, function, nonce)):
                raise ValueError("bad fields")
            if isinstance(frames, int) and not isinstance(frames, bool):
                frames = [[0, 1, frames]]  # the first form: a root-level Task's iteration
            position = position_of(frames)
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise InvalidToken(f"not a unum task token: {str(text)[:40]!r}") from exc
        return cls(workflow, function, position, nonce)

    @property
    def invocation(self) -> str:
        """The waiting invocation's checkpoint name."""
        from unum_entry import naming
        return naming.checkpoint_key(self.workflow, self.function, self._frames())

    def continuation_frames(self) -> tuple[Any, ...]:
        """Where the continuation runs: the same position, the innermost iteration + 1."""
        from unum_entry.envelope import Frame
        *outer, (index, size, iteration) = self.frames
        return tuple(Frame(*f) for f in outer) + (Frame(index, size, iteration + 1),)

    @property
    def record_key(self) -> str:
        from unum_entry import naming
        return naming.callback_key(self.invocation, self.nonce)

    def _frames(self) -> tuple[Any, ...]:
        from unum_entry.envelope import Frame
        return tuple(Frame(*f) for f in self.frames)


def position_of(frames: Any) -> Position:
    """Fan-out frames from their JSON form; ValueError unless a non-empty list of
    [index, size, iteration] with 0 <= index < size."""
    if not isinstance(frames, list) or not frames:
        raise ValueError("frames: expected a non-empty list")
    position = []
    for f in frames:
        if not (isinstance(f, list) and len(f) == 3
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in f) and f[0] < f[1]):
            raise ValueError(f"frame {f!r}: expected [index, size, iteration]")
        position.append((f[0], f[1], f[2]))
    return tuple(position)


@dataclass(frozen=True)
class Waiting:
    """A Task waiting for its callback: which state, which function, its token."""

    state: str
    function: str
    token: str
    issued: float


def waiting(store: Any, workflow: str) -> list[Waiting]:
    """The Tasks of `workflow` that wait for a callback not received yet, oldest first. One
    scan of the workflow's objects (O(objects), for tools): a checkpoint holding a wait decision
    whose callback record does not exist. Wait decisions without a stored token (the first
    form) are listed with an empty token."""
    from unum_entry import naming
    from unum_entry.codec import decode
    from unum_entry.stores.base import Kind

    decisions: list[tuple[str, dict[str, Any]]] = []
    keys: set[str] = set()
    marker = WAIT.encode()
    for record in store.records(workflow):
        keys.add(record.key)
        if record.kind is not Kind.CHECKPOINT or record.value is None or marker not in record.value:
            continue
        try:
            decision = decode(record.value)
        except Exception:  # noqa: BLE001 - not a decision of ours: skip it
            continue
        if isinstance(decision, Mapping) and decision.get("__next__") == WAIT and isinstance(decision.get("wait"), Mapping):
            decisions.append((record.key, dict(decision["wait"])))
    found = []
    for key, wait in decisions:
        record_key = naming.callback_key(key, str(wait.get("nonce")))
        if record_key in keys or wait.get("timer"):  # completed; or a Wait/Retry timer (no callback)
            continue
        token = str(wait.get("token") or "")
        function = Token.parse(token).function if token else ""
        found.append(Waiting(str(wait.get("state")), function, token, float(wait.get("issued") or 0)))
    return sorted(found, key=lambda w: w.issued)


# ---- the callback side (Python API, `python -m builder task-success|task-failure`) ------------
