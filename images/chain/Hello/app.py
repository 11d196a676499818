def handler(event, context):
    """Greet whoever the input names."""
    return {"greeting": f"hello, {event.get('name', 'world')}"}
