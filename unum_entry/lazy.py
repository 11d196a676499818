"""Lazy exports (PEP 562), the one way a package of unum_entry hands on names: each name is
imported from its module on first use, so importing the package imports none of its modules
(a function's cold start pays only for what it uses)."""

from __future__ import annotations

import sys
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of `package` (its `__name__`), whose public
    names are `exports` (name -> the dotted module that defines it). `__getattr__(name)` imports
    that module and returns its `name` each time it is asked (nothing is cached on the package:
    a submodule of the same name, once imported, is what the package attribute then is, as
    Python binds it); a name not exported raises AttributeError as a module's would.
    `__dir__()` lists the package's own names and the exports."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module), name)

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
