def handler(event, context):
    """Report how the sequence ended."""
    return {"start": event["start"], "steps": event["steps"], "peak": event["peak"],
            "reached_one": event["n"] == 1}
