"""Invokers: asynchronous invoke of a function by name. `open_invoker` picks one by URL.

- `lambda://?prefix=STACK-&region=us-east-1&endpoint=http://127.0.0.1:PORT`: Lambda `Invoke`
  with `InvocationType=Event` (see `unum_entry.invokers.aws_lambda`).
- `pubsub://PROJECT?prefix=unum-chain-`: publish to the function's Pub/Sub topic (see
  `unum_entry.invokers.pubsub`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from unum_entry.errors import ConfigurationError
from unum_entry.stores.base import Store

if TYPE_CHECKING:
    from unum_entry.envelope import Envelope
    from unum_entry.plan import FanOutCalls


class Invoker(Protocol):
    """Asynchronous invocation of a function by name (Lambda Event invoke, Pub/Sub, local queue)."""

    def invoke(self, function: str, payload: dict[str, Any]) -> None:
        """Queue one invocation; return once the platform accepted it."""

    def invoke_at(self, when: float, function: str, payload: dict[str, Any], *, name: str) -> None:
        """A durable timer: deliver `payload` to `function` at or after `when` (epoch seconds,
        the store's clock) through the platform's own scheduler (EventBridge Scheduler, Cloud
        Tasks, the embedded engine's durable queue); return once the platform has recorded it.

        A timer is an invocation like any other. `name` (`unum_entry.naming.timer_name`) is
        deterministic, so every execution that arms the same timer arms the same one; a platform
        may still deliver it more than once, early or late (a scheduler is at-least-once), and
        the receiving runtime absorbs that (its commit is create-if-absent; an early delivery
        re-arms itself). Arming a name that is already armed is not an error.
        """


class EnvelopeInvoker(Invoker, Protocol):
    """An invoker that also takes the `Envelope` itself, skipping its wire form: the embedded
    engine's (unum_entry.local.platform), whose next execution runs in the same process. Egress
    uses `invoke_envelope` when its invoker has it; the cloud invokers do not."""

    def invoke_envelope(self, function: str, envelope: Envelope) -> None:
        """`invoke(function, envelope.to_wire())` without the wire: the receiver must still get
        a private copy of every value (unum_entry.local.handoff). Raises what encoding the
        envelope raises (UnencodableValue, ValueError, RecursionError) for a value that a wire
        could not carry, so the sender can fall back to sending it by reference."""


class FanOutInvoker(EnvelopeInvoker, Protocol):
    """An `EnvelopeInvoker` that also takes a whole fan-out at once (the embedded engine's):
    it queues (the calls, a position) per call and builds each call only when it is delivered."""

    def invoke_fan_out(self, calls: FanOutCalls) -> bool:
        """Accept every call of `calls`, or none: False when this invoker declines (egress then
        sends them one by one). Accepted, each receiver still gets a private copy of every
        value, and a value that a wire could not carry travels by reference."""


def open_invoker(url: str, *, store: Store | None = None, **kwargs: Any) -> Invoker:
    """Open an invoker from a URL. `store` lets invokers send oversized envelopes by reference."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme == "lambda":
        from unum_entry.invokers.aws_lambda import LambdaInvoker  # lazy: boto3 is heavy

        return LambdaInvoker.from_url(url, store=store, **kwargs)
    if scheme == "pubsub":
        from unum_entry.invokers.pubsub import PubSubInvoker  # lazy: google-cloud-pubsub is heavy

        return PubSubInvoker.from_url(url, store=store, **kwargs)
    raise ConfigurationError(f"unknown invoker URL {url!r}: use lambda://?prefix=… or pubsub://PROJECT?prefix=…")


__all__ = ["EnvelopeInvoker", "Invoker", "open_invoker"]
