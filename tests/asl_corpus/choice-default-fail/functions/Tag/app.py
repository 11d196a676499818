def handler(event, context):
    """Report which branch ran."""
    return {"ran": event["branch"], "value": event["input"].get("value")}
