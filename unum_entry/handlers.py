"""Loading a function's handler from its folder: the one rule for how user code is imported.

It sits above the runtime and the durable-functions layer (docs/architecture.md): a handler
written for the Lambda durable functions SDK is wrapped in its adapter here, so the runtime
itself never names a front end.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import threading
from pathlib import Path

from unum_entry.errors import HandlerLoadError
from unum_entry.runtime import Handler

_IMPORTING = threading.RLock()  # one handler import (and its sys.path entry) at a time; re-entrant: a compiled ASL main module loads the user handler while being imported


def load_handler(function_dir: str | Path, spec: str, *, function: str) -> Handler:
    """Import `module.attr` from a function's folder under a private module name, so functions
    with the same module name (every `app.py`) do not collide in one process. Sibling modules of
    the handler import as usual (the folder is on `sys.path` while the handler module is
    imported, and removed after: `sys.path` is left as it was)."""
    module_name, _, attr = spec.rpartition(".")
    folder = Path(function_dir)
    path = folder / (module_name.replace(".", "/") + ".py")
    if not path.is_file():
        found = sorted(p.name for p in folder.glob("*.py"))
        raise HandlerLoadError(f"function {function!r}: handler {spec!r} expects {path}, which does not exist"
                               f" (found: {', '.join(found) or 'no .py files'})")
    import uuid  # lazy: once per process, at init

    unique = f"unum_fn_{uuid.uuid5(uuid.NAMESPACE_URL, str(path.resolve())).hex}"
    module_spec = importlib.util.spec_from_file_location(unique, path)
    if module_spec is None or module_spec.loader is None:
        raise HandlerLoadError(f"function {function!r}: cannot load {path}")
    module = importlib.util.module_from_spec(module_spec)
    entry = str(folder)
    with _IMPORTING:  # the folder is on sys.path only while its handler module runs its imports
        sys.path.insert(0, entry)  # so the handler can import its sibling modules
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:
            raise HandlerLoadError(f"function {function!r}: importing {path} failed: {type(exc).__name__}: {exc}") from exc
        finally:
            sys.path.remove(entry)  # the first occurrence: the one inserted above
    handler = getattr(module, attr, None)
    if not callable(handler):
        names = sorted(n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_"))
        raise HandlerLoadError(f"function {function!r}: {path.name} is expected to contain a function named "
                               f"{attr!r}. Found: {', '.join(names) or 'no functions'}")
    from unum_entry.durable_functions.adapter import adapt  # lazy: not on the import path of a platform adapter

    return adapt(handler)  # a Lambda durable functions handler runs through its adapter
