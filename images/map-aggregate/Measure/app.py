def handler(event, context):
    """Measure one word: its length and the square of its length."""
    return {"word": event, "length": len(event), "square": len(event) ** 2}
