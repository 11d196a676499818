"""The unum request envelope (the NSDI'23 paper "Unum: A System for Highly Scalable Serverless
Workflows without a Centralized Orchestrator", Figure 2), its wire form and its validation.

Wire form (JSON-compatible, so it can be a Lambda event; msgpack on Pub/Sub and locally):

```json
{"unum": 2, "workflow": "wf-…", "deadline": 1767225600, "frames": [[0, 1, 0], [2, 8, 0]],
 "inputs": [{"ref": "c-…", "item": 2, "value": 4}], "attempt": 0}
```
- `frames`: the fan-out stack `[index, size, iteration]`, root frame first (never empty).
- `inputs`: one per incoming edge. `ref` names the producer's checkpoint (absent only for the
  workflow's own input); `path` then `item` pick one element of that checkpoint (a map branch); `value` is
  the value inline, left out when it is too large (the consumer reads `ref`).
- `gathered`: the handler receives the list of inputs (a fan-in) instead of the single input.
- `gather`: `{"set": "s-…", "width": n}` — a fan-in target's inputs are the members of that
  join set (unum_entry.fanin), read by ingress; `inputs` is then empty.
- `start`: this is the workflow's first invocation (its input came from outside).
- `deadline`: when the workflow's objects start to expire (epoch seconds; unum_entry.retention).
  0 only on a start request from outside: the entry sets it.
- `redelivered`: sent by a duplicate execution: ingress reads its checkpoint before the handler.
- `watchdog`: the workflow's deadline watchdog timer (unum_entry.watchdog), delivered to the entry
  function; `attempt` counts its re-arms. Needs a `deadline`; never a `start`, never `gathered`.
- `trace`: the W3C `traceparent` (`00-<trace id>-<span id>-<flags>`) of the span that sent this
  invocation, set only when tracing is on (unum_entry.tracing): one workflow is one trace across
  functions and clouds. Absent in older envelopes and when tracing is off.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final, TypeVar

from unum_entry.errors import EnvelopeError, UnencodableValue
from unum_entry.frozen import ReadOnly

T = TypeVar("T")

ENVELOPE_VERSION = 2
FAILURES_KEPT = 10    # an envelope keeps at most this many earlier failed attempts (the newest)
FAILURE_TEXT = 300    # characters of each one's "Error: message"
_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")  # W3C, version 00
_MISSING: Any = object()


class Frame(ReadOnly):
    """One level of fan-out: which branch of how many, and the loop iteration at that level."""

    __slots__ = ("index", "size", "iteration")

    def __init__(self, index: int = 0, size: int = 1, iteration: int = 0) -> None:
        self.index: Final = index
        self.size: Final = size
        self.iteration: Final = iteration


ROOT = (Frame(),)


class DataRef(ReadOnly):
    """One input: a reference to a producer's checkpoint, the value inline, or both."""

    __slots__ = ("ref", "value", "item", "path")

    def __init__(self, ref: str | None = None, value: Any = _MISSING, item: int | None = None,
                 path: str | None = None) -> None:
        self.ref: Final = ref
        self.value: Final = value
        self.item: Final = item
        self.path: Final = path

    @property
    def inline(self) -> bool:
        return self.value is not _MISSING


class Gather(ReadOnly):
    """A fan-in target's inputs: the members of join set `set` of `width` branches."""

    __slots__ = ("set", "width")

    set: Final[str]
    width: Final[int]

    def __init__(self, set: str, width: int) -> None:
        self.set = set
        self.width = width


class Envelope(ReadOnly):
    """An unum request: who this invocation is and what it consumes (the module docstring).
    A `ReadOnly` value class (one is built per transition); `dataclasses.replace` works on it."""

    __slots__ = ("workflow", "frames", "inputs", "gathered", "gather", "attempt", "start", "deadline", "redelivered",
                 "lanes", "watchdog", "trace", "failures")

    workflow: Final[str]
    frames: Final[tuple[Frame, ...]]
    inputs: Final[tuple[DataRef, ...]]
    gathered: Final[bool]
    gather: Final[Gather | None]
    attempt: Final[int]
    start: Final[bool]
    deadline: Final[int]
    redelivered: Final[bool]
    lanes: Final[int]  # a map item run in lanes: once committed, invoke the item `lanes` further on
    watchdog: Final[bool]  # the deadline watchdog's timer (unum_entry.watchdog), not an invocation
    trace: Final[str | None]  # W3C traceparent of the sender's span (unum_entry.tracing)
    # This invocation's earlier failed attempts, oldest first: (epoch ms, "Error: message"), at most
    # FAILURES_KEPT (the newest), each text at most FAILURE_TEXT characters (unum_entry.history)
    failures: Final[tuple[tuple[int, str], ...]]

    def __init__(self, workflow: str, frames: tuple[Frame, ...] = ROOT, inputs: tuple[DataRef, ...] = (),
                 gathered: bool = False, gather: Gather | None = None, attempt: int = 0, start: bool = False,
                 deadline: int = 0, redelivered: bool = False, lanes: int = 0, watchdog: bool = False,
                 trace: str | None = None, failures: tuple[tuple[int, str], ...] = ()) -> None:
        self.workflow = workflow
        self.frames = frames
        self.inputs = inputs
        self.gathered = gathered
        self.gather = gather
        self.attempt = attempt
        self.start = start
        self.deadline = deadline
        self.redelivered = redelivered
        self.lanes = lanes
        self.watchdog = watchdog
        self.trace = trace
        self.failures = failures

    @property
    def top(self) -> Frame:
        return self.frames[-1]

    def next_attempt(self, failed_at: float | None = None, error: str = "") -> Envelope:
        """The envelope of the next attempt; with `failed_at` (epoch seconds), this attempt's
        failure (`error`) is kept in `failures` for the history (no request: it travels here)."""
        if failed_at is None:
            return replace(self, attempt=self.attempt + 1)
        kept = (*self.failures, (int(failed_at * 1000), error[:FAILURE_TEXT]))[-FAILURES_KEPT:]
        return replace(self, attempt=self.attempt + 1, failures=kept)

    # ---- wire form -----------------------------------------------------------------------

    def to_wire(self) -> dict[str, Any]:
        frames, inputs = self.frames, self.inputs
        # One frame and one input (a chain hop's envelope) without a comprehension: no frame of its own.
        wire: dict[str, Any] = {
            "unum": ENVELOPE_VERSION,
            "workflow": self.workflow,
            "frames": ([[frames[0].index, frames[0].size, frames[0].iteration]] if len(frames) == 1
                       else [[f.index, f.size, f.iteration] for f in frames]),
            "inputs": [_ref_to_wire(inputs[0])] if len(inputs) == 1 else [_ref_to_wire(d) for d in inputs],
        }
        if self.gathered:
            wire["gathered"] = True
        if self.gather is not None:
            wire["gather"] = {"set": self.gather.set, "width": self.gather.width}
        if self.attempt:
            wire["attempt"] = self.attempt
        if self.start:
            wire["start"] = True
        if self.deadline:
            wire["deadline"] = self.deadline
        if self.redelivered:
            wire["redelivered"] = True
        if self.lanes:
            wire["lanes"] = self.lanes
        if self.watchdog:
            wire["watchdog"] = True
        if self.trace:
            wire["trace"] = self.trace
        if self.failures:
            wire["failures"] = [[at, text] for at, text in self.failures]
        return wire

    @classmethod
    def from_wire(cls, wire: Any) -> Envelope:
        """Validate and decode, field by field; raises EnvelopeError naming the bad field."""
        if not isinstance(wire, Mapping):
            raise EnvelopeError(f"envelope: expected an object, found {type(wire).__name__}")
        if wire.get("unum") != ENVELOPE_VERSION:
            raise EnvelopeError(f"envelope.unum: expected version {ENVELOPE_VERSION}, found {wire.get('unum')!r}")
        workflow = wire.get("workflow")
        if not isinstance(workflow, str) or not workflow:
            raise EnvelopeError(f"envelope.workflow: expected a non-empty string, found {workflow!r}")
        frames = _frames_from_wire(wire.get("frames"))
        raw_inputs = wire.get("inputs")
        if not isinstance(raw_inputs, list):
            raise EnvelopeError(f"envelope.inputs: expected a list, found {raw_inputs!r}")
        inputs = tuple(_ref_from_wire(raw, f"envelope.inputs[{i}]") for i, raw in enumerate(raw_inputs))
        gathered = _flag_from_wire(wire, "gathered")
        if not gathered and len(inputs) != 1:
            raise EnvelopeError(f"envelope.inputs: expected exactly one input when not gathered, found {len(inputs)}")
        gather = _gather_from_wire(wire.get("gather"))
        if gather is not None and (not gathered or inputs):
            raise EnvelopeError("envelope.gather: needs gathered: true and no inputs")
        attempt = _count_from_wire(wire, "attempt")
        start = _flag_from_wire(wire, "start")
        deadline = _count_from_wire(wire, "deadline", "epoch seconds (an integer >= 0)")
        redelivered = _flag_from_wire(wire, "redelivered")
        lanes = _count_from_wire(wire, "lanes")
        watchdog = _flag_from_wire(wire, "watchdog")
        if watchdog and (start or gathered or not deadline):
            raise EnvelopeError("envelope.watchdog: a watchdog timer needs a deadline and is neither a start nor gathered")
        trace = wire.get("trace")
        if trace is not None and not (isinstance(trace, str) and _TRACEPARENT.fullmatch(trace)):
            raise EnvelopeError(f"envelope.trace: expected a W3C traceparent 00-<32 hex>-<16 hex>-<2 hex>, "
                                f"found {trace!r}")
        return cls(workflow=workflow, frames=frames, inputs=inputs, gathered=gathered, gather=gather,
                   attempt=attempt, start=start, deadline=deadline, redelivered=redelivered, lanes=lanes,
                   watchdog=watchdog, trace=trace, failures=_failures_from_wire(wire.get("failures", [])))


_ROOT_FRAME = ROOT[0]  # immutable: the root frame of every decoded envelope is this one object


def _failures_from_wire(raw: Any) -> tuple[tuple[int, str], ...]:
    if not (isinstance(raw, list) and len(raw) <= FAILURES_KEPT and all(
            isinstance(f, list) and len(f) == 2 and _is_count(f[0]) and isinstance(f[1], str) for f in raw)):
        raise EnvelopeError(f"envelope.failures: expected at most {FAILURES_KEPT} [epoch ms, error text] pairs, "
                            f"found {raw!r}"[:300])
    return tuple((int(at), text[:FAILURE_TEXT]) for at, text in raw)


def by_reference(env: Envelope) -> Envelope | None:
    """`env` with every inline value that has a checkpoint sent by reference to it instead
    (what a sender falls back to for a value no wire can carry); None when no input has one."""
    inputs = tuple(DataRef(ref=d.ref, item=d.item, path=d.path) if d.ref is not None else d for d in env.inputs)
    return None if inputs == env.inputs else replace(env, inputs=inputs)


def or_by_reference(env: Envelope, send: Callable[[Envelope], T]) -> T:
    """`send(env)`, or, when a value of `env` is one no wire can carry (`send` raises
    UnencodableValue, ValueError or RecursionError, as encoding it does), `send` of the same
    envelope with those values by reference to their checkpoints (`by_reference`): a committed
    output always reaches its consumers. Raises the first error when no input has a checkpoint."""
    try:
        return send(env)
    except (UnencodableValue, ValueError, RecursionError):
        fallback = by_reference(env)
        if fallback is None:
            raise
        return send(fallback)


def is_watchdog(payload: Any) -> bool:
    """True for the wire form of a watchdog timer (the local platform's idle check skips it)."""
    return isinstance(payload, Mapping) and payload.get("watchdog") is True


def is_envelope(event: Any) -> bool:
    """True when an event looks like an unum envelope rather than a raw workflow input."""
    return isinstance(event, Mapping) and "unum" in event and "workflow" in event


def _ref_to_wire(ref: DataRef) -> dict[str, Any]:
    wire: dict[str, Any] = {}
    if ref.ref is not None:
        wire["ref"] = ref.ref
    if ref.item is not None:
        wire["item"] = ref.item
    if ref.path is not None:
        wire["path"] = ref.path
    if ref.value is not _MISSING:  # (`ref.inline`, without its property call)
        wire["value"] = ref.value
    return wire


def _ref_from_wire(raw: Any, where: str) -> DataRef:
    if not isinstance(raw, Mapping):
        raise EnvelopeError(f"{where}: expected an object, found {type(raw).__name__}")
    unknown = set(raw) - {"ref", "item", "path", "value"}
    if unknown:
        raise EnvelopeError(f"{where}.{sorted(unknown)[0]}: unknown field")
    ref = raw.get("ref")
    if ref is not None and (not isinstance(ref, str) or not ref):
        raise EnvelopeError(f"{where}.ref: expected a store key, found {ref!r}")
    item = raw.get("item")
    if item is not None and not _is_count(item):
        raise EnvelopeError(f"{where}.item: expected an integer >= 0, found {item!r}")
    path = raw.get("path")
    if path is not None and (not isinstance(path, str) or not path.startswith("$")):
        raise EnvelopeError(f"{where}.path: expected a path starting with '$', found {path!r}")
    if ref is None and "value" not in raw:
        raise EnvelopeError(f"{where}: needs a ref or a value")
    return DataRef(ref=ref, value=raw.get("value", _MISSING), item=item, path=path)


def _frames_from_wire(raw: Any) -> tuple[Frame, ...]:
    if not isinstance(raw, list) or not raw:
        raise EnvelopeError(f"envelope.frames: expected a non-empty list of [index, size, iteration], found {raw!r}")
    frames = []
    for i, f in enumerate(raw):
        if not (isinstance(f, list) and len(f) == 3 and all(_is_count(x) for x in f)):
            raise EnvelopeError(f"envelope.frames[{i}]: expected [index, size, iteration] of integers >= 0, found {f!r}")
        if f[0] >= f[1]:
            raise EnvelopeError(f"envelope.frames[{i}]: index {f[0]} is outside size {f[1]}")
        frames.append(_ROOT_FRAME if f == [0, 1, 0] else Frame(*f))
    return tuple(frames)


def _gather_from_wire(raw: Any) -> Gather | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) != {"set", "width"}:
        raise EnvelopeError(f"envelope.gather: expected {{\"set\": key, \"width\": n}}, found {raw!r}")
    if not isinstance(raw["set"], str) or not raw["set"] or not _is_count(raw["width"]) or raw["width"] < 1:
        raise EnvelopeError(f"envelope.gather: expected a set key and a width >= 1, found {raw!r}")
    return Gather(set=raw["set"], width=raw["width"])


def _flag_from_wire(wire: Mapping, name: str) -> bool:
    """An optional boolean field (absent: False)."""
    value = wire.get(name, False)
    if not isinstance(value, bool):
        raise EnvelopeError(f"envelope.{name}: expected a boolean, found {value!r}")
    return value


def _count_from_wire(wire: Mapping, name: str, expected: str = "an integer >= 0") -> int:
    """An optional count field (absent: 0)."""
    value = wire.get(name, 0)
    if not _is_count(value):
        raise EnvelopeError(f"envelope.{name}: expected {expected}, found {value!r}")
    return value


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
