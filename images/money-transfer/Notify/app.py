"""Notify both parties: a transactional outbox entry, then a (simulated) outside send that is
deduplicated by the step's idempotency key."""

from unum_entry.steps import durable

OUTBOX = "outbox"


def enqueue(tx, transfer, text, at):
    """Transactional outbox: the message is stored exactly once, keyed by the transfer."""
    if tx.get(OUTBOX, transfer) is None:
        tx.put(OUTBOX, transfer, {"text": text, "at": at})
    return transfer


@durable
def handler(event, ctx):
    text = f"{event['amount']} moved from {event['from']} to {event['to']}"
    at = ctx.now()  # recorded: every re-execution stores the same time
    ctx.transact("enqueue notification", enqueue, event["transfer"], text, at)
    return {
        "transfer": event["transfer"],
        "from": {"account": event["from"], "balance": event["from_balance"]},
        "to": {"account": event["to"], "balance": event["to_balance"]},
        "notified": text,
    }
