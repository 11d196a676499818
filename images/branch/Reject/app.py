def handler(event, context):
    """Reject the order with its reasons (terminal)."""
    reasons = event["problems"] or [f"total {event['total']} exceeds the limit for tier {event['tier']!r}"]
    return {"order": event["order"], "decision": "rejected", "reasons": reasons}
