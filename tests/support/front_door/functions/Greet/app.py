def handler(event, context):
    """Greet the caller; pass `wait` through (the Choice after it reads it)."""
    return {"greeting": f"hello {event.get('name', 'world')}", "wait": bool(event.get("wait", False))}
