"""Immutable value classes that cost next to nothing to define (cold start).

`@dataclass(frozen=True)` writes its methods (`__init__`, `__repr__`, `__eq__`, `__hash__`,
`__setattr__`, `__delattr__`) as source text and compiles them when the class is defined: about
half a millisecond per class in a function image, and the runtime has some thirty value classes
on the adapter's import path, so every cold start paid for it. A value class here is written

    @frozen
    class Frame(Frozen):
        index: int
        size: int

        def __init__(self, index: int = 0, size: int = 1) -> None:
            self.__dict__.update(index=index, size=size)

and behaves like the frozen dataclass it replaces:

- `Frozen` supplies, written once here, what the dataclass generated: equality and hash over the
  compared fields (instances of the same class only), the dataclass repr, and immutability
  (`dataclasses.FrozenInstanceError`).
- The `__init__` is written out, so it is compiled once, into the .pyc. It sets the fields in
  order through the instance `__dict__`, as the generated one did through `object.__setattr__`.
- `dataclasses.replace`, `fields`, `asdict` and `is_dataclass` work on it as before
  (`field(repr=False, compare=False)` too), and `match` sees the fields in order. The class is
  registered with `dataclasses` (fields only, no code generated) the first time anything asks
  for its `__dataclass_fields__`, so importing a module of value classes needs neither the
  registration nor the `dataclasses` module itself.

The value classes built at every delivery (an envelope, a plan, a set's state, the handler's
context, ...) are `ReadOnly` instead: slotted, their `__init__` plain attribute stores, read-only
by type (`Final`: mypy refuses a write) rather than at run time. Its docstring says why.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from operator import attrgetter
from reprlib import recursive_repr
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from dataclasses import Field

_C = TypeVar("_C", bound=type)

_MARK = "__frozen_fields__"  # set by @frozen: the class's own annotated field names, in order
_registering = threading.RLock()

# Per class: the names of the fields repr shows, equality compares, and the hash covers.
_REPR: dict[type, tuple[str, ...]] = {}
_COMPARE: dict[type, tuple[str, ...]] = {}
_HASH: dict[type, tuple[str, ...]] = {}
# Per class: the compared (hashed) fields' values as one tuple, read by a C-level getter.
_COMPARED: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
_HASHED: dict[type, Callable[[Any], tuple[Any, ...]]] = {}


def frozen(cls: _C) -> _C:
    """Mark a `Frozen` subclass as a value class: its annotations are its fields, in order (the
    class writes its `__init__` and inherits the other methods)."""
    names = tuple(cls.__dict__.get("__annotations__", {}))
    setattr(cls, _MARK, names)
    if "__match_args__" not in cls.__dict__:
        cls.__match_args__ = names  # type: ignore[attr-defined, misc]
    return cls


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
    """`Frozen.__dataclass_fields__`: registers the value class on first access (registration
    stores the fields in the class itself, which then shadows this descriptor)."""

    def __get__(self, instance: Any, owner: type) -> dict[str, Field[Any]]:
        value_class = next((klass for klass in owner.__mro__ if _MARK in klass.__dict__), None)
        if value_class is None:  # Frozen itself, or a subclass not marked @frozen: no dataclass
            raise AttributeError("__dataclass_fields__")
        return _register(value_class)


def _names(table: dict[type, tuple[str, ...]], cls: type) -> tuple[str, ...]:
    names = table.get(cls)
    if names is None:
        every = cls.__dataclass_fields__.values()  # type: ignore[attr-defined]
        _REPR[cls] = tuple(f.name for f in every if f.repr)
        _COMPARE[cls] = tuple(f.name for f in every if f.compare)
        _HASH[cls] = tuple(f.name for f in every if (f.compare if f.hash is None else f.hash))
        names = table[cls]
    return names


def _values(table: dict[type, Callable[[Any], tuple[Any, ...]]], names: tuple[str, ...],
            cls: type) -> Callable[[Any], tuple[Any, ...]]:
    """A function from an instance of `cls` to the tuple of its `names` fields (remembered)."""
    get = table[cls] = _tuple_getter(names)
    return get


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


def _frozen_error(message: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


class Frozen:
    """The methods `@dataclass(frozen=True)` generates, for every `@frozen` value class."""

    __slots__ = ()
    if TYPE_CHECKING:  # what `dataclasses.replace` and `fields` expect of a dataclass
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
    else:
        __dataclass_fields__ = _Fields()

    @recursive_repr()  # "..." for a value that contains itself, as the dataclass repr does
    def __repr__(self) -> str:
        cls = self.__class__
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _names(_REPR, cls))
        return f"{cls.__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        cls = self.__class__
        if other.__class__ is cls:
            get = _COMPARED.get(cls) or _values(_COMPARED, _names(_COMPARE, cls), cls)
            return bool(get(self) == get(other))
        return NotImplemented

    def __hash__(self) -> int:
        cls = self.__class__
        get = _HASHED.get(cls) or _values(_HASHED, _names(_HASH, cls), cls)
        return hash(get(self))

    def __setattr__(self, name: str, value: Any) -> None:
        if _MARK in type(self).__dict__ or name in self.__dataclass_fields__:
            raise _frozen_error(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if _MARK in type(self).__dict__ or name in self.__dataclass_fields__:
            raise _frozen_error(f"cannot delete field {name!r}")
        object.__delattr__(self, name)



class ReadOnly:
    """The methods of a value class made at every delivery (a plan, a join, a set's state):
    equality and hash over its compared fields (instances of the same class only), a repr, and
    nothing else. Its `__slots__` are its fields, in order; its `__init__` stores each as a plain
    attribute annotated `Final`, so mypy refuses any other write (`unum_entry.egress` shows one).
    A class that declares its fields in its body instead (`name: Final[type]`, no default: the
    defaults are `__init__`'s) is a dataclass to `dataclasses.replace`, `fields` and
    `is_dataclass`, registered on first use as a `Frozen` class is.

    Why not `Frozen`: a `Frozen` instance's `__init__` fills its `__dict__`, about twice the
    instructions of plain attribute stores into slots (~4,700 against ~2,300 for five fields,
    counted in the engine's run), and some ten such objects are made per transition. What it
    gives up is the run-time refusal of a write.

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
