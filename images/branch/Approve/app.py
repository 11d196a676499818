def handler(event, context):
    """Approve the order (terminal)."""
    return {"order": event["order"], "decision": "approved", "charge": event["total"]}
