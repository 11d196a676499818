def handler(event, context):
    """Discount gold customers."""
    return {"total": event["amount"] * (0.9 if event["tier"] == "gold" else 1)}
