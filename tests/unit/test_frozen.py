"""Value classes (`unum_entry.frozen.ReadOnly`, the one mechanism): they behave as the
dataclasses they stand for (equality, hash, repr, replace, fields, match, copies), each one's
slots, body annotations and `__init__` agree, and importing the adapters neither defines
dataclasses for them nor pulls rare-path modules in."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import json
import pickle
import subprocess
import sys
from dataclasses import dataclass
from typing import Final

import pytest

from unum_entry.frozen import ReadOnly

pytestmark = pytest.mark.unit

RUNTIME_MODULES = ["envelope", "ir", "conditions", "plan", "egress", "ingress", "fanin", "retention", "runtime",
                   "steps", "invokers.lambda_event", "platforms.cloud_run", "platforms.common", "timers", "context",
                   "outcome", "hooks", "steps.saga", "steps.journal", "stores.base"]


@dataclass(frozen=True)
class Reference:
    """d"""

    x: int
    y: tuple


class Value(ReadOnly):
    """d"""

    __slots__ = ("x", "y")

    x: Final[int]
    y: Final[tuple]

    def __init__(self, x: int, y: tuple = ()) -> None:
        self.x = x
        self.y = y


def _behaviour(cls):
    a, b = cls(1, (2,)), cls(1, (2,))
    matched = None
    match a:
        case cls(1, y):  # type: ignore[misc]
            matched = y
    restored = pickle.loads(pickle.dumps(a))
    return {
        "repr": repr(a).replace(cls.__name__, "C"),
        "eq": (a == b, a != cls(2, ()), a == (1, (2,)), hash(a) == hash(b), hash(a) == hash((1, (2,)))),
        "replace": repr(dataclasses.replace(a, x=5)).replace(cls.__name__, "C"),
        "fields": [f.name for f in dataclasses.fields(a)],
        "asdict": dataclasses.asdict(a),
        "is_dataclass": (dataclasses.is_dataclass(a), dataclasses.is_dataclass(cls)),
        "match": (cls.__match_args__, matched),
        "copies": (restored == a, copy.copy(a) == a, copy.deepcopy(a) == a),
    }


def test_a_value_class_behaves_as_the_dataclass_it_stands_for():
    assert _behaviour(Value) == _behaviour(Reference)


def test_read_only_itself_is_no_dataclass():
    assert not dataclasses.is_dataclass(ReadOnly)
    assert not hasattr(ReadOnly, "__dataclass_fields__")


def _fields(cls: type) -> tuple[str, ...]:
    """A ReadOnly class's fields: the slots of it and its bases, base first."""
    return tuple(name for klass in reversed(cls.__mro__) for name in klass.__dict__.get("__slots__", ())
                 if issubclass(klass, ReadOnly))


def _value_classes():
    for name in RUNTIME_MODULES:
        module = importlib.import_module(f"unum_entry.{name}")
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__ and issubclass(value, ReadOnly):
                yield value


VALUE_CLASSES = sorted(set(_value_classes()), key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


def test_every_value_class_is_read_only():
    """No second mechanism: no value class module still defines a frozen dataclass by hand."""
    assert len(VALUE_CLASSES) >= 40
    import unum_entry.frozen as frozen
    assert not hasattr(frozen, "Frozen") and not hasattr(frozen, "frozen")


@pytest.mark.parametrize("cls", VALUE_CLASSES, ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
def test_slots_annotations_and_init_agree(cls):
    """Each field is written three times (slot, `Final` annotation, `__init__` store): the
    annotations declared in a body are its slots, in order, and `__init__` takes them, in
    order (a class whose `__init__` takes other arguments, the contexts' timers, says so)."""
    own_slots = tuple(cls.__dict__.get("__slots__", ()))
    annotated = tuple(cls.__dict__.get("__annotations__", {}))
    if annotated:
        assert annotated == own_slots[:len(annotated)], "the body's annotations are its first slots"
        assert all(str(a).startswith("Final") for a in cls.__dict__["__annotations__"].values())
        params = [p.name for p in list(inspect.signature(cls.__init__).parameters.values())[1:]]
        assert params[:len(annotated)] == list(annotated) or set(annotated) - {"timers"} <= set(params)
        assert [f.name for f in dataclasses.fields(cls)] == list(annotated)
    if "__init__" in cls.__dict__ and not cls.__dict__.get("_compared") and _fields(cls):
        params = [p.name for p in list(inspect.signature(cls.__init__).parameters.values())[1:]]
        assert params == list(_fields(cls)), "__init__ takes every field, in slot order"
    assert cls.__match_args__ == _fields(cls)


_PROBE = r"""
import dataclasses, json, sys
processed = []
original = dataclasses._process_class
def recording(cls, *args, **kwargs):
    processed.append(cls)
    return original(cls, *args, **kwargs)
dataclasses._process_class = recording
loaded = set(sys.modules)
import unum_entry.platforms.aws_lambda
new = set(sys.modules) - loaded
import unum_entry.platforms.cloud_run
from unum_entry.frozen import ReadOnly
print(json.dumps({
    "value_classes_registered": [f"{cls.__module__}.{cls.__qualname__}" for cls in processed
                                 if issubclass(cls, ReadOnly)],
    "rare_path_modules": sorted(m for m in ("uuid", "random", "concurrent.futures", "base64", "jsonpath_ng",
                                            "unum_entry.asl") if m in new),  # of the Lambda adapter
}))
"""


def test_importing_the_adapters_defines_no_dataclass_for_value_classes_and_skips_rare_paths():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout) == {"value_classes_registered": [], "rare_path_modules": []}
