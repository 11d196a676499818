"""The value classes made at every delivery are read-only by type, not at run time
(unum_entry.frozen.ReadOnly says why): mypy, which CI runs over the package, must refuse a write
to any of their fields, and `ReadOnly` must still compare, hash and print as a value class."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from unum_entry.egress import EgressReport
from unum_entry.envelope import Envelope
from unum_entry.frozen import ReadOnly
from unum_entry.ingress import Ready
from unum_entry.plan import Call, Join, Plan
from unum_entry.platforms.common import DeliveryOutcome, DeliveryStatus
from unum_entry.stores.base import Kind, Record, SetAdd, SetState

REPO = Path(__file__).resolve().parents[2]

# One write per line, each to a field of a class made per delivery.
WRITES = '''
from unum_entry.egress import EgressReport
from unum_entry.envelope import Envelope
from unum_entry.ingress import Ready
from unum_entry.plan import Call, Join, Plan
from unum_entry.platforms.common import DeliveryOutcome, DeliveryStatus
from unum_entry.stores.base import Kind, Record, SetAdd, SetState

EgressReport(1, True, 0, False).created = False
Ready(1).event = 2
Call("f", Envelope(workflow="w")).function = "g"
Join("s", 2, 0, "t", ()).slot = 1
Plan().terminal = True
DeliveryOutcome(DeliveryStatus.DONE).status = DeliveryStatus.DONE
SetState(2, {}).members = {0: "a"}
SetAdd("k", 0, "m", 2, 9).member = "n"
Record("k", Kind.CHECKPOINT, "w", 9).value = b"x"
'''


def test_mypy_refuses_a_write_to_each_read_only_field(tmp_path: Path) -> None:
    snippet = tmp_path / "writes.py"
    snippet.write_text(WRITES)
    run = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", str(snippet)], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    refused = {int(line.split(":")[1]) for line in run.stdout.splitlines() if "Cannot assign to final attribute" in line}
    writes = {n for n, line in enumerate(WRITES.splitlines(), start=1) if line.startswith(tuple("ERCJPDS")) and "=" in line}
    assert len(writes) == 9
    assert refused == writes, run.stdout + run.stderr


class _Pair(ReadOnly):
    __slots__ = ("a", "b", "note")
    _compared = ("a", "b")

    def __init__(self, a: object, b: object, note: str = "") -> None:
        self.a = a
        self.b = b
        self.note = note


class _Other(ReadOnly):
    __slots__ = ("a", "b")

    def __init__(self, a: object, b: object) -> None:
        self.a = a
        self.b = b


def test_a_read_only_value_compares_hashes_and_prints_over_its_fields() -> None:
    assert _Pair(1, "x", note="one") == _Pair(1, "x", note="two")  # `note` is not compared
    assert hash(_Pair(1, "x", note="one")) == hash(_Pair(1, "x"))
    assert _Pair(1, "x") != _Pair(1, "y") and _Pair(1, "x") != _Other(1, "x")  # the same class only
    assert _Other(1, "x") == _Other(1, "x") and _Other.__dict__["_compared"] == ("a", "b")
    assert repr(_Pair(1, "x", "n")) == "_Pair(a=1, b='x', note='n')"
    looped = _Other(1, None)
    object.__setattr__(looped, "b", [looped])
    assert repr(looped) == "_Other(a=1, b=[...])"


class _Wider(_Other):
    __slots__ = ("c",)

    def __init__(self, a: object, b: object, c: object) -> None:
        super().__init__(a, b)
        self.c = c


class _Same(_Pair):
    __slots__ = ()


def test_a_subclass_compares_and_prints_its_bases_fields_and_its_own() -> None:
    assert _Wider(1, 2, 3) == _Wider(1, 2, 3) and _Wider(1, 2, 3) != _Wider(1, 2, 4) != _Wider(9, 2, 4)
    assert repr(_Wider(1, 2, 3)) == "_Wider(a=1, b=2, c=3)"
    assert _Same(1, "x", "one") == _Same(1, "x", "two") and _Same(1, "x") != _Same(2, "x")  # `_compared` kept
    assert repr(_Same(1, "x", "n")) == "_Same(a=1, b='x', note='n')"


def test_contexts_compare_over_the_invocation_not_its_timers_or_journal() -> None:
    from unum_entry.context import DeliveryContext, InvocationContext
    from unum_entry.steps.api import DeliveryStepContext, StepContext

    for kind in (InvocationContext, DeliveryContext, StepContext, DeliveryStepContext):
        one = kind("wf", "F", "c-1", 0, 2, 4, 0, 99)
        assert one == kind("wf", "F", "c-1", 0, 2, 4, 0, 99, timers=None)
        assert one != kind("wf", "F", "c-1", 1, 2, 4, 0, 99) and one != kind("wf", "F", "c-2", 0, 2, 4, 0, 99)
        assert repr(one).startswith(f"{kind.__qualname__}(workflow_id='wf', ") and "timers" not in repr(one)
    assert StepContext("wf", "F", "c-1", 0, 0, 1, 0, _journal=object()) == StepContext("wf", "F", "c-1", 0, 0, 1, 0)  # type: ignore[arg-type]


def test_the_per_delivery_classes_keep_their_value_semantics() -> None:
    env = Envelope(workflow="w")
    assert Call("f", env) == Call("f", env) and hash(Call("f", env)) == hash(Call("f", env))
    assert Call("f", env).with_envelope(Envelope(workflow="v")) == Call("f", Envelope(workflow="v"))
    assert Plan(calls=(Call("f", env),)) == Plan(calls=(Call("f", env),)) != Plan(terminal=True)
    assert Join("s", 2, 0, "t", ()) == Join("s", 2, 0, "t", ()) != Join("s", 2, 1, "t", ())
    assert SetState(2, {0: "a", 1: "b"}, completed_by=1) == SetState(2, {0: "a", 1: "b"})  # completed_by: not compared
    assert SetState(2, {0: "a", 1: "b"}).full and not SetState(2, {0: "a"}).full
    assert Ready([1]) == Ready([1]) and DeliveryOutcome(DeliveryStatus.DONE) == DeliveryOutcome(DeliveryStatus.DONE)
    assert Record("k", Kind.SET, "w", 9, size=2) == Record("k", Kind.SET, "w", 9, size=2)
    assert SetAdd("k", 0, "m", 2, 9) == SetAdd("k", 0, "m", 2, 9)


def test_a_report_given_its_encoded_value_decodes_it_at_each_read() -> None:
    from unum_entry.codec import encode

    report = EgressReport(None, True, 0, False, encoded=encode({"n": [1, 2]}))
    first = report.value
    assert first == {"n": [1, 2]}
    first["n"].append(3)  # a reader's own copy
    assert report.value == {"n": [1, 2]}
    assert EgressReport({"v": 1}, False, 2, True).value == {"v": 1}
    assert repr(report) == "EgressReport(value={'n': [1, 2]}, created=True, invoked=0, terminal=False, failed=False)"
    assert report == EgressReport({"n": [1, 2]}, True, 0, False)  # equal values, however each holds its own
    assert report != EgressReport({"n": [1]}, True, 0, False) and report != EgressReport({"n": [1, 2]}, False, 0, False)


def test_a_set_add_hashes_over_its_fields_as_when_it_was_frozen() -> None:
    assert hash(SetAdd("k", 0, "m", 2, 9)) == hash(SetAdd("k", 0, "m", 2, 9))
    assert len({SetAdd("k", 0, "m", 2, 9), SetAdd("k", 0, "m", 2, 9), SetAdd("k", 1, "m", 2, 9)}) == 2
    assert hash(Record("k", Kind.CHECKPOINT, "w", 9, b"v", members=(0,))) == hash(  # type: ignore[arg-type]
        Record("k", Kind.CHECKPOINT, "w", 9, b"v", members=(0,)))  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, "text", {"a": [1, None, 2.5]}, [b"raw", True]])
def test_a_value_packs_as_packb_packs_it(value: object) -> None:
    import msgpack  # type: ignore[import-untyped]

    from unum_entry.codec import encode

    assert encode(value) == msgpack.packb(value, use_bin_type=True)


def test_a_value_that_packs_again_while_it_is_packed_gets_a_packer_of_its_own() -> None:
    """A dict subclass's `items()` runs while its dict is packed: encoding inside it must not
    write into the outer value's buffer."""
    import msgpack  # type: ignore[import-untyped]

    from unum_entry.codec import encode
    from unum_entry.errors import UnencodableValue

    inner: list[bytes] = []

    class Packs(dict):  # type: ignore[type-arg]
        def items(self):  # type: ignore[no-untyped-def, override]
            inner.append(encode({"inner": list(range(5))}))
            return super().items()

    value = {"outer": Packs(k="v"), "after": "x"}
    assert encode(value) == msgpack.packb({"outer": {"k": "v"}, "after": "x"}, use_bin_type=True)
    assert inner == [msgpack.packb({"inner": [0, 1, 2, 3, 4]}, use_bin_type=True)]
    with pytest.raises(UnencodableValue):
        encode({"bad": object()})
    assert encode([1, 2]) == msgpack.packb([1, 2], use_bin_type=True)  # the packer after a failure: reset
