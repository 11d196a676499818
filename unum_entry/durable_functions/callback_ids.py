"""Callback ids of durable executions: how an id names its waiting execution and operation
(the format in unum_entry.durable_functions.callbacks' docstring), made by the service when a
CALLBACK START wins its log slot and parsed by whoever completes it. Below both, so neither
imports the other for it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from unum_entry.errors import UnumError
from unum_entry.opaque_text import opaque_fields, opaque_text

PREFIX = "unumcb1."


class DurableCallbackError(UnumError):
    """A callback completion was refused."""


class InvalidCallbackId(DurableCallbackError):
    pass


class CallbackAlreadyCompleted(DurableCallbackError):
    pass


def callback_id(meta: Mapping[str, Any], operation_id: str, nonce: str) -> str:
    return opaque_text(PREFIX, [meta.get("Workflow"), meta.get("Function"), meta.get("Frames"), meta.get("Invocation"),
                                operation_id, nonce])


@dataclass(frozen=True)
class CallbackRef:
    workflow: str
    function: str
    frames: list[list[int]]
    invocation: str
    operation_id: str
    nonce: str

    @classmethod
    def parse(cls, text: str) -> CallbackRef:
        try:
            workflow, function, frames, invocation, operation_id, nonce = opaque_fields(PREFIX, text)
            if not all(isinstance(v, str) and v for v in (workflow, function, invocation, operation_id, nonce)):
                raise ValueError("fields")
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise InvalidCallbackId(f"not a unum durable callback id: {str(text)[:40]!r}") from exc
        return cls(workflow, function, [list(f) for f in frames], invocation, operation_id, nonce)
