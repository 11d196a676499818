def handler(event, context):
    """Find the phone."""
    return {"phone": "555-0100", "customer": event["customer"]}
