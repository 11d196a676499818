"""An envelope handed to the next execution without the wire (unum_entry.local.handoff,
`LocalPlatform.submit_envelope`): every handler owns the values it receives. A handler that
mutates its event in place changes nothing that a sibling branch, its own retry, or a later
delivery of the same envelope receives - as if each had come over a wire."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from unum_entry.codec import decode
from unum_entry.envelope import DataRef, Envelope
from unum_entry.errors import UnencodableValue
from unum_entry.local.handoff import call_wire, is_plain, open_call, open_sealed, seal
from unum_entry.local.platform import LocalPlatform
from unum_entry.runtime import Handler
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.unit


def envelope(*values: Any) -> Envelope:
    return Envelope(workflow="wf-h", inputs=tuple(DataRef(ref="c-x", value=v) for v in values), gathered=len(values) != 1)


def test_scalars_travel_as_they_are_and_anything_else_as_a_fresh_copy_per_opening() -> None:
    plain = envelope(1, "s", 2.5, None, True, b"b")
    assert is_plain(plain) and seal(plain) is plain and open_sealed(plain) is plain
    value = {"n": [1, 2], "t": (3, 4)}
    sealed = seal(envelope(value, 7))
    value["n"].append(99)  # the sender's object changes after the send: not what was sent
    first, second = open_sealed(sealed), open_sealed(sealed)
    assert first.inputs[0].value == {"n": [1, 2], "t": [3, 4]}  # what a wire delivers (a tuple arrives as a list)
    first.inputs[0].value["n"].append(5)
    assert second.inputs[0].value == {"n": [1, 2], "t": [3, 4]}
    assert first.inputs[1].value == 7 and first.inputs[0].ref == "c-x"
    assert not is_plain(envelope(2**64)) and open_sealed(seal(envelope(2**63))).inputs[0].value == 2**63


def test_a_value_no_wire_could_carry_raises_as_its_encoding_would() -> None:
    with pytest.raises(UnencodableValue):
        seal(envelope({"bad": object()}))


PARALLEL = {
    "Start": FunctionSource("def handler(event, context):\n    return {'items': [1, 2], 'tag': 'start'}\n",
                            [{"op": "create_set", "function": "Join", "shape": "aggregate"},
                             {"op": "fan_out", "branches": ["A", "B", "C"]}]),
    "A": FunctionSource("def handler(event, context):\n    return event\n", [{"op": "fan_in", "function": "Join"}],
                        {"max_attempts": 2}),
    "B": FunctionSource("def handler(event, context):\n    return event\n", [{"op": "fan_in", "function": "Join"}]),
    "C": FunctionSource("def handler(event, context):\n    return event\n", [{"op": "fan_in", "function": "Join"}]),
    "Join": FunctionSource("def handler(event, context):\n    return event\n", []),
}


@pytest.mark.parametrize("workers", [1, 3])
def test_a_branch_mutating_its_event_in_place_leaks_to_no_sibling_and_not_to_its_retry(
        tmp_path: Path, workers: int) -> None:
    seen: dict[str, list[Any]] = {"A": [], "B": [], "C": []}
    lock = threading.Lock()

    def wrap(name: str, handler: Handler) -> Handler:
        if name not in seen:
            return handler

        def mutating(event: Any, context: Any) -> Any:
            with lock:
                seen[name].append({"items": list(event["items"]), "tag": event["tag"]})
                first_attempt = name == "A" and len(seen[name]) == 1
            event["items"].append(name)  # in place: the event's list and dict
            event["tag"] = name
            if first_attempt:
                raise RuntimeError("the first attempt fails after changing its event")
            return {"branch": name}

        return mutating

    workflow = write_workflow(tmp_path / "wf", name="handoff", entry="Start", functions=PARALLEL)
    with LocalPlatform(workflow, MemoryStore(), workers=workers, wrap=wrap) as platform:
        outcome = platform.run(None, timeout=30)
        assert platform.stats["handler_retries"] == 1
    assert outcome.failure is None and outcome.result == [{"branch": b} for b in "ABC"]
    pristine = {"items": [1, 2], "tag": "start"}
    assert seen == {"A": [pristine, pristine], "B": [pristine], "C": [pristine]}


MIXED_MAP = {
    # The first item is a scalar, so the engine queues the map as (calls, position) (`submit_fan_out`).
    "Split": FunctionSource("def handler(event, context):\n    return [0, {'n': [1]}, [2], 'three']\n",
                            [{"op": "create_set", "function": "Sum", "shape": "aggregate"},
                             {"op": "map", "function": "Item"}]),
    "Item": FunctionSource("def handler(event, context):\n    return event\n", [{"op": "fan_in", "function": "Sum"}],
                           {"max_attempts": 2}),
    "Sum": FunctionSource("def handler(event, context):\n    return event\n", []),
}


@pytest.mark.parametrize("workers", [1, 3])
def test_a_map_queued_by_position_gives_each_item_its_own_copy_and_its_retry_a_pristine_one(
        tmp_path: Path, workers: int) -> None:
    seen: list[Any] = []
    lock = threading.Lock()

    def wrap(name: str, handler: Handler) -> Handler:
        if name != "Item":
            return handler

        def mutating(event: Any, context: Any) -> Any:
            with lock:
                seen.append(repr(event))
                first_attempt = isinstance(event, dict) and seen.count(repr(event)) == 1
            if isinstance(event, dict):
                event["n"].append("changed")
            elif isinstance(event, list):
                event.append("changed")
            if first_attempt:
                raise RuntimeError("the first attempt fails after changing its event")
            return event

        return mutating

    workflow = write_workflow(tmp_path / "wf", name="mixed", entry="Split", functions=MIXED_MAP)
    with LocalPlatform(workflow, MemoryStore(), workers=workers, wrap=wrap) as platform:
        submitted: list[Any] = []
        original = platform.submit_fan_out

        def recording(calls: Any) -> bool:
            accepted = original(calls)
            submitted.append((len(calls), accepted))
            return accepted

        platform.submit_fan_out = recording  # type: ignore[method-assign]
        outcome = platform.run(None, timeout=30)
        assert platform.stats["handler_retries"] == 1
    assert submitted == [(4, True)]
    assert outcome.failure is None
    assert outcome.result == [0, {"n": [1, "changed"]}, [2, "changed"], "three"]
    assert sorted(seen) == sorted(["0", "{'n': [1]}", "{'n': [1]}", "[2]", "'three'"])


def test_a_fan_out_is_queued_by_position_only_where_nothing_would_be_encoded(tmp_path: Path) -> None:
    """Queued as runs of (calls, positions): a map of scalars (no object per branch until one is
    taken, then a delivery by position without payload), on a durable queue too, which journals
    each call's wire form. Sent call by call, in their wire form: a first item that is not a
    scalar."""
    from unum_entry.local.queue import SQLiteQueue
    from unum_entry.stores.sqlite import SQLiteStore

    def split(items: str) -> dict[str, FunctionSource]:
        return {"Split": FunctionSource(f"def handler(event, context):\n    return {items}\n",
                                        [{"op": "create_set", "function": "Sum", "shape": "aggregate"},
                                         {"op": "map", "function": "Item"}]),
                "Item": FunctionSource("def handler(event, context):\n    return event\n",
                                       [{"op": "fan_in", "function": "Sum"}]),
                "Sum": FunctionSource("def handler(event, context):\n    return len(event)\n", [])}

    def queued_forms(folder: str, items: str, durable: bool) -> set[str]:
        workflow = write_workflow(tmp_path / folder, name=folder, entry="Split", functions=split(items))
        store = SQLiteStore.open(tmp_path / f"{folder}.db") if durable else MemoryStore()
        kwargs: dict[str, Any] = {"queue": SQLiteQueue(store.database)} if durable else {}  # type: ignore[attr-defined]
        forms: set[str] = set()
        with LocalPlatform(workflow, store, workers=1, **kwargs) as platform:
            push, push_run, pop_due = platform.queue.push, platform.queue.push_run, platform.queue.pop_due

            def seeing(delivery: Any, ready_at: float) -> None:
                push(delivery, ready_at)
                if delivery.function == "Item":  # as it waits in the queue
                    forms.add("wire" if delivery.payload and delivery.source is None else "other")

            def seeing_run(run: Any) -> None:
                push_run(run)
                forms.add("run")

            def taking(now: float) -> Any:
                delivery = pop_due(now)
                if delivery is not None and delivery.source is not None:
                    forms.add("position" if delivery.payload == b"" else "other")
                return delivery

            platform.queue.push = seeing  # type: ignore[method-assign]
            platform.queue.push_run = seeing_run  # type: ignore[method-assign]
            platform.queue.pop_due = taking  # type: ignore[method-assign]
            assert platform.run(None, timeout=30).result == 200
        store.close()
        return forms

    assert queued_forms("ints", "list(range(200))", durable=False) == {"run", "position"}
    assert queued_forms("dicts", "[{'i': i} for i in range(200)]", durable=False) == {"wire"}
    assert queued_forms("durable", "list(range(200))", durable=True) == {"run", "position"}


def test_a_call_built_by_position_that_no_wire_could_carry_goes_by_reference() -> None:
    from unum_entry.plan import Call, FanOutCalls

    values = [1, {"bad": object()}]
    calls = FanOutCalls(lambda i: Call("W", Envelope(workflow="wf-h", inputs=(DataRef(ref="c-x", item=i,
                                                                                      value=values[i]),))),
                        range(2), workflow="wf-h", functions=["W", "W"])
    assert open_call(calls, 0).inputs == (DataRef(ref="c-x", item=0, value=1),)
    assert open_call(calls, 1).inputs == (DataRef(ref="c-x", item=1),)
    inline_only = FanOutCalls(lambda i: Call("W", Envelope(workflow="wf-h", inputs=(DataRef(value={"bad": object()}),))),
                              range(1))
    with pytest.raises(UnencodableValue):
        open_call(inline_only, 0)
    # A durable queue journals the same: the wire form of the call, by reference where needed.
    assert Envelope.from_wire(decode(call_wire(calls, 0))).inputs == (DataRef(ref="c-x", item=0, value=1),)
    assert Envelope.from_wire(decode(call_wire(calls, 1))).inputs == (DataRef(ref="c-x", item=1),)
    with pytest.raises(UnencodableValue):
        call_wire(inline_only, 0)


def test_an_opened_envelope_keeps_every_field_but_its_inputs() -> None:
    """`_with_inputs` names every field positionally: one added to Envelope and left out there
    would be dropped from every sealed delivery."""
    import dataclasses

    from unum_entry.envelope import Frame, Gather
    from unum_entry.local.handoff import _with_inputs

    env = Envelope(workflow="w", frames=(Frame(), Frame(2, 4, 1)), inputs=(DataRef(value=1),), gathered=True,
                   gather=Gather("s-1", 4), attempt=3, start=True, deadline=99, redelivered=True, lanes=2,
                   watchdog=True, trace="00-" + "1" * 32 + "-" + "2" * 16 + "-01", failures=((5, "E: m"),))
    defaults = Envelope(workflow="")
    assert all(getattr(env, f.name) != getattr(defaults, f.name) for f in dataclasses.fields(Envelope))
    inputs = (DataRef(ref="c-1", value=[1]),)
    assert _with_inputs(env, inputs) == dataclasses.replace(env, inputs=inputs)
    assert _with_inputs(env, inputs).inputs is inputs
