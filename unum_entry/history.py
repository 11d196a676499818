"""A workflow's execution history, read back from the commits its invocations already made.

No request is added to a workflow's path: every commit the runtime makes anyway (a checkpoint,
a result record written by a terminal function, a failure record) carries a *stamp* after its
value: one msgpack ext object (code `STAMP_EXT`) holding a small map

    {"f": function, "p": [[index, size, iteration], …] (fan-out position, root frame first),
     "a": attempt (from 0), "s": handler start (epoch ms), "c": commit (epoch ms),
     "i": [[ref, item, path], …] (inputs by reference, producers' checkpoints),
     "g": [set, width] (a fan-in target's join set), "gd": 1 (its inputs arrive as a list),
     "l": lanes (a map item run in lanes), "w": the workflow's input (its entry only; one
     over WORKFLOW_INPUT_LIMIT shows as {"$omitted": bytes}: the history's cost stays bounded),
     "v": [value, …]: the inputs that came inline without a reference (sent by a
     function without a checkpoint, or a timer: nowhere else to read them; bounded as "w"),
     "d": the workflow's deadline (a failure record's stamp only),
     "k": 1 (a failure record's: the invocation committed its decision to fail, an IR `fail`;
     its checkpoint is its step, and a redrive re-sends it under a fresh name),
     "x": [[epoch ms, "Error: message"], …] (the invocation's earlier failed attempts, carried
     by the retry envelope: `Envelope.failures`; absent when the first attempt succeeded)}

With these an invocation can be sent again as it was (unum_entry.redrive).

A result record that egress writes after a commit carries `end_stamp` instead (`{"f", "c",
"e": 1}`: when the result was recorded, no invocation of its own).

`unum_entry.codec.decode` reads such bytes as the value alone, so every reader of a checkpoint is
unaffected, and a value written without a stamp (older runtimes, functions without a checkpoint)
reads as before. `stamp` builds it on the runtime's path (no I/O); `split` separates it again;
`read_history` (tools only: `inspect --history`, the UI) reads a workflow's stamps back over the
Store contract, so it works on every store. Times come from the retention clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgpack  # type: ignore[import-untyped]

from unum_entry.packing import ext, pack

if TYPE_CHECKING:
    from unum_entry.envelope import Envelope
    from unum_entry.stores.base import Record, Store

STAMP_EXT = 72  # msgpack ext type code of a commit's history stamp ("H")
# A redrive sends a failed decision's invocation this many iterations on (unum_entry.redrive, which
# imports it from here: the history reads it back out of the position).
REDRIVE_STRIDE = 1 << 32
WORKFLOW_INPUT_LIMIT = 16 * 1024  # a larger workflow input is not copied into the entry's stamp


def stamp(function: str, env: Envelope, *, started: float | None, committed: float,
          with_deadline: bool = False, decided: bool = False) -> bytes:
    """The stamp appended to the commit of `function`'s invocation `env` (see the module
    docstring). `started`: when this execution's handler started (None: unknown, e.g. a failure
    recorded by the platform after its last attempt; `with_deadline`: record the workflow's
    deadline too, for a failure record that a redrive re-sends; `decided`: a failure record
    written after the invocation committed its decision to fail, `"k": 1`, whose step the
    checkpoint already is). Never raises for a JSON-like workflow
    input; an input msgpack cannot encode is left out (the commit must not fail for history)."""
    meta: dict[str, Any] = {"f": function, "c": int(committed * 1000)}
    if decided:
        meta["k"] = 1
    frames = env.frames
    if len(frames) > 1 or frames[0].iteration:
        meta["p"] = [[f.index, f.size, f.iteration] for f in frames]
    if env.attempt:
        meta["a"] = env.attempt
    if started is not None:
        meta["s"] = int(started * 1000)
    inputs = env.inputs
    refs: list[list[Any]] = []  # one loop, no comprehension: this runs at every commit
    sent: list[Any] = []  # inline values without a reference: sent by a function without a checkpoint
    for d in inputs:
        if d.ref is not None:
            refs.append([d.ref, d.item, d.path])
        elif d.inline:
            sent.append(d.value)
    if refs:
        meta["i"] = refs
    if env.gather is not None:
        meta["g"] = [env.gather.set, env.gather.width]
    if env.gathered:
        meta["gd"] = 1
    if env.lanes:
        meta["l"] = env.lanes
    if with_deadline and env.deadline:
        meta["d"] = env.deadline
    if env.failures:
        meta["x"] = [[at, text] for at, text in env.failures]
    if env.start and inputs and inputs[0].inline:
        meta["w"] = inputs[0].value
    elif sent:
        meta["v"] = sent
    else:  # names and numbers only
        return ext(STAMP_EXT, pack(meta))
    try:
        body = pack(meta)  # the thread's own Packer (packb makes one per call: a chain hop's stamp is 1/4 cheaper)
    except (TypeError, ValueError, OverflowError):
        meta.pop("w", None)
        meta.pop("v", None)
        body = pack(meta)
    for copied in ("w", "v"):
        if copied in meta and len(body) > WORKFLOW_INPUT_LIMIT:  # a large input is not copied: its size only
            meta[copied] = {"$omitted": len(body)}
            body = pack(meta)
    return ext(STAMP_EXT, body)


def end_stamp(function: str, written: float) -> bytes:
    """The stamp of a result record that egress writes after `function`'s commit: when the
    workflow's result (at that position) was recorded. `"e": 1` marks it as no invocation of its
    own (the invocation's stamp is on its checkpoint)."""
    return ext(STAMP_EXT, pack({"f": function, "c": int(written * 1000), "e": 1}))


def split(stored: bytes) -> tuple[bytes, dict[str, Any] | None]:
    """(the value's own bytes, its stamp or None) of bytes a commit stored."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(stored)
    try:
        unpacker.skip()
        end = unpacker.tell()
        tail = unpacker.unpack() if end < len(stored) else None
    except (msgpack.OutOfData, ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
        return stored, None
    if isinstance(tail, msgpack.ExtType) and tail.code == STAMP_EXT:
        try:
            meta = msgpack.unpackb(tail.data, raw=False, strict_map_key=False)
        except ValueError:
            return stored[:end], None
        return stored[:end], meta if isinstance(meta, dict) else None
    return stored, None


# ---- reading a history back (tools: inspect --history, the UI; never on a workflow's path) ----

VALUE_INLINE_BYTES = 2048  # a value longer than this (msgpack bytes) is shown by reference


@dataclass(frozen=True)
class Step:
    """One invocation that committed (or failed the workflow), read from its stamp.

    `key` is the record it was read from (its checkpoint, a result record or the failure
    record); `inputs` are the producers' records it consumed (`[ref, item, path]`, item/path
    select a map item or a branch's part), `gathered` the members of a fan-in target's join.
    `output` is the committed value, or `{"$ref": key, "bytes": n}` when longer than the inline
    limit (`value` fetches it); `error` the failure record of a failed invocation."""

    key: str
    function: str
    position: tuple[tuple[int, int, int], ...]
    attempts: int
    started_ms: int | None
    ended_ms: int
    inputs: tuple[tuple[str, int | None, str | None], ...]
    gathered: tuple[str, ...]
    output: Any = None
    error: dict[str, Any] | None = None
    redriven: bool = False  # a failure that a redrive cleared (unum_entry.redrive): the run went on
    failed_attempts: tuple[tuple[int, str], ...] = ()  # earlier attempts: (failed at, epoch ms; "Error: message")
    received: Any = None  # the stamp's "v": inputs that came inline without a reference (None: none)

    @property
    def duration_ms(self) -> int | None:
        return None if self.started_ms is None else max(0, self.ended_ms - self.started_ms)


@dataclass(frozen=True)
class History:
    """A workflow's history: its input, start and end (epoch ms; None when unknown), its steps in
    order, and the events numbered as `events` says."""

    workflow: str
    input: Any
    started_ms: int | None
    ended_ms: int | None
    steps: tuple[Step, ...]
    input_known: bool = False

    @property
    def duration_ms(self) -> int | None:
        if self.started_ms is None or self.ended_ms is None:
            return None
        return max(0, self.ended_ms - self.started_ms)


def read_history(store: Store, workflow: str, *, inline_bytes: int = VALUE_INLINE_BYTES) -> History:
    """One scan of the workflow's records (`Store.records`, O(table) on DynamoDB: for tools).
    Steps are ordered by start (or, unknown, commit) time, then fan-out position and function;
    a workflow's start is its entry's handler start, its end the latest commit (or failure)."""
    from unum_entry.codec import decode
    from unum_entry.stores.base import Kind

    from unum_entry.naming import redrive_key

    records = {record.key: record for record in store.records(workflow)}
    claims: list[str] = []  # the failure records redrives cleared, each kept under its claim
    while redrive_key(workflow, len(claims)) in records:
        claims.append(redrive_key(workflow, len(claims)))
    steps: list[Step] = []
    workflow_input: Any = None
    input_known = False
    last_result: int | None = None
    for record in records.values():
        redriven = record.key in claims
        if record.value is None or (record.kind not in (Kind.CHECKPOINT, Kind.RESULT, Kind.FAILURE) and not redriven):
            continue
        own, meta = split(record.value)
        if meta is None or not isinstance(meta.get("f"), str):
            continue
        if meta.get("k"):  # a failure decided by an invocation whose checkpoint is its step
            continue
        if meta.get("e"):  # a result recorded after its invocation's commit: only when the workflow ended
            last_result = max(last_result or 0, int(meta.get("c", 0)))
            continue
        if "w" in meta:
            workflow_input, input_known = meta["w"], True
        value = decode(own)
        if record.kind is Kind.RESULT and isinstance(value, dict):
            own, value = b"", value.get("value")
            own_size = len(encode_value(value))
        else:
            own_size = len(own)
        failed = record.kind is Kind.FAILURE or redriven
        shown = None if failed else (value if own_size <= inline_bytes else {"$ref": record.key, "bytes": own_size})
        steps.append(Step(
            key=record.key, function=meta["f"],
            position=tuple(tuple(int(x) for x in frame) for frame in meta.get("p", [[0, 1, 0]])),  # type: ignore[misc]
            attempts=int(meta.get("a", 0)) + 1, started_ms=meta.get("s"), ended_ms=int(meta.get("c", 0)),
            inputs=tuple((str(r[0]), r[1], r[2]) for r in meta.get("i", [])),
            gathered=_gathered(records, meta.get("g")), output=shown,
            error=value if failed and isinstance(value, dict) else None, redriven=redriven,
            failed_attempts=tuple((int(x[0]), str(x[1])) for x in meta.get("x", [])), received=meta.get("v")))
    steps = _causal_order(steps)
    started = next((s.started_ms for s in steps if s.started_ms is not None), None)
    ended = max([s.ended_ms for s in steps] + ([last_result] if last_result is not None else []), default=None)
    return History(workflow=workflow, input=workflow_input, started_ms=started, ended_ms=ended,
                   steps=tuple(steps), input_known=input_known)


def _causal_order(steps: list[Step]) -> list[Step]:
    """By start (else commit) time, then position and function; but never before a producer
    whose output it consumed (clocks of different machines, and ties within a millisecond)."""
    import heapq

    def when(s: Step) -> tuple[Any, ...]:
        return (s.started_ms if s.started_ms is not None else s.ended_ms, s.ended_ms, s.position, s.function, s.key)

    keys = {s.key for s in steps}
    waits = {s.key: {r for r in (*(i[0] for i in s.inputs), *s.gathered) if r in keys and r != s.key} for s in steps}
    consumers: dict[str, list[Step]] = {}
    for s in steps:
        for producer in waits[s.key]:
            consumers.setdefault(producer, []).append(s)
    ready = [(when(s), s) for s in steps if not waits[s.key]]
    heapq.heapify(ready)
    ordered: list[Step] = []
    while ready:
        _, step = heapq.heappop(ready)
        ordered.append(step)
        for consumer in consumers.get(step.key, []):
            waits[consumer.key].discard(step.key)
            if not waits[consumer.key]:
                heapq.heappush(ready, (when(consumer), consumer))
    placed = {s.key for s in ordered}
    return ordered + sorted((s for s in steps if s.key not in placed), key=when)  # a cycle cannot occur


def encode_value(value: Any) -> bytes:
    from unum_entry.codec import encode

    return encode(value)


def _gathered(records: Mapping[str, Record], gather: Any) -> tuple[str, ...]:
    """The members (producers' checkpoints) of a fan-in target's join set, in slot order."""
    if not isinstance(gather, list) or len(gather) != 2:
        return ()
    from unum_entry import fanin
    from unum_entry.errors import RetentionExpired

    try:
        return tuple(fanin.members(records, str(gather[0]), int(gather[1])))
    except RetentionExpired:
        return ()


def value(store: Store, workflow: str, key: str) -> Any:
    """The whole committed value of record `key` of `workflow` (what a history shows by
    reference). Raises UnumError when the workflow retains no such record."""
    from unum_entry.codec import decode
    from unum_entry.errors import UnumError
    from unum_entry.stores.base import Kind

    found = store.read([key]).get(key)
    if found is None or found.workflow != workflow or found.value is None:
        raise UnumError(f"no value {key!r} retained for workflow {workflow!r}")
    decoded = decode(split(found.value)[0])
    if found.kind is Kind.RESULT and isinstance(decoded, dict):
        return decoded.get("value")
    return decoded


def input_of(step: Step, by_key: Mapping[str, Step], history: History) -> Any:
    """The input `step` consumed, as far as the history holds it: the workflow's input for its
    entry; a producer's (inline) output, narrowed by path/item; a list for a fan-in; else a
    `{"$ref": …}` naming where it lies."""
    from unum_entry.conditions import resolve_path
    from unum_entry.errors import UnumError

    def one(ref: str, item: int | None, path: str | None) -> Any:
        producer = by_key.get(ref)
        shown: Any = producer.output if producer is not None else None
        if producer is None or (isinstance(shown, dict) and "$ref" in shown):
            return {"$ref": ref, **({"item": item} if item is not None else {}), **({"path": path} if path else {})}
        try:
            if path is not None:
                shown = resolve_path(path, shown, {})
            if item is not None:
                shown = shown[item]
        except (UnumError, LookupError, TypeError):
            return {"$ref": ref, "item": item, "path": path}
        return shown

    if step.gathered:
        return [one(ref, None, None) for ref in step.gathered]
    if isinstance(step.received, dict):  # too large to copy: {"$omitted": bytes}
        return step.received
    if isinstance(step.received, list) and step.received and not step.inputs:  # sent without a checkpoint
        return step.received[0] if len(step.received) == 1 else step.received
    if not step.inputs:
        return history.input if history.input_known else None
    values = [one(*ref) for ref in step.inputs]
    return values[0] if len(values) == 1 else values


_END_EVENT = {"succeeded": "ExecutionSucceeded", "failed": "ExecutionFailed", "stopped": "ExecutionAborted",
              "timed out": "ExecutionTimedOut"}


def events(history: History, status: str, *, states: Mapping[str, Sequence[tuple[str, str, str]]] | None = None,
           failure: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The history as numbered events, the way a Step Functions execution history numbers them
    (docs/history.md): `ExecutionStarted` is 1; each step adds `LambdaFunctionStarted` and
    `LambdaFunctionSucceeded` (or `LambdaFunctionFailed`), after one `LambdaFunctionFailed` (its
    attempt number, from 1, as `attempts`) per earlier failed attempt that was retried, wrapped
    in `<Type>StateEntered` / `<Type>StateExited` when `states` names the states its function ran (a compiled machine:
    `(name, Type, role)`, role "both", "enter" (a Map/Parallel fanning out) or "exit" (its join));
    an ended workflow's last event is `ExecutionSucceeded`, `ExecutionFailed`,
    `ExecutionAborted` (stopped) or `ExecutionTimedOut`; a failure a redrive cleared is followed
    by `ExecutionRedriven` (unum_entry.redrive). Ids follow the events' timestamps
    (ties: step order, then order within the step); `previousEventId` is the event before in
    the same step, or for a step's first event the last event of the latest producer it
    consumed (1 for the entry)."""
    drafts: list[tuple[int, int, int, dict[str, Any]]] = []  # (timestamp, step order, seq, event)
    start = history.started_ms or 0
    drafts.append((start, -1, 0, {"type": "ExecutionStarted", "timestamp": start,
                                  "details": {"input": history.input}}))
    by_key = {s.key: s for s in history.steps}
    ends: dict[str, int] = {}  # each step's end, never before a producer's (another machine's clock)
    for order, step in enumerate(history.steps):
        after = max((ends[r] for r in (*(x[0] for x in step.inputs), *step.gathered) if r in ends), default=start)
        begin = max(after, step.started_ms if step.started_ms is not None else step.ended_ms)
        ends[step.key] = max(begin, step.ended_ms)
        walked = list(states.get(step.function, ())) if states else []
        base: dict[str, Any] = {"function": step.function, "step": order, "key": step.key}
        if len(step.position) > 1:
            base["index"], base["size"] = step.position[-1][0], step.position[-1][1]
        redrives, iteration = divmod(step.position[-1][2], REDRIVE_STRIDE)
        if iteration:
            base["iteration"] = iteration  # a loop's pass (IR `next`)
        if redrives:
            base["redrive"] = redrives  # run again by that redrive (unum_entry.redrive.redriven_frame)
        own: list[tuple[int, dict[str, Any]]] = []
        first = step.attempts - len(step.failed_attempts)  # the oldest attempt kept (Envelope.failures)
        for attempt, (failed_at, text) in enumerate(step.failed_attempts, start=first):
            error, _, cause = text.partition(": ")  # an earlier attempt, retried
            own.append((min(max(after, failed_at), begin), {**base, "type": "LambdaFunctionFailed",
                                                             "attempts": attempt,
                                                             "details": {"error": error, "cause": cause}}))
        for name, kind, role in walked:
            edge = "Exited" if role == "exit" else "Entered"
            own.append((begin, {**base, "type": f"{kind}State{edge}", "state": name}))
        own.append((begin, {**base, "type": "LambdaFunctionStarted", "attempts": step.attempts,
                            "details": {"input": input_of(step, by_key, history)}}))
        done = {**base, "attempts": step.attempts, "durationMs": step.duration_ms}
        if step.error is not None:
            own.append((ends[step.key], {**done, "type": "LambdaFunctionFailed",
                                        "details": {"error": step.error.get("Error"), "cause": step.error.get("Cause")}}))
            if step.redriven:  # the workflow failed here, then a redrive re-ran this invocation
                own.append((ends[step.key], {**base, "type": "ExecutionRedriven"}))
        else:
            own.append((ends[step.key], {**done, "type": "LambdaFunctionSucceeded", "details": {"output": step.output}}))
            for name, kind, role in reversed(walked):
                if role == "both":
                    own.append((ends[step.key], {**base, "type": f"{kind}StateExited", "state": name}))
        drafts.extend((when, order, seq, event) for seq, (when, event) in enumerate(own))
    end = _END_EVENT.get(status)
    if end is not None:
        finish = max([history.ended_ms or start, start, *ends.values()])
        details = {} if failure is None else {"error": failure.get("Error"), "cause": failure.get("Cause")}
        drafts.append((finish, len(history.steps), 0, {"type": end, "timestamp": finish, "details": details}))
    drafts[1:] = sorted(drafts[1:], key=lambda d: d[:3])
    numbered: list[dict[str, Any]] = []
    last_of_step: dict[str, int] = {}
    for i, (when, _order, seq, event) in enumerate(drafts, start=1):
        event = {"id": i, **event, "timestamp": when}
        key = event.get("key")
        if i == 1:
            event["previousEventId"] = 0
        elif key is not None and seq > 0:
            event["previousEventId"] = last_of_step[key]
        elif key is not None:
            step = by_key[key]
            producers = [last_of_step[r] for r in (*(x[0] for x in step.inputs), *step.gathered) if r in last_of_step]
            event["previousEventId"] = max(producers, default=1)
        else:
            event["previousEventId"] = i - 1
        if key is not None:
            last_of_step[key] = i
        numbered.append(event)
    return numbered
