"""The retention ledger (unum_entry.retention.Ledger): every key through naming, every expiry by
kind; store writes that must state their expiry; a join past its deadline; gc's clock-skew
horizon; `checkpoint: false` duplicates; the deadline a task-token continuation runs under."""

from __future__ import annotations

import re

import pytest

from unum_entry import fanin, naming
from unum_entry.asl import callbacks
from unum_entry.checkpoint import first_delivery
from unum_entry.codec import encode
from unum_entry.envelope import Envelope, Frame
from unum_entry.errors import IRError, RetentionExpired, StoreMisuse
from unum_entry.ir import parse_ir
from unum_entry.retention import GC_SKEW_SECONDS, Ledger, Retention, sweep_horizon
from unum_entry.stores.base import Kind
from unum_entry.stores.memory import MemoryStore

pytestmark = pytest.mark.unit

TTL, REDELIVERY, MARGIN = 7 * 86400, 6 * 3600, 900
KEY = re.compile(r"^[a-z]-[0-9a-f]{32}$")


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def ledger_at(clock: Clock, deadline: int | None = None) -> Ledger:
    retention = Retention(ttl_seconds=TTL, redelivery_seconds=REDELIVERY, margin_seconds=MARGIN, clock=clock)
    return Ledger("wf-1", deadline if deadline is not None else retention.deadline(), retention)


def test_every_key_the_ledger_makes_is_a_34_character_name_of_its_own_kind() -> None:
    ledger = ledger_at(Clock())
    frames = (Frame(), Frame(2, 5, 1))
    invocation = ledger.checkpoint("F", frames)
    keys = {
        "checkpoint": invocation, "result": ledger.result(frames), "failure": ledger.failure(),
        "start": ledger.start(), "compensation": ledger.compensation(3), "timer": ledger.timer("wait", invocation),
        "step": ledger.step(invocation, 0), "callback": ledger.callback(invocation, "nonce"),
        "envelope": ledger.envelope(b"\x81\xa1a\x01"),
    }
    for what, key in keys.items():
        assert KEY.match(key) and len(key) == 34, f"{what}: {key!r}"
    prefixes = {what: key[:2] for what, key in keys.items()}
    assert len(set(prefixes.values())) == len(prefixes), prefixes  # the start record is no checkpoint any more
    assert keys["callback"] == callbacks.Token("wf-1", "F", ((0, 1, 0), (2, 5, 1)), "nonce").record_key
    assert keys["start"] == naming.start_key("wf-1") and keys["envelope"] == naming.envelope_key(b"\x81\xa1a\x01")


def test_sets_expire_at_the_deadline_everything_else_also_outlives_a_late_redelivery() -> None:
    clock = Clock()
    ledger = ledger_at(clock)
    deadline = ledger.deadline
    assert deadline == int(clock.now) + TTL
    others = [kind for kind in Kind if kind not in (Kind.SET, Kind.CHUNK)]
    assert ledger.expires_at(Kind.SET) == deadline
    assert {ledger.expires_at(kind) for kind in others} == {deadline}  # early: the deadline covers redelivery
    clock.now = deadline - 3600  # an hour before the deadline: a duplicate may come 6 h later
    assert ledger.expires_at(Kind.SET) == deadline
    assert {ledger.expires_at(kind) for kind in others} == {int(clock.now) + REDELIVERY}


def test_an_unknown_deadline_is_bounded_by_now_plus_the_ttl() -> None:
    clock = Clock()
    ledger = ledger_at(clock)
    bounded = Ledger.bounded("wf-1", 0, ledger.retention)
    assert bounded.deadline == int(clock.now) + TTL
    assert Ledger.bounded("wf-1", 1234, ledger.retention).deadline == 1234


def test_every_store_write_states_its_expiry() -> None:
    store = MemoryStore()
    with pytest.raises(TypeError, match="expires_at"):
        store.create("c-1", b"v", workflow="wf")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="expires_at"):
        store.add_to_set("s-1", 0, "m", size=2, workflow="wf")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="expires_at"):
        store.transact("t-1", b"v", [], workflow="wf")  # type: ignore[call-arg]
    with pytest.raises(StoreMisuse, match="c-1.*expires_at must be epoch seconds"):
        store.create("c-1", b"v", workflow="wf", expires_at=None)  # type: ignore[arg-type]
    ledger = Ledger("wf", 2_000_000_000, Retention(clock=lambda: 1_000_000_000.0))
    ledger.create(store, "c-1", b"v", Kind.CHECKPOINT)
    assert [r.expires_at for r in store.records("wf")] == [2_000_000_000]


def test_a_join_after_the_deadline_fails_naming_the_set_and_recreates_nothing() -> None:
    clock = Clock()
    store = MemoryStore(clock=clock)
    ledger = ledger_at(clock)
    assert fanin.join(store, ledger, "s-join", 2, 0, "c-a") is False
    clock.now = ledger.deadline  # the shard has expired: an upsert would recreate it with one member
    with pytest.raises(RetentionExpired, match="join set s-join .*expired at its deadline"):
        fanin.join(store, ledger, "s-join", 2, 1, "c-b")
    clock.now = ledger.deadline - 1  # (look back in time: nothing was written by the refused add)
    shard = store.read([naming.set_shard_key("s-join", 0, 0)])
    assert [dict(r.members) for r in shard.values()] == [{0: "c-a"}]


def test_gc_sweeps_only_what_expired_a_skew_margin_ago() -> None:
    clock = Clock()
    store = MemoryStore(clock=clock)
    store.create("c-old", b"", workflow="wf", expires_at=int(clock.now) - GC_SKEW_SECONDS - 1)
    store.create("c-recent", b"", workflow="wf", expires_at=int(clock.now) - 10)
    assert sweep_horizon(clock.now) == clock.now - GC_SKEW_SECONDS
    assert store.sweep(sweep_horizon(clock.now)) == 1  # c-recent expired only 10 s ago here
    assert store.sweep(sweep_horizon(clock.now, 0)) == 1
    with pytest.raises(ValueError, match="clock-skew margin must be >= 0"):
        sweep_horizon(clock.now, -1)


def test_a_function_without_checkpoint_takes_a_known_repeat_as_a_duplicate() -> None:
    env = Envelope(workflow="wf", deadline=10)
    assert first_delivery(env)
    assert not first_delivery(Envelope(workflow="wf", deadline=10, redelivered=True))
    assert not first_delivery(Envelope(workflow="wf", deadline=10, attempt=1))


def test_ingress_check_without_a_checkpoint_is_rejected_naming_the_function() -> None:
    doc = {"unum_ir": 1, "function": "Notify", "handler": "app.handler", "checkpoint": False, "ingress_check": True}
    with pytest.raises(IRError, match=r"ingress_check: function 'Notify': .*needs \"checkpoint\": true"):
        parse_ir(doc)
    parse_ir({**doc, "checkpoint": True})
    parse_ir({**doc, "ingress_check": False})


class _Invocations:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict]] = []

    def invoke(self, function: str, payload: dict) -> None:
        self.sent.append((function, payload))


def test_a_callback_continues_under_the_workflows_deadline_not_the_waiting_checkpoints_expiry() -> None:
    clock = Clock()
    store = MemoryStore(clock=clock)
    deadline = int(clock.now) + 600
    token = callbacks.Token("wf-cb", "Wait", ((0, 1, 0), (1, 2, 0)), "n0nce")
    decision = callbacks.wait_decision("Ask", {}, token, None, deadline=deadline)
    # The waiting checkpoint outlives the deadline (written late: now + redelivery)...
    store.create(token.invocation, encode(decision), workflow="wf-cb", expires_at=deadline + REDELIVERY)
    invoker = _Invocations()
    callbacks.task_success(token.text(), {"ok": 1}, store=store, invoker=invoker)
    (function, payload), = invoker.sent
    # ...but the continuation carries the workflow's deadline: past it, it cannot join or run.
    assert function == "Wait" and Envelope.from_wire(payload).deadline == deadline
