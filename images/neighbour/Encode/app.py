def handler(event, context):
    """Encode one chunk on its own: a keyframe 'K<v>' then deltas '+d' / '-d'."""
    deltas = [f"{b - a:+d}" for a, b in zip(event, event[1:])]
    return {"first": event[0], "last": event[-1], "tokens": [f"K{event[0]}"] + deltas}
