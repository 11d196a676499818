def handler(event, context):
    """Take the order."""
    return {"order": event["order"]}
