def handler(event, context):
    """Confirm the order (docs/versions.md edits this line to show which code ran)."""
    return {"order": event["order"], "confirmed_by": "v1"}
