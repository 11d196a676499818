def handler(event, context):
    """n + 1."""
    return {"n": event["n"] + 1}
