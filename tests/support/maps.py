"""A map + sum workflow's functions, as tests write them (unum_entry.workflow.write_workflow)."""

from __future__ import annotations

from unum_entry.workflow import FunctionSource


def map_sum(width: int) -> dict[str, FunctionSource]:
    """Split returns `range(width)`, each Item doubles its item and joins Sum, which sums them."""
    return {
        "Split": FunctionSource(f"def handler(event, context):\n    return list(range({width}))\n",
                                [{"op": "create_set", "function": "Sum", "shape": "aggregate"},
                                 {"op": "map", "function": "Item"}]),
        "Item": FunctionSource("def handler(event, context):\n    return event * 2\n",
                               [{"op": "fan_in", "function": "Sum"}]),
        "Sum": FunctionSource("def handler(event, context):\n    return sum(event)\n", []),
    }
