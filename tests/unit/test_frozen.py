"""Value classes (`unum_entry.frozen`): they behave as the frozen dataclasses they replaced, and
importing the adapters neither defines dataclasses for them nor pulls rare-path modules in."""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import inspect
import json
import pickle
import subprocess
import sys
from dataclasses import FrozenInstanceError, dataclass, field

import pytest

from unum_entry.frozen import Frozen, ReadOnly, frozen

pytestmark = pytest.mark.unit

RUNTIME_MODULES = ["envelope", "ir", "conditions", "plan", "egress", "ingress", "fanin", "retention", "runtime",
                   "steps", "invokers.lambda_event", "platforms.cloud_run", "timers", "context"]


@dataclass(frozen=True)
class Reference:
    """d"""

    x: int
    y: tuple = ()
    z: object = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def double(self) -> int:
        return self.x * 2


@frozen
class Value(Frozen):
    """d"""

    x: int
    y: tuple = ()
    z: object = field(default=None, repr=False, compare=False)

    def __init__(self, x: int, y: tuple = (), z: object = None) -> None:
        self.__dict__.update(x=x, y=y, z=z)

    @functools.cached_property
    def double(self) -> int:
        return self.x * 2


def _outcome(action):
    try:
        return ("ok", action())
    except Exception as exc:  # the error type and message are part of the behaviour
        return (type(exc).__name__, str(exc))


def _behaviour(cls):
    a, b = cls(1, (2,), "q"), cls(1, (2,), "other")
    matched = None
    match a:
        case cls(1, y):  # type: ignore[misc]
            matched = y
    restored = pickle.loads(pickle.dumps(a))
    return {
        "repr": repr(a).replace(cls.__name__, "C"),
        "eq": (a == b, a != cls(2), a == (1, (2,)), hash(a) == hash(b), hash(a) == hash((1, (2,)))),
        "set": _outcome(lambda: setattr(a, "x", 3)),
        "set_other": _outcome(lambda: setattr(a, "other", 3)),
        "delete": _outcome(lambda: delattr(a, "x")),
        "replace": repr(dataclasses.replace(a, x=5)).replace(cls.__name__, "C"),
        "fields": [(f.name, f.default, f.repr, f.compare) for f in dataclasses.fields(a)],
        "asdict": dataclasses.asdict(a),
        "is_dataclass": (dataclasses.is_dataclass(a), dataclasses.is_dataclass(cls)),
        "match": (cls.__match_args__, matched),
        "copies": (restored == a, restored.z, copy.copy(a) == a, copy.deepcopy(a) == a),
        "cached_property": a.double,
        "vars": vars(a),
        "frozen_error": FrozenInstanceError.__name__ == _outcome(lambda: setattr(a, "x", 3))[0],
    }


def test_a_value_class_behaves_as_the_frozen_dataclass():
    assert _behaviour(Value) == _behaviour(Reference)


def test_frozen_itself_is_no_dataclass():
    assert not dataclasses.is_dataclass(Frozen)
    assert not hasattr(Frozen, "__dataclass_fields__")


def _value_classes():
    for name in RUNTIME_MODULES:
        module = importlib.import_module(f"unum_entry.{name}")
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__ and (
                    issubclass(value, Frozen) or (issubclass(value, ReadOnly) and dataclasses.is_dataclass(value))):
                yield value  # (a ReadOnly class that declares its fields in its body is a dataclass too)


@pytest.mark.parametrize("cls", list(_value_classes()), ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
def test_init_matches_the_fields(cls):
    """Each `__init__` is written out next to the annotations: same names, order and defaults."""
    fields = dataclasses.fields(cls)
    if not fields:  # no __init__ of its own (as the dataclass's, it takes no arguments)
        assert cls() == cls()
        with pytest.raises(TypeError):
            cls(1)
        return
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        assert p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        if issubclass(cls, ReadOnly):  # (its slots take no default in the body: the defaults are __init__'s)
            continue
        expected = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert p.default == expected, f.name


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
from unum_entry.frozen import Frozen, ReadOnly
print(json.dumps({
    "value_classes_registered": [f"{cls.__module__}.{cls.__qualname__}" for cls in processed
                                 if issubclass(cls, (Frozen, ReadOnly))],
    "rare_path_modules": sorted(m for m in ("uuid", "random", "concurrent.futures", "base64", "jsonpath_ng",
                                            "unum_entry.asl") if m in new),  # of the Lambda adapter
}))
"""


def test_importing_the_adapters_defines_no_dataclass_for_value_classes_and_skips_rare_paths():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"value_classes_registered": [], "rare_path_modules": []}
