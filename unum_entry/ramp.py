"""Which version a new workflow starts on while an alias ramps a new version (issue 44).

The choice is a pure function of the workflow id: a duplicate start of the same id (an
at-least-once retry) always picks the same version, so it never switches. `ramped` gets a
share `weight` (0.0-1.0) of workflow ids, uniformly: the first 8 bytes of SHA-256 of the id
are read as a fraction in [0, 1) and compared with the weight.
"""

from __future__ import annotations

import hashlib

from unum_entry.errors import UnumError


class RampWeightError(UnumError, ValueError):
    """A ramp weight outside 0.0-1.0 (or not a number)."""


def id_fraction(workflow_id: str) -> float:
    """The workflow id's place in [0, 1): the same id, the same place, on every machine."""
    digest = hashlib.sha256(workflow_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / float(1 << 64)


def pick_version(workflow_id: str, stable: str, ramped: str | None, weight: float) -> str:
    """`ramped` for a `weight` share of workflow ids, else `stable`. Raises RampWeightError for
    a weight outside 0.0-1.0; `ramped=None` (no ramp) always gives `stable`."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= float(weight) <= 1.0:
        raise RampWeightError(f"ramp weight {weight!r} is outside 0.0-1.0")
    if ramped is None:
        return stable
    return ramped if id_fraction(workflow_id) < float(weight) else stable
