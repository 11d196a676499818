"""Value classes: one mechanism, `ReadOnly`, cheap to define (cold start) and to build (hot path).

A value class is written

    class Frame(ReadOnly):
        __slots__ = ("index", "size")

        index: Final[int]
        size: Final[int]

        def __init__(self, index: int = 0, size: int = 1) -> None:
            self.index = index
            self.size = size

Its fields are its `__slots__` (and its `ReadOnly` bases'); `ReadOnly` gives equality and hash
over them (instances of the same class only), the dataclass repr, and `match` positions. Each
field is `Final`, so mypy (which CI runs) refuses a write outside `__init__`; nothing refuses
one at run time. A class that also declares its fields in its body (`name: Final[type]`, no
default: the defaults are `__init__`'s) is a dataclass to `dataclasses.replace`, `fields`,
`asdict` and `is_dataclass`, registered on first use without generating any method.

Why not `@dataclass(frozen=True, slots=True)` (or `slots=True` alone), measured side by side on
the workloads users run (bench/fastpaths-report.txt; docs/embedded-engine.md, "Value classes
and fast paths"): the dataclass generates and compiles its methods when each class is defined,
which costs a Lambda or Cloud Run cold start some 14 % of the adapters' import CPU for the
value classes on that path; and a frozen dataclass's `__init__` stores each field through
`object.__setattr__`, dearer per transition than plain stores into slots. The price is each
field written three times (its slot, its annotation, its `__init__` store); test_frozen checks
that the three agree for every value class.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from operator import attrgetter
from reprlib import recursive_repr
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from dataclasses import Field

_MARK = "__frozen_fields__"  # a ReadOnly class's own field names declared in its body, in order
_registering = threading.RLock()


def _register(cls: type) -> dict[str, Field[Any]]:
    """The dataclass fields of a value class: `dataclasses` processes the class (and its value
    class bases) once, on first use, without generating any method."""
    from dataclasses import dataclass  # lazy: see the module docstring

    with _registering:
        for klass in reversed(cls.__mro__):
            if _MARK in klass.__dict__ and "__dataclass_fields__" not in klass.__dict__:
                dataclass(init=False, repr=False, eq=False, match_args=False)(klass)
    return cls.__dataclass_fields__  # type: ignore[attr-defined, no-any-return]


class _Fields:
    """`ReadOnly.__dataclass_fields__`: registers the value class on first access (registration
    stores the fields in the class itself, which then shadows this descriptor)."""

    def __get__(self, instance: Any, owner: type) -> dict[str, Field[Any]]:
        value_class = next((klass for klass in owner.__mro__ if _MARK in klass.__dict__), None)
        if value_class is None:  # ReadOnly itself, or a class declaring no field in its body: no dataclass
            raise AttributeError("__dataclass_fields__")
        return _register(value_class)


def _tuple_getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function from an instance to the tuple of its attributes `names` (C-level for two or more)."""
    if len(names) >= 2:
        get: Callable[[Any], tuple[Any, ...]] = attrgetter(*names)  # a tuple for two names or more
    elif names:
        one = attrgetter(names[0])
        get = lambda instance: (one(instance),)  # noqa: E731
    else:
        get = lambda instance: ()  # noqa: E731
    return get


class ReadOnly:
    """The methods of every value class (the module docstring): equality and hash over its
    compared fields (instances of the same class only), a repr, `match` positions, and nothing
    else. Its `__slots__` are its fields, in order; its `__init__` stores each as a plain
    attribute annotated `Final`, so mypy refuses any other write (`unum_entry.egress` shows one).

    Its fields are its slots and those of its `ReadOnly` bases (a subclass's added after its
    base's); equality, hash and repr cover them all, unless a class names the ones equality and
    hash cover (`_compared`, a class attribute) or the ones repr shows (`_shown`); its subclasses
    keep those and extend them with their own slots, unless they name theirs."""

    __slots__ = ()
    _compared: ClassVar[tuple[str, ...]] = ()
    _shown: ClassVar[tuple[str, ...]] = ()  # what repr shows
    _values: ClassVar[staticmethod[[Any], tuple[Any, ...]]]  # the compared fields' values, as one tuple
    if TYPE_CHECKING:  # what `dataclasses.replace` expects of a dataclass
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    else:
        __dataclass_fields__ = _Fields()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = tuple(cls.__dict__.get("__slots__", ()))
        if "_shown" not in cls.__dict__:
            cls._shown = (*cls._shown, *own)  # (the base's, inherited, then its own)
        if "_compared" not in cls.__dict__:
            cls._compared = (*cls._compared, *own)
        cls._values = staticmethod(_tuple_getter(cls._compared))
        if "__match_args__" not in cls.__dict__:  # every field, in order (its bases' first)
            setattr(cls, "__match_args__", (*getattr(super(cls, cls), "__match_args__", ()), *own))
        annotated = tuple(cls.__dict__.get("__annotations__", {}))
        if annotated:  # its fields declared in the class body (`name: Final[type]`): `dataclasses.replace` works
            setattr(cls, _MARK, annotated)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        get = self._values
        return bool(get(self) == get(other))

    def __hash__(self) -> int:
        return hash(self._values(self))

    @recursive_repr()
    def __repr__(self) -> str:
        cls = self.__class__
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in cls._shown)
        return f"{cls.__qualname__}({shown})"
