"""The unum request envelope (seed 003 Figure 2), its wire form and its validation.

Wire form (JSON-compatible, so it can be a Lambda event; msgpack on Pub/Sub and locally):

```json
{"unum": 1, "workflow": "wf-…", "frames": [[0, 1, 0], [2, 8, 0]],
 "inputs": [{"ref": "c-…", "item": 2, "value": 4}], "gathered": false,
 "gc": {"delete": ["c-…"], "set": "s-…", "slot": 2, "on_full": ["c-…"]}, "attempt": 0}
```
- `frames`: the fan-out stack `[index, size, iteration]`, root frame first (never empty).
- `inputs`: one per incoming edge. `ref` names the producer's checkpoint (absent only for the
  workflow's own input); `path` then `item` pick one element of that checkpoint (a map branch); `value` is
  the value inline, left out when it is too large (the consumer reads `ref`).
- `gathered`: the handler receives the list of inputs (a fan-in) instead of the single input.
- `start`: this is the workflow's first invocation (its input came from outside).
- `gc`: what this invocation must collect once it has committed (seed 003 §3.5): `delete` keys
  outright; and for the first hop after a fan-out, add `slot` to the origin's `set`, deleting
  `on_full` and the set when it is full.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from unum_entry.errors import EnvelopeError

ENVELOPE_VERSION = 1
_MISSING: Any = object()


@dataclass(frozen=True)
class Frame:
    """One level of fan-out: which branch of how many, and the loop iteration at that level."""

    index: int = 0
    size: int = 1
    iteration: int = 0


ROOT = (Frame(),)


@dataclass(frozen=True)
class DataRef:
    """One input: a reference to a producer's checkpoint, the value inline, or both."""

    ref: str | None = None
    value: Any = _MISSING
    item: int | None = None
    path: str | None = None

    @property
    def inline(self) -> bool:
        return self.value is not _MISSING


@dataclass(frozen=True)
class GcDuty:
    """What an invocation collects after it commits."""

    delete: tuple[str, ...] = ()
    set: str | None = None
    slot: int | None = None
    on_full: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.delete and self.set is None


@dataclass(frozen=True)
class Envelope:
    """An unum request: who this invocation is and what it consumes."""

    workflow: str
    frames: tuple[Frame, ...] = ROOT
    inputs: tuple[DataRef, ...] = ()
    gathered: bool = False
    gc: GcDuty = field(default_factory=GcDuty)
    attempt: int = 0
    start: bool = False
    lanes: int = 0  # a map item run in lanes: once committed, invoke the item `lanes` further on

    @property
    def top(self) -> Frame:
        return self.frames[-1]

    def next_attempt(self) -> Envelope:
        return replace(self, attempt=self.attempt + 1)

    # ---- wire form -----------------------------------------------------------------------

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "unum": ENVELOPE_VERSION,
            "workflow": self.workflow,
            "frames": [[f.index, f.size, f.iteration] for f in self.frames],
            "inputs": [_ref_to_wire(d) for d in self.inputs],
        }
        if self.gathered:
            wire["gathered"] = True
        if not self.gc.empty:
            gc: dict[str, Any] = {"delete": list(self.gc.delete)}
            if self.gc.set is not None:
                gc.update(set=self.gc.set, slot=self.gc.slot, on_full=list(self.gc.on_full))
            wire["gc"] = gc
        if self.attempt:
            wire["attempt"] = self.attempt
        if self.start:
            wire["start"] = True
        if self.lanes:
            wire["lanes"] = self.lanes
        return wire

    @classmethod
    def from_wire(cls, wire: Any) -> Envelope:
        """Validate and decode; raises EnvelopeError naming the bad field."""
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
        gathered = wire.get("gathered", False)
        if not isinstance(gathered, bool):
            raise EnvelopeError(f"envelope.gathered: expected a boolean, found {gathered!r}")
        if not gathered and len(inputs) != 1:
            raise EnvelopeError(f"envelope.inputs: expected exactly one input when not gathered, found {len(inputs)}")
        attempt = wire.get("attempt", 0)
        if not _is_count(attempt):
            raise EnvelopeError(f"envelope.attempt: expected an integer >= 0, found {attempt!r}")
        start = wire.get("start", False)
        if not isinstance(start, bool):
            raise EnvelopeError(f"envelope.start: expected a boolean, found {start!r}")
        lanes = wire.get("lanes", 0)
        if not _is_count(lanes):
            raise EnvelopeError(f"envelope.lanes: expected an integer >= 0, found {lanes!r}")
        return cls(workflow=workflow, frames=frames, inputs=inputs, gathered=gathered,
                   gc=_gc_from_wire(wire.get("gc")), attempt=attempt, start=start, lanes=lanes)


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
    if ref.inline:
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
        frames.append(Frame(*f))
    return tuple(frames)


def _gc_from_wire(raw: Any) -> GcDuty:
    if raw is None:
        return GcDuty()
    if not isinstance(raw, Mapping):
        raise EnvelopeError(f"envelope.gc: expected an object, found {type(raw).__name__}")
    delete = raw.get("delete", [])
    on_full = raw.get("on_full", [])
    for name, keys in (("delete", delete), ("on_full", on_full)):
        if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
            raise EnvelopeError(f"envelope.gc.{name}: expected a list of store keys, found {keys!r}")
    gc_set, slot = raw.get("set"), raw.get("slot")
    if gc_set is not None and (not isinstance(gc_set, str) or not _is_count(slot)):
        raise EnvelopeError(f"envelope.gc: set needs a store key and a slot, found set={gc_set!r} slot={slot!r}")
    return GcDuty(delete=tuple(delete), set=gc_set, slot=slot if gc_set is not None else None, on_full=tuple(on_full))


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
