"""Keeping what a process loaded before it runs its workflows out of the cycle collector's full passes.

CPython's cycle collector makes a full pass, over every object it tracks, once the objects that
reached its oldest generation since the last full pass number a quarter of those it kept then.
A process that runs workflows loads them first: every function's handler, IR and runtime (a
20,000-function chain is ~700,000 objects). A full pass that falls inside the run walks all of
it again: measured on that chain (`bench/engine.py`), one pass in the run took 0.22 s, 11 µs
per transition. Those objects live as long as the process does.

`freeze_loaded` moves every object tracked so far into the collector's permanent generation
(`gc.freeze`), which no pass walks: later passes walk only what came after. Reference counting
still frees a frozen object; only cyclic garbage that exists at the freeze is never collected.
So it is for a process whose heap is the engine's own, once it has loaded its workflow (the
`run` and `redrive` commands, a helper process), never for a library's caller: a test session
that made and dropped platforms would keep their cycles for good.
"""

from __future__ import annotations

import gc


def freeze_loaded() -> None:
    """Keep every object alive now out of the cycle collector's later passes (module docstring).
    Call once the workflow is loaded, before it runs. O(1): it moves lists, copies nothing."""
    gc.freeze()
