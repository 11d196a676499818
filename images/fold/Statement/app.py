def handler(event, context):
    """Format the closing statement (amounts back in units)."""
    return {"closing_balance": event["balance"] / 100, "lowest_balance": event["lowest"] / 100,
            "overdrawn": event["lowest"] < 0, "running": [b / 100 for b in event["history"]]}
